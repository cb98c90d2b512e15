// The seed's dispatch-order test for PtahSchema, its third part: each boundary, its two steps exchanged, fails with
// the problem it prevents, stage↔mark included (marked with nothing staged for its Job to read). The recovery rows
// are in dispatch-order-schema.test.ts and dispatch-order-schema-faults.test.ts.
import t from 'tap';
import { dispatchOrderTests, SCHEMA } from './dispatch-order-world.js';

dispatchOrderTests(t, SCHEMA, ['swapped']);
