// `kubectl ptah repair` patches spec.repair against the resourceVersion its check read. The manager writes status
// while it works, which moves that version: a 409 is read and checked again (migration-repair.test.ts once failed
// on it in a full run), a few times, and never past a check that no longer holds. A client double answers, since
// the race cannot be timed on a real API server; the whole command runs against one in migration-repair.test.ts.
import t from 'tap';
import { repairCommand } from '../../src/cli/commands.js';
import { ApiError, type KubeClient } from '../../src/shared/kube-client.js';

interface Double {
  client: KubeClient;
  patches: string[];
}

/** Reads answer version 1, 2, …, dirty while `dirty(read)`; patches answer with `answers` in turn (then succeed). */
function double(answers: (number | undefined)[], dirty: (read: number) => boolean = () => true): Double {
  let reads = 0;
  const patches: string[] = [];
  const client = {
    tryGet: async () => {
      reads++;
      return { metadata: { name: 'orders', namespace: 'shop', resourceVersion: String(reads) }, spec: {}, status: { history: { dirty: dirty(reads), observedAt: '2026-12-05T07:00:00Z' } } };
    },
    patch: async (_ref: unknown, body: { metadata: { resourceVersion: string } }) => {
      patches.push(body.metadata.resourceVersion);
      const code = answers.shift();
      if (code !== undefined) throw new ApiError({ code, reason: code === 409 ? 'Conflict' : 'Forbidden' }, 'PATCH /apis/…/ptahmigrations/orders');
      return {};
    },
  } as unknown as KubeClient;
  return { client, patches };
}

const repair = { version: '2', resolution: 'finished' } as const;
const run = async (d: Double) => {
  const out: string[] = [];
  await repairCommand({ client: d.client, namespace: 'shop', out: (line) => out.push(line) }, 'orders', 'migration', repair);
  return out;
};

t.test('a conflict is read and checked again, and the patch made against the new version', async (t) => {
  const d = double([409, 409]);
  const out = await run(d);
  t.same(d.patches, ['1', '2', '3'], 'each attempt patches against the version it read');
  t.match(out.join('\n'), /spec\.repair set: the repair marks migration 2 finished/);
});

t.test('conflicts past the attempts are reported', async (t) => {
  const d = double([409, 409, 409, 409, 409]);
  await t.rejects(run(d), { name: 'ApiError', message: /409 Conflict/ });
  t.equal(d.patches.length, 5);
});

t.test('another refusal is reported at once', async (t) => {
  const d = double([403]);
  await t.rejects(run(d), { name: 'ApiError', message: /403 Forbidden/ });
  t.same(d.patches, ['1'], 'no second attempt');
});

t.test('a check that no longer holds on the new read ends it', async (t) => {
  const d = double([409], (read) => read === 1);
  await t.rejects(run(d), { name: 'CliError', message: /finds no dirty history row; there is nothing to repair/ });
  t.same(d.patches, ['1'], 'no patch after the row was found clean');
});
