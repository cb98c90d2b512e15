// Each dispatch step, faulted, leaves a state the next pass recovers from with at most one Job ever created; and
// each boundary matters: the same row run with its two steps exchanged fails with the problem the boundary
// prevents (the seed's dispatch-order test, for PtahMigration; dispatch-order-schema.test.ts is PtahSchema's).
import t from 'tap';
import { dispatchOrderTests, MIGRATION } from './dispatch-order-world.js';

dispatchOrderTests(t, MIGRATION);
