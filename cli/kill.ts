// `trine kill TASK` and `trine restart TASK`: ask the group to kill a task (`task.kill`) or to
// terminate and start it again with the restarted flag (`task.restart`, FsmTask T9; PROTOCOL
// §8.1), and report the outcome two replicas agree on, or the group's refusal and exit 1. With
// --json the report is a `trine.kill/1` or `trine.restart/1` object (cli/json-out.ts).
import { loadCluster } from '../src/io/cluster-dir.ts';
import { CliError, EXIT_FAILED, EXIT_OK } from './errors.ts';
import { emitJson, SCHEMAS } from './json-out.ts';
import { newNonce, OP_TIMEOUT_MS, requestOp } from './op-client.ts';
import { OperatorClient } from './status-client.ts';
import { parseTaskId } from './task-args.ts';

type TaskOp = 'kill' | 'restart';
const DONE: Record<TaskOp, string> = { kill: 'killed', restart: 'restarting' };

export type TaskOpOptions = { dir?: string | undefined; task: string; timeoutMs?: number | undefined; json?: boolean | undefined };

async function taskRequest(what: TaskOp, opts: TaskOpOptions): Promise<number> {
  const task = parseTaskId(opts.task);
  const client = await OperatorClient.open(loadCluster(opts.dir));
  try {
    const payload = { type: what === 'kill' ? ('task.kill' as const) : ('task.restart' as const), nonce: newNonce(), task };
    const outcome = await requestOp(client, payload, opts.timeoutMs ?? OP_TIMEOUT_MS);
    if (!outcome.ok) throw new CliError(`cannot ${what} ${task}: ${outcome.text}: see \`trine ps\``, EXIT_FAILED, 'REFUSED');
    if (opts.json === true) {
      emitJson(what === 'kill' ? SCHEMAS.kill : SCHEMAS.restart, { task, result: DONE[what], rsn: outcome.rsn, agreedBy: outcome.agreedBy, answer: outcome.text });
    } else {
      process.stdout.write(`${task} ${DONE[what]}\n`);
    }
    return EXIT_OK;
  } finally {
    await client.close();
  }
}

export const kill = (opts: TaskOpOptions) => taskRequest('kill', opts);
export const restart = (opts: TaskOpOptions) => taskRequest('restart', opts);
