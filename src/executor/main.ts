// The executor: `executor <command>`, the only process that opens the database. It reads its inputs from the
// environment the runner passes (EXECUTOR_ENV) and writes exactly one JSON report to stdout, in one write, at
// the end. Exit 0 when the report has no error, 1 when it has one, 2 when no report could be produced.
import { errorMessage } from './failure.js';
import { EXECUTOR_COMMANDS, isExecutorCommand, runCommand } from './run.js';

async function main(): Promise<number> {
  const command = process.argv[2];
  if (process.argv.length !== 3 || !isExecutorCommand(command)) {
    process.stderr.write(`usage: executor <${EXECUTOR_COMMANDS.join('|')}>\n`);
    return 2;
  }
  const report = await runCommand(command, process.env);
  await new Promise<void>((resolve, reject) => process.stdout.write(`${JSON.stringify(report)}\n`, (err) => (err ? reject(err) : resolve())));
  return report.error ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`executor: could not produce a report: ${errorMessage(err)}\n`);
    process.exit(2);
  },
);
