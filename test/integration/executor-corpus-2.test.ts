// The schema corpus, shard 2 of 3 (executor-corpus.ts).
import t from 'tap';
import { corpusTests } from './executor-corpus.js';

corpusTests(t, 1, 3);
