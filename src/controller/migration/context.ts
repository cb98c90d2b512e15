// What one reconcile pass of a PtahMigration works with: the shared pass (src/controller/pass.ts) over a
// PtahMigration, with its status and the resource under the name the migration family's steps use.
import type { PtahMigration, PtahMigrationStatus } from '../../shared/api/migration-kinds.js';
import { KINDS } from '../../shared/api/names.js';
import { OwnerPass, type ManagerIdentity, type OwnerDeps } from '../pass.js';

export { endPass, type PassEnd } from '../pass.js';
export type MigrationManagerIdentity = ManagerIdentity;
export type MigrationDeps = OwnerDeps;

export class MigrationPass extends OwnerPass<PtahMigration> {
  constructor(deps: MigrationDeps, m: PtahMigration) {
    super(deps, m, KINDS.PtahMigration.kind);
  }

  get m(): PtahMigration {
    return this.obj;
  }

  set m(value: PtahMigration) {
    this.obj = value;
  }

  get status(): PtahMigrationStatus {
    return this.obj.status ?? {};
  }
}
