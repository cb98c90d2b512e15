// The operation Job: one builder for both families, the rebuild every judge holds a Job to, and the names it carries.
export * from './build.js';
export * from './rebuild.js';
export * from './metadata.js';
export { runnerOperationFor, isMutatingOperation } from './operations.js';
