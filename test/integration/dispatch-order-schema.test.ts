// The seed's dispatch-order test for PtahSchema, the one family that stages something (its plan's projection
// ConfigMaps, before the mark): each dispatch step, faulted, leaves a state the next pass recovers from with at
// most one Apply Job ever created and the database recording one Apply; each boundary, its two steps exchanged,
// fails with the problem it prevents (dispatch-order-schema-swapped.test.ts). Separate files from PtahMigration's
// so they run in parallel.
import t from 'tap';
import { dispatchOrderTests, SCHEMA } from './dispatch-order-world.js';

dispatchOrderTests(t, SCHEMA, 'recovery');
