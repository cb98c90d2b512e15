// The schema corpus, shard 3 of 3 (executor-corpus.ts).
import t from 'tap';
import { corpusTests } from './executor-corpus.js';

corpusTests(t, 2, 3);
