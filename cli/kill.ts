// `trine kill TASK`: asks the group to kill a task (`task.kill`, PROTOCOL §8.1) and reports the
// outcome two replicas agree on: "t3 killed", or the group's refusal and exit 1.
import { loadCluster } from '../src/io/cluster-dir.ts';
import { CliError, EXIT_FAILED, EXIT_OK } from './errors.ts';
import { newNonce, OP_TIMEOUT_MS, requestOp } from './op-client.ts';
import { OperatorClient } from './status-client.ts';
import { parseTaskId } from './task-args.ts';

export async function kill(opts: { dir?: string | undefined; task: string; timeoutMs?: number | undefined }): Promise<number> {
  const task = parseTaskId(opts.task);
  const client = await OperatorClient.open(loadCluster(opts.dir));
  try {
    const outcome = await requestOp(client, { type: 'task.kill', nonce: newNonce(), task }, opts.timeoutMs ?? OP_TIMEOUT_MS);
    if (!outcome.ok) throw new CliError(`cannot kill ${task}: ${outcome.text}: see \`trine ps\``, EXIT_FAILED);
    process.stdout.write(`${task} killed\n`);
    return EXIT_OK;
  } finally {
    await client.close();
  }
}
