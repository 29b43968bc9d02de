// A task's straggler policy in the manager's cluster state (docs/PROTOCOL.md §13): the progress
// reports its agents relay, and after every input the rule (straggler.ts) applied to the task's
// processes as they stand, each change journalled and broadcast to the task's members as
// GSIG_NTF_STRAGGLER. The manager never kills a straggler: what to do is the application's call.
import { note, type Run } from './cluster-run.ts';
import { broadcastSignal, liveMembers, SIGNALLING } from './cluster-signals.ts';
import { isLive, notOnNode, procState, taskState, type TaskRecord } from './cluster-state.ts';
import { GSIG, GSIG_CM } from './signals.ts';
import { judge, recordProgress, type ProcStanding, type StragglerChange } from './straggler.ts';

export type ProgressInput = { task: string; vpid: number; permille: number };

/** A progress report from the agent of `node`, speaking for its process (§13.2), on `run` (the
 *  caller settles it, which judges). What a process could get wrong is dropped and counted
 *  (`signals.dropped`), as its signals are. */
export function progressInput(run: Run, node: string | null, r: ProgressInput): void {
  const rec = run.cs.tasks.get(r.task);
  if (rec === undefined || !isLive(rec)) return;
  const drop = (why: string | null): void => {
    rec.sigStats.dropped++;
    if (why !== null) note(run, rec.id, r.vpid, `dropped progress from ${rec.id}/${r.vpid}: ${why}`);
  };
  // A task without a policy keeps no progress; a report before the mapping went out, or from a
  // process that has just ended, is routine: counted, not journalled.
  if (rec.stragglerState === null || !SIGNALLING.includes(taskState(rec)) || !liveMembers(rec).includes(r.vpid)) return drop(null);
  const elsewhere = notOnNode(rec, r.vpid, node);
  if (elsewhere !== null) return drop(elsewhere);
  if (!recordProgress(rec.stragglerState, r.vpid, r.permille)) drop(`${r.permille} ‰ is more than the whole`);
}

/** How `vpid` of `rec` stands for the rule: running, ended normally (done), or out. */
function standingOf(rec: TaskRecord, vpid: number): ProcStanding {
  const d = rec.procs.get(vpid);
  if (d === undefined) return 'out';
  const state = procState(d);
  return state === 'running' ? 'running' : state === 'terminatedNormally' ? 'done' : 'out';
}

const percent = (permille: number): number => Math.floor(permille / 10);

function announce(run: Run, rec: TaskRecord, c: StragglerChange): void {
  const at = `${rec.id}/${c.vpid}`;
  note(run, rec.id, c.vpid, c.kind === 'flagged'
    ? `${at} is a straggler: ${percent(c.permille)} % done, the median ${percent(c.medianPermille)} %`
    : `${at} is no longer a straggler: ${percent(c.permille)} % done, the median ${percent(c.medianPermille)} %`);
  // The flag's arg is the VPID; the unflag's is −1 − VPID (negative even for VPID 0), so one
  // signal number carries both and a handler tells them apart by the sign (PROTOCOL §13.3).
  broadcastSignal(run, rec, GSIG.NTF_STRAGGLER, GSIG_CM, c.kind === 'flagged' ? c.vpid : -1 - c.vpid);
}

/** After every input (cluster-machines.ts settle): the rule over every live task with a policy.
 *  A task that is not signalling (starting, restarting, ending) is left as it is. */
export function judgeStragglers(run: Run): void {
  for (const rec of run.cs.tasks.values()) {
    const s = rec.stragglerState;
    if (s === null || rec.straggler === null || !isLive(rec) || !SIGNALLING.includes(taskState(rec))) continue;
    for (const c of judge(s, rec.straggler, (v) => standingOf(rec, v))) announce(run, rec, c);
  }
}
