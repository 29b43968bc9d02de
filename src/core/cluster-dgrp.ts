// A DGRP task in the manager's cluster state (docs/PROTOCOL.md §12): the submit's option
// checked, the testers' reports and the barrier arrivals its agents relay, and the view sent to
// the task's processes whenever the group, its live processes or its released round change.
// The rules themselves are in dgrp.ts; this module ties them to the task's processes and runs.
import {
  DGRP_MAX_FACTOR_PERCENT, DGRP_MAX_INITIAL_THRESHOLD_MS, DGRP_MAX_INTERVAL_MS, DGRP_MAX_MARGIN_MS, DGRP_MAX_ZETA,
  DGRP_MIN_FACTOR_PERCENT, DGRP_MIN_INTERVAL_MS,
} from './constants.ts';
import { note, perAgent, type Run } from './cluster-run.ts';
import { liveMembers, SIGNALLING } from './cluster-signals.ts';
import { isLive, notOnNode, procNode, taskState, type TaskRecord } from './cluster-state.ts';
import { applyReport, arrive, decide, forget, membersOf, tryRelease, viewOf, type DgrpChange } from './dgrp.ts';
import type { DgrpVerdict, TaskSubmit } from './wire/messages.ts';

/** Why the group refuses a submit's DGRP option (§12.1), or null. */
export function dgrpRefusal(req: TaskSubmit): string | null {
  const o = req.dgrp;
  if (o === null) return null;
  if (req.mode !== 'linked') return 'a DGRP needs a linked task: its processes test each other through the application library';
  const range = (name: string, v: number, min: number, max: number) => (v < min || v > max ? `DGRP ${name} must be ${min} to ${max}, got ${v}` : null);
  return range('interval', o.intervalMs, DGRP_MIN_INTERVAL_MS, DGRP_MAX_INTERVAL_MS)
    ?? range('zeta', o.zeta, 1, DGRP_MAX_ZETA)
    ?? range('factor (percent)', o.factorPercent, DGRP_MIN_FACTOR_PERCENT, DGRP_MAX_FACTOR_PERCENT)
    ?? range('margin', o.marginMs, 0, DGRP_MAX_MARGIN_MS)
    ?? range('initial threshold', o.initialThresholdMs, 1, DGRP_MAX_INITIAL_THRESHOLD_MS);
}

export type DgrpInput = { type: 'dgrp.report'; task: string; vpid: number; round: number; verdicts: DgrpVerdict[] }
  | { type: 'dgrp.arrive'; task: string; vpid: number; round: number };

/** A report or an arrival from the agent of `node`, speaking for its process (§12.2, §12.4),
 *  on `run` (the caller settles it). Whatever a process could get wrong is dropped and counted
 *  (`signals.dropped`), as its signals are. */
export function dgrpInput(run: Run, node: string | null, r: DgrpInput): void {
  const rec = run.cs.tasks.get(r.task);
  if (rec === undefined || !isLive(rec) || rec.dgrpState === null) return;
  const d = rec.dgrpState;
  const drop = (why: string): void => {
    rec.sigStats.dropped++;
    note(run, rec.id, r.vpid, `dropped ${r.type} from ${rec.id}/${r.vpid}: ${why}`);
  };
  const live = liveMembers(rec);
  if (!live.includes(r.vpid)) return drop('the sender is not a connected process of the task');
  const elsewhere = notOnNode(rec, r.vpid, node);
  if (elsewhere !== null) return drop(elsewhere);
  // Reports and arrivals count once the views went out, as signals do; before, and a
  // non-member's report (it may not know yet that it left), are routine: counted, not journalled.
  if (!SIGNALLING.includes(taskState(rec)) || d.sent === null) {
    rec.sigStats.dropped++;
    return;
  }
  if (r.type === 'dgrp.arrive') {
    arrive(d, live, r.vpid, r.round);
    return;
  }
  const out = applyReport(d, live, r.vpid, r.verdicts, (v) => procNode(rec, v) ?? '');
  if (out.ignored !== null) rec.sigStats.dropped++;
  journal(run, rec, out.changes);
}

function journal(run: Run, rec: TaskRecord, changes: readonly DgrpChange[]): void {
  for (const c of changes) {
    const by = c.by.join(',');
    note(run, rec.id, c.vpid, c.kind === 'removed'
      ? `${rec.id}/${c.vpid} left the DGRP: tested not recommended by ${by}`
      : `${rec.id}/${c.vpid} rejoined the DGRP: ${c.by.length === 0 ? 'no member was left' : `recommended again by ${by}`}`);
  }
}

/** After every input (cluster-machines.ts settle): forget processes that left, apply what their
 *  departure decides (a smaller group needs fewer accusers, a barrier may be complete), and send
 *  a new view when anything a process sees changed. Views start once the mapping went out. */
export function refreshDgrp(run: Run, rec: TaskRecord): void {
  const d = rec.dgrpState;
  if (d === null || !isLive(rec) || !SIGNALLING.includes(taskState(rec))) return;
  const live = liveMembers(rec);
  if (live.length === 0) return;
  const before = d.sent === null ? null : { members: d.sentMembers.join(','), live: d.sent.join(','), released: d.sentReleased };
  // A departure may decide a removal (fewer nodes need fewer accusers) or end a group with no
  // member; nothing else does here: the report that changed the group has decided already, and
  // deciding again would set the bar again from the smaller group.
  const departed = (d.sent ?? []).filter((v) => !live.includes(v));
  for (const v of departed) forget(d, v);
  if (departed.length > 0) journal(run, rec, decide(d, live, (v) => procNode(rec, v) ?? ''));
  tryRelease(d, live);
  const now = { members: membersOf(d, live).join(','), live: live.join(','), released: d.released };
  if (before !== null && before.members === now.members && before.live === now.live && before.released === now.released) return;
  d.view++;
  d.sent = [...live];
  d.sentMembers = membersOf(d, live);
  d.sentReleased = d.released;
  if (before !== null && before.members !== now.members) note(run, rec.id, null, `${rec.id} DGRP view ${d.view}: ${now.members || 'no members'}`);
  const view = viewOf(d, live, (v) => rec.endpoints.get(v) ?? '');
  perAgent(run, rec, live, (vpids) => ({ type: 'proc.dgrp', task: rec.id, vpids, ...view }));
}

/** Every live DGRP task, after an input. */
export function refreshDgrps(run: Run): void {
  for (const rec of run.cs.tasks.values()) if (rec.dgrpState !== null) refreshDgrp(run, rec);
}
