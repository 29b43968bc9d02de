// The straggler policy as the manager group keeps it (docs/PROTOCOL.md §13; issue 18 item 4):
// per task, the latest progress each process reported, and which processes are flagged. Pure and
// deterministic (STYLE.md 1): every replica applies the same reports in the same RSN order.
//
// The model is Spark's speculative execution (spark.speculation.multiplier/quantile): a task
// is speculated when it runs `multiplier` × longer than the median of its stage, once `quantile`
// of the stage is done. A Trine task's processes start together, so comparing their progress at
// the same moment stands for comparing their rates. Over the processes that count:
// - a running process that has reported counts with its latest permille; a process that ended
//   normally counts as done (1000 ‰): it did its share, and leaving it out would make the
//   laggard's own progress the median just when the others wait for it; a process that never
//   reported, or ended otherwise (killed, crashed, lost), does not count;
// - once the median (the mean of the two middle values for an even count, as Spark's
//   MedianHeap) is at least `afterPermille`, a running process is a straggler when
//   permille × factor ≤ median (factor in hundredths: permille × factorHundredths ≤ median × 100);
// - the flags follow the rule after every input: a flagged process whose progress comes back
//   within the factor is unflagged; one that ends is dropped from the flags without a notice
//   (its end has its own, GSIG_NTF_DIED or none).
// The manager only flags: it never kills (the application decides, PROTOCOL §13.3).
import { assert, err, ok, type Result } from '../base/result.ts';
import {
  MAX_TASK_PROCS, STRAGGLER_MAX_AFTER_PERMILLE, STRAGGLER_MAX_FACTOR_HUNDREDTHS, STRAGGLER_MIN_AFTER_PERMILLE, STRAGGLER_MIN_FACTOR_HUNDREDTHS,
} from './constants.ts';
import { bool, list, nullable, struct, uint, type Schema } from './wire/schema.ts';
import { stragglerOption, type StragglerOptions } from './wire/straggler.ts';

/** A progress report's whole: permille runs 0 … PERMILLE_DONE. */
export const PERMILLE_DONE = 1000;

export type ProgressEntry = { permille: number; flagged: boolean };
export type StragglerState = {
  /** VPID → its latest report and whether it is flagged now; a process absent never reported. */
  entries: Map<number, ProgressEntry>;
  /** Flags raised so far (for the bench and tests). */
  flags: number;
};

export const createStragglerState = (): StragglerState => ({ entries: new Map(), flags: 0 });

/** A restart (FsmTask T9): every process of the new start is new. */
export function resetStragglers(s: StragglerState): void {
  s.entries.clear();
}

/** Why the group refuses a submit's straggler policy (§13.1), or null. */
export function stragglerRefusal(req: { mode: string; straggler: StragglerOptions | null }): string | null {
  const o = req.straggler;
  if (o === null) return null;
  if (req.mode !== 'linked') return 'a straggler policy needs a linked task (--linked): its processes report their progress through the application library';
  if (o.factorHundredths < STRAGGLER_MIN_FACTOR_HUNDREDTHS || o.factorHundredths > STRAGGLER_MAX_FACTOR_HUNDREDTHS) {
    return `straggler factor must be ${STRAGGLER_MIN_FACTOR_HUNDREDTHS / 100} to ${STRAGGLER_MAX_FACTOR_HUNDREDTHS / 100}, got ${o.factorHundredths / 100}`;
  }
  if (o.afterPermille < STRAGGLER_MIN_AFTER_PERMILLE || o.afterPermille > STRAGGLER_MAX_AFTER_PERMILLE) {
    return `straggler after must be ${STRAGGLER_MIN_AFTER_PERMILLE / 1000} to ${STRAGGLER_MAX_AFTER_PERMILLE / 1000} of the work, got ${o.afterPermille / 1000}`;
  }
  return null;
}

/** Record a report from running process `vpid`; false for a permille out of range. */
export function recordProgress(s: StragglerState, vpid: number, permille: number): boolean {
  if (!Number.isSafeInteger(permille) || permille < 0 || permille > PERMILLE_DONE) return false;
  const e = s.entries.get(vpid);
  if (e === undefined) s.entries.set(vpid, { permille, flagged: false });
  else e.permille = permille;
  return true;
}

/** Twice the median of `values` (non-empty): an integer even for an even count. */
export function twiceMedian(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const n = sorted.length;
  const lo = sorted[(n - 1) >> 1];
  const hi = sorted[n >> 1];
  assert(lo !== undefined && hi !== undefined, 'twiceMedian of no values');
  return lo + hi;
}

/** What a judgement changed, for the journal and the signal; the median in permille, rounded
 *  down. */
export type StragglerChange = { kind: 'flagged' | 'unflagged'; vpid: number; permille: number; medianPermille: number };

/** How a process stands: `running` and `done` (ended normally) count, `out` does not. */
export type ProcStanding = 'running' | 'done' | 'out';

/** Apply the rule to every process (§13.2): `standing` says how each VPID stands now. Returns
 *  the flags raised and lowered, in VPID order. */
export function judge(s: StragglerState, o: StragglerOptions, standing: (vpid: number) => ProcStanding): StragglerChange[] {
  const counted: number[] = [];
  const running: [number, ProgressEntry][] = [];
  for (const [vpid, e] of [...s.entries].sort((a, b) => a[0] - b[0])) {
    const st = standing(vpid);
    if (st === 'running') {
      counted.push(e.permille);
      running.push([vpid, e]);
    } else {
      if (st === 'done') counted.push(PERMILLE_DONE);
      // An ended process leaves the flags quietly: its end is its own notice.
      e.flagged = false;
    }
  }
  if (counted.length === 0) return [];
  const median2 = twiceMedian(counted);
  const judged = median2 >= 2 * o.afterPermille;
  const medianPermille = median2 >> 1;
  const changes: StragglerChange[] = [];
  for (const [vpid, e] of running) {
    // permille × K ≤ median, K in hundredths and the median doubled: integers throughout. A
    // flagged process is unflagged only once past the bar by STRAGGLER_HYSTERESIS_PERCENT: each
    // change is a broadcast that starts a new epoch (PROTOCOL §9.2), and progress hovering at
    // the bar would otherwise drop every group request collected meanwhile.
    const bar = median2 * 100 * (e.flagged ? 100 + STRAGGLER_HYSTERESIS_PERCENT : 100);
    const straggler = judged && 2 * e.permille * o.factorHundredths * 100 <= bar;
    if (straggler === e.flagged) continue;
    e.flagged = straggler;
    if (straggler) s.flags++;
    changes.push({ kind: straggler ? 'flagged' : 'unflagged', vpid, permille: e.permille, medianPermille });
  }
  return changes;
}

/** How far past the bar a flagged process must come back before it is unflagged (§13.2). */
export const STRAGGLER_HYSTERESIS_PERCENT = 10;

export const isStraggler = (s: StragglerState | null, vpid: number): boolean => s?.entries.get(vpid)?.flagged === true;
export const progressOf = (s: StragglerState | null, vpid: number): number | null => s?.entries.get(vpid)?.permille ?? null;

// ---- The canonical tree (the state digest and state transfer: cluster-view.ts, state-codec.ts) --

type Entry = { vpid: number; permille: number; flagged: boolean };
const entry = struct<Entry>(['vpid', 'permille', 'flagged'], { vpid: uint, permille: uint, flagged: bool });
type Tree = { entries: Entry[]; flags: number };
const tree = struct<Tree>(['entries', 'flags'], { entries: list(entry, MAX_TASK_PROCS), flags: uint });

/** Entries in VPID order; the decoder refuses any other order, a repeat or a permille over
 *  PERMILLE_DONE, so a tree decodes only from its own encoding. */
export const stragglerState: Schema<StragglerState | null> = nullable<StragglerState>({
  enc: (s) => tree.enc({ entries: [...s.entries].sort((a, b) => a[0] - b[0]).map(([vpid, e]) => ({ vpid, ...e })), flags: s.flags }),
  dec: (t, p) => {
    const r = tree.dec(t, p);
    if (!r.ok) return r;
    const entries = new Map<number, ProgressEntry>();
    let prev = -1;
    for (const e of r.value.entries) {
      if (e.vpid <= prev) return err('WIRE_MALFORMED', `${p}.entries: VPID ${e.vpid} after ${prev}`);
      if (e.permille > PERMILLE_DONE) return err('WIRE_MALFORMED', `${p}.entries: ${e.permille} ‰ over ${PERMILLE_DONE}`);
      prev = e.vpid;
      entries.set(e.vpid, { permille: e.permille, flagged: e.flagged });
    }
    return ok({ entries, flags: r.value.flags });
  },
});

/** The task record's two straggler fields as one tree (state-codec.ts reads it with bySchema):
 *  the option as submitted and the state, both null or neither. */
export type StragglerPart = { straggler: StragglerOptions | null; stragglerState: StragglerState | null };
export const stragglerPart: Schema<StragglerPart> = {
  enc: (v) => [stragglerOption.enc(v.straggler), stragglerState.enc(v.stragglerState)],
  dec: (t, p): Result<StragglerPart> => {
    if (!Array.isArray(t) || t.length !== 2) return err('WIRE_MALFORMED', `${p}: expected [option, state]`);
    const option = stragglerOption.dec(t[0], `${p}.option`);
    if (!option.ok) return option;
    const state = stragglerState.dec(t[1], `${p}.state`);
    if (!state.ok) return state;
    if ((option.value === null) !== (state.value === null)) return err('WIRE_MALFORMED', `${p}: a straggler policy without its state, or the reverse`);
    return ok({ straggler: option.value, stragglerState: state.value });
  },
};
