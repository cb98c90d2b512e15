// The seed's dispatch-order test for PtahSchema, the one family that stages something (its plan's projection
// ConfigMaps, before the mark): each dispatch step, faulted at its boundary, leaves a state the next pass recovers
// from with at most one Apply Job ever created and the database recording one Apply. Its other parts run from
// their own files, in parallel with this one: every other fault of a step's write
// (dispatch-order-schema-faults.test.ts) and each boundary with its two steps exchanged
// (dispatch-order-schema-swapped.test.ts). Separate files from PtahMigration's so they run in parallel.
import t from 'tap';
import { dispatchOrderTests, SCHEMA } from './dispatch-order-world.js';

dispatchOrderTests(t, SCHEMA, ['boundaries']);
