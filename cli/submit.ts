// `trine submit [-n N] [--name X] [--env K=V]… [--cwd DIR] [--linked] [--recovery app|rollback
// [--logging L] [--checkpoint C] [--checkpoint-interval MS] [--max-state BYTES]] [--dgrp [--dgrp-interval MS]
// [--dgrp-zeta N] [--dgrp-factor X] [--dgrp-margin MS] [--dgrp-initial MS]] [--straggler] [--straggler-factor K]
// [--straggler-after Q] [--wait] -- CMD ARGS…`: signs a
// `task.submit` as the operator, sends it to every replica until two agree on the outcome
// (PROTOCOL §8.1) and prints the task id. With --wait it follows the task to its end, printing
// each change, and exits with the task's outcome (docs/OPERATIONS.md §1.1). With --json the same
// as JSON lines (cli/json-out.ts): `trine.submit/1` once accepted, then with --wait one
// `trine.task-change/1` per change and a last `trine.task-end/1` with the outcome and exit code.
import { loadCluster } from '../src/io/cluster-dir.ts';
import { CliError, EXIT_FAILED } from './errors.ts';
import { emitJson, SCHEMAS } from './json-out.ts';
import { newNonce, OP_TIMEOUT_MS, requestOp, VIEW_TIMEOUT_MS, ViewPoller } from './op-client.ts';
import { OperatorClient } from './status-client.ts';
import { buildSubmit, newTaskKey, requireCommand, TASK_ID_PATTERN, type DgrpInput, type RecoveryInput, type StragglerInput } from './task-args.ts';
import { isFinished, TaskWatch } from './task-report.ts';
import type { TaskView } from '../src/core/status.ts';

/** `--wait` polls the replicas' views this often: quick enough to show a short task's steps. */
export const WAIT_POLL_MS = 100;

export type SubmitOptions = {
  dir?: string | undefined;
  size?: number | undefined;
  name?: string | undefined;
  env?: string[] | undefined;
  cwd?: string | undefined;
  wait?: boolean | undefined;
  linked?: boolean | undefined;
  /** The recovery options as typed (PROTOCOL §11.1). */
  recovery?: RecoveryInput | undefined;
  /** The DGRP options as typed (PROTOCOL §12.1). */
  dgrp?: DgrpInput | undefined;
  /** The straggler policy as typed (PROTOCOL §13.1). */
  straggler?: StragglerInput | undefined;
  /** `--max-spawns` (issue 19); undefined for the default. */
  maxSpawns?: number | undefined;
  timeoutMs?: number | undefined;
  command: string[];
  /** Whether the command line had `--` (commander drops it). */
  sawDashDash: boolean;
  json?: boolean | undefined;
};

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const say = (line: string) => process.stdout.write(`${line}\n`);

export async function submit(opts: SubmitOptions): Promise<number> {
  const request = buildSubmit({
    command: requireCommand(opts.command, opts.sawDashDash),
    size: opts.size ?? 1,
    name: opts.name,
    env: opts.env ?? [],
    cwd: opts.cwd,
    baseCwd: process.cwd(),
    nonce: newNonce(),
    // The task's G-MPI key (PROTOCOL §9.5): only the operator draws it; the replicas keep it
    // and the agents hand it to the task's processes, so no process outside the task has it.
    taskKey: newTaskKey(),
    linked: opts.linked,
    recovery: opts.recovery,
    dgrp: opts.dgrp,
    straggler: opts.straggler,
    maxSpawns: opts.maxSpawns,
  });
  const client = await OperatorClient.open(loadCluster(opts.dir));
  try {
    const outcome = await requestOp(client, request, opts.timeoutMs ?? OP_TIMEOUT_MS);
    if (!outcome.ok) throw new CliError(`submit refused: ${outcome.text}`, EXIT_FAILED, 'REFUSED');
    if (!TASK_ID_PATTERN.test(outcome.text)) {
      throw new CliError(`the replicas accepted the submit but named no task id (${JSON.stringify(outcome.text)}): see \`trine ps\``, EXIT_FAILED);
    }
    const json = opts.json === true;
    if (json) emitJson(SCHEMAS.submit, { task: outcome.text, rsn: outcome.rsn, agreedBy: outcome.agreedBy, size: request.size, wait: opts.wait === true });
    else say(outcome.text);
    return opts.wait === true ? await waitForTask(client, outcome.text, outcome.rsn, json) : 0;
  } finally {
    await client.close();
  }
}

/** Follow `task` (accepted at `rsn`) until it finishes; its outcome is the exit code. */
async function waitForTask(client: OperatorClient, task: string, rsn: number, json: boolean): Promise<number> {
  const poller = new ViewPoller(client, VIEW_TIMEOUT_MS, (w) => process.stderr.write(`trine: ${w}\n`), task);
  const watch = new TaskWatch();
  for (;;) {
    const pick = await poller.next();
    // A view older than the submit may not list the task yet.
    if (pick !== null && pick.rsn >= rsn) {
      const t = pick.view.tasks.find((x) => x.id === task);
      if (t === undefined) throw new CliError(`${task} is no longer listed by the replicas: see \`trine ps\``, EXIT_FAILED, 'NO_TASK');
      for (const c of watch.changes(t)) {
        if (json) emitJson(SCHEMAS.taskChange, c);
        else say(c.text);
      }
      if (isFinished(t)) {
        const { code, reason } = watch.exitFor(t);
        if (reason !== null) process.stderr.write(`trine: ${reason}\n`);
        if (json) emitJson(SCHEMAS.taskEnd, taskEnd(t, code));
        return code;
      }
    }
    await sleep(WAIT_POLL_MS);
  }
}

/** The `trine.task-end/1` object: how the task ended and the exit code `submit --wait` exits
 *  with (docs/OPERATIONS.md §5.1). */
function taskEnd(t: TaskView, exitCode: number): Record<string, unknown> {
  return {
    task: t.id,
    state: t.state,
    outcome: t.outcome ?? (t.state === 'terminatedNormally' ? 'normal' : 'abnormal'),
    reason: t.reason,
    failure: t.failure,
    exitCode,
    procs: t.procs.map((p) => ({ vpid: p.vpid, node: p.node, pid: p.pid, state: p.state, exitCode: p.exitCode, signal: p.signal, reason: p.reason })),
  };
}
