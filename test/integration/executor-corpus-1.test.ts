// The schema corpus, shard 1 of 3 (executor-corpus.ts).
import t from 'tap';
import { corpusTests } from './executor-corpus.js';

corpusTests(t, 0, 3);
