// The dynamic group of recommended processes as the manager group keeps it (docs/PROTOCOL.md
// §12; spec 2.2.3–2.2.6): per DGRP task, the event counters (the syndrome), every tester's
// latest verdicts, the membership rule, removal, rejoin and the round barrier. Pure and
// deterministic (STYLE.md 1): every replica applies the same reports in the same RSN order and
// reaches the same group, so the group's total order stands in for the paper's reliable
// broadcast of syndromes and for its Paxos rounds (§12.3 says why that is a departure, and why
// it is safe).
//
// The rules, over `live` (the task's processes that run and are connected, VPID order):
// - A process's counter is even while it is recommended (spec 2.2.3); members = live processes
//   with an even counter. Counters only grow.
// - A report counts only from a member (spec 2.2.3: information from outside is ignored), and
//   replaces that tester's previous verdicts: a process it no longer names passed.
// - Removal (spec 2.2.4, made Byzantine-safe): a member is removed, its counter made odd, when
//   at least min(DGRP_ACCUSERS, members − 1) other members' latest verdicts fail it. The paper
//   removes on one verdict; here one lying tester cannot remove a correct process while the
//   group has three members or more.
// - Rejoin (spec 2.2.5): a live non-member rejoins, its counter made even, when some member has
//   counted ζ consecutive passes for it and more than half the members have counted more than
//   ζ/2: each member's latest report is its vote, and the total order makes one decision.
// - A group whose members have all ended or died takes back its live processes: no one is left
//   to test them, and a group with no member would never release a barrier.
// - Barrier (spec 2.2.6): round r is released when every member has arrived at it; the view the
//   release carries is the same for every process, since it is one ordered message.
import { ok } from '../base/result.ts';
import { DGRP_ACCUSERS, MAX_TASK_PROCS } from './constants.ts';
import { dgrpOptions, dgrpVerdict, type DgrpEntry, type DgrpOptions, type DgrpVerdict, type DgrpView } from './wire/dgrp.ts';
import { list, nullable, struct, uint, type Schema } from './wire/schema.ts';

export type DgrpState = {
  options: DgrpOptions;
  /** VPID → its event counter; a live process absent here has 0 (recommended). */
  counters: Map<number, number>;
  /** Tester VPID → (tested VPID → that tester's latest verdict). */
  verdicts: Map<number, Map<number, DgrpVerdict>>;
  /** Views sent, counted from 0; the last one listed the live processes `sent` (null: none
   *  sent yet), of which `sentMembers` were members, and had released `sentReleased`. */
  view: number;
  sent: number[] | null;
  sentMembers: number[];
  sentReleased: number;
  /** The last round whose barrier was released (0: none). */
  released: number;
  /** VPID → the highest round it arrived at. */
  arrived: Map<number, number>;
  /** For `trine ps` and the bench: removals and rejoins decided. */
  removals: number;
  rejoins: number;
};

export function createDgrpState(options: DgrpOptions): DgrpState {
  return {
    options: { ...options }, counters: new Map(), verdicts: new Map(), view: 0, sent: null, sentMembers: [], sentReleased: 0, released: 0, arrived: new Map(), removals: 0, rejoins: 0,
  };
}

/** A restart (FsmTask T9) starts the group afresh: every process of the new start is new. */
export function resetDgrp(d: DgrpState): void {
  d.counters.clear();
  d.verdicts.clear();
  d.arrived.clear();
  d.sent = null;
  d.sentMembers = [];
  d.sentReleased = 0;
  d.released = 0;
}

export const counterOf = (d: DgrpState, vpid: number): number => d.counters.get(vpid) ?? 0;
export const isRecommended = (d: DgrpState, vpid: number): boolean => counterOf(d, vpid) % 2 === 0;
export const membersOf = (d: DgrpState, live: readonly number[]): number[] => live.filter((v) => isRecommended(d, v));

/** What one report changed, for the journal. */
export type DgrpChange = { kind: 'removed' | 'rejoined'; vpid: number; by: number[] };
export type ReportOutcome = { ignored: string | null; changes: DgrpChange[] };

/** A tester's report of one testing interval (§12.2). */
export function applyReport(d: DgrpState, live: readonly number[], tester: number, verdicts: readonly DgrpVerdict[]): ReportOutcome {
  if (!live.includes(tester)) return { ignored: 'the tester is not a live process of the task', changes: [] };
  if (!isRecommended(d, tester)) return { ignored: 'the tester is not in the group (spec 2.2.3: its information is ignored)', changes: [] };
  const latest = new Map<number, DgrpVerdict>();
  for (const v of verdicts) if (v.vpid !== tester && live.includes(v.vpid)) latest.set(v.vpid, { ...v });
  d.verdicts.set(tester, latest);
  return { ignored: null, changes: decide(d, live) };
}

/** Removals first, one at a time in VPID order (a removed member's own verdicts stop counting
 *  at once), then rejoins. Each change clears every verdict on the process it concerns: its
 *  new state is judged on tests made after it. */
export function decide(d: DgrpState, live: readonly number[]): DgrpChange[] {
  const changes: DgrpChange[] = [];
  // The bar is set by the group as the decision starts: a removal in it must not lower the bar
  // for the next one (a liar's standing accusation would then remove a correct process alone).
  const need = Math.min(DGRP_ACCUSERS, membersOf(d, live).length - 1);
  for (let again = need >= 1; again; ) {
    again = false;
    const members = membersOf(d, live);
    if (members.length <= 1) break;
    for (const q of members) {
      const by = members.filter((t) => t !== q && d.verdicts.get(t)?.get(q)?.pass === false);
      if (by.length < need) continue;
      bump(d, q);
      d.removals++;
      changes.push({ kind: 'removed', vpid: q, by });
      again = true;
      break;
    }
  }
  const members = membersOf(d, live);
  if (members.length === 0) {
    // Every member ended or died: no one is left to test the others, and a group with live
    // processes and no member would release no barrier again. They are the group now.
    for (const q of live) {
      bump(d, q);
      d.rejoins++;
      changes.push({ kind: 'rejoined', vpid: q, by: [] });
    }
    return changes;
  }
  const zeta = d.options.zeta;
  for (const q of live) {
    if (isRecommended(d, q)) continue;
    const counts = members.map((t) => {
      const v = d.verdicts.get(t)?.get(q);
      return v !== undefined && v.pass ? v.passes : 0;
    });
    const votes = members.filter((_, i) => (counts[i] ?? 0) > zeta / 2);
    if (!counts.some((c) => c >= zeta) || votes.length * 2 <= members.length) continue;
    bump(d, q);
    d.rejoins++;
    changes.push({ kind: 'rejoined', vpid: q, by: votes });
  }
  return changes;
}

function bump(d: DgrpState, vpid: number): void {
  d.counters.set(vpid, counterOf(d, vpid) + 1);
  for (const of of d.verdicts.values()) of.delete(vpid);
}

/** A process left (ended, crashed, killed): its counter, verdicts and arrival are dropped, and
 *  its departure may complete a barrier or a removal quorum. */
export function forget(d: DgrpState, vpid: number): void {
  d.counters.delete(vpid);
  d.verdicts.delete(vpid);
  d.arrived.delete(vpid);
  for (const of of d.verdicts.values()) of.delete(vpid);
}

/** `vpid` reached the barrier ending round `round` (§12.4). Only the latest round counts. */
export function arrive(d: DgrpState, live: readonly number[], vpid: number, round: number): boolean {
  if (!live.includes(vpid)) return false;
  if (round > (d.arrived.get(vpid) ?? 0)) d.arrived.set(vpid, round);
  return true;
}

/** Release the next round if every member has arrived at it; true when released. */
export function tryRelease(d: DgrpState, live: readonly number[]): boolean {
  const members = membersOf(d, live);
  const next = d.released + 1;
  if (members.length === 0 || members.some((m) => (d.arrived.get(m) ?? 0) < next)) return false;
  d.released = next;
  return true;
}

/** The view as sent (§12.4): every live process with its counter and endpoint. */
export function viewOf(d: DgrpState, live: readonly number[], endpointOf: (vpid: number) => string): DgrpView {
  const entries: DgrpEntry[] = live.map((v) => ({ vpid: v, counter: counterOf(d, v), endpoint: endpointOf(v) }));
  return { view: d.view, released: d.released, entries };
}

// ---- The canonical tree (the state digest and state transfer: cluster-view.ts, state-codec.ts) --

type Pair = { key: number; value: number };
const pair = struct<Pair>(['key', 'value'], { key: uint, value: uint });
type TesterVerdicts = { tester: number; verdicts: DgrpVerdict[] };
const testerVerdicts = struct<TesterVerdicts>(['tester', 'verdicts'], { tester: uint, verdicts: list(dgrpVerdict, MAX_TASK_PROCS) });
type Tree = {
  options: DgrpOptions; counters: Pair[]; verdicts: TesterVerdicts[]; view: number; sent: number[] | null; sentMembers: number[]; sentReleased: number;
  released: number; arrived: Pair[];
  removals: number; rejoins: number;
};
const TREE_ORDER = ['options', 'counters', 'verdicts', 'view', 'sent', 'sentMembers', 'sentReleased', 'released', 'arrived', 'removals', 'rejoins'] as const;
const tree = struct<Tree>(TREE_ORDER, {
  options: dgrpOptions, counters: list(pair, MAX_TASK_PROCS), verdicts: list(testerVerdicts, MAX_TASK_PROCS), view: uint,
  sent: nullable(list(uint, MAX_TASK_PROCS)), sentMembers: list(uint, MAX_TASK_PROCS), sentReleased: uint, released: uint, arrived: list(pair, MAX_TASK_PROCS), removals: uint, rejoins: uint,
});
const byKey = <V>(m: Map<number, V>): [number, V][] => [...m].sort((a, b) => a[0] - b[0]);
const toPairs = (m: Map<number, number>): Pair[] => byKey(m).map(([key, value]) => ({ key, value }));
const toMap = (pairs: readonly Pair[]) => new Map(pairs.map((x) => [x.key, x.value]));

/** Maps in key order; the state codec refuses a tree that does not encode back to its bytes. */
export const dgrpState: Schema<DgrpState | null> = nullable<DgrpState>({
  enc: (d) => tree.enc({
    options: d.options, counters: toPairs(d.counters), view: d.view, sent: d.sent, sentMembers: d.sentMembers, sentReleased: d.sentReleased, released: d.released, arrived: toPairs(d.arrived),
    verdicts: byKey(d.verdicts).map(([tester, of]) => ({ tester, verdicts: byKey(of).map(([, v]) => v) })),
    removals: d.removals, rejoins: d.rejoins,
  }),
  dec: (t, p) => {
    const r = tree.dec(t, p);
    if (!r.ok) return r;
    const v = r.value;
    return ok({
      options: v.options, counters: toMap(v.counters), view: v.view, sent: v.sent, sentMembers: v.sentMembers, sentReleased: v.sentReleased, released: v.released, arrived: toMap(v.arrived),
      verdicts: new Map(v.verdicts.map((x) => [x.tester, new Map(x.verdicts.map((y) => [y.vpid, y]))])), removals: v.removals, rejoins: v.rejoins,
    });
  },
});
