// The seed's dispatch-order test for PtahSchema, its second part: every other fault a step's durable write can
// meet (its write failing, the process stopping right after it) leaves a state the next pass recovers from, and a
// manager stopped between the mark and the create leaves an unknown outcome with no Job ever created. The
// boundary rows are in dispatch-order-schema.test.ts, the exchanged steps in dispatch-order-schema-swapped.test.ts.
import t from 'tap';
import { dispatchOrderTests, SCHEMA } from './dispatch-order-world.js';

dispatchOrderTests(t, SCHEMA, ['write-faults']);
