// The dynamic group of recommended processes on the wire (docs/PROTOCOL.md §12; spec 2.2): a
// task's DGRP option as `task.submit` asks for it and the mapping repeats it, a tester's report
// of one testing interval, and the view the group sends a DGRP task's processes. The decoders
// check shapes and lengths; whether the numbers are in range is the group's judgement
// (src/core/cluster-dgrp.ts dgrpRefusal), so a forged request gets an answer that says what is
// wrong. Part of the schemas that messages.ts gathers.
import { MAX_TASK_PROCS } from '../constants.ts';
import { bool, list, nullable, struct, uint, type Schema } from './schema.ts';
import { endpointText } from './basics.ts';

/** §12.1. `factorPercent`: Algorithm 1's timeout × factorPercent / 100; `marginMs` is added
 *  after (the paper describes both margins, spec 2.2.2 note). */
export type DgrpOptions = { intervalMs: number; zeta: number; factorPercent: number; marginMs: number; initialThresholdMs: number };
export const DGRP_OPTION_ORDER = ['intervalMs', 'zeta', 'factorPercent', 'marginMs', 'initialThresholdMs'] as const;
export const dgrpOptions: Schema<DgrpOptions> = struct<DgrpOptions>(DGRP_OPTION_ORDER, {
  intervalMs: uint, zeta: uint, factorPercent: uint, marginMs: uint, initialThresholdMs: uint,
});
/** Null: the task has no DGRP. */
export const dgrpOption: Schema<DgrpOptions | null> = nullable(dgrpOptions);

/** One tester's verdict on one process in its latest testing interval (§12.2): `pass`, and for
 *  a process outside the group the tester's count of consecutive passes (its rejoin vote). */
export type DgrpVerdict = { vpid: number; pass: boolean; passes: number };
export const dgrpVerdict: Schema<DgrpVerdict> = struct<DgrpVerdict>(['vpid', 'pass', 'passes'], { vpid: uint, pass: bool, passes: uint });
/** `round`: the tester's testing interval, counted from 1; `verdicts`: every process it has a
 *  verdict to give on (a failed member, or a non-member it tested); a process it does not name
 *  passed. */
export type DgrpReport = { round: number; verdicts: DgrpVerdict[] };
export const DGRP_REPORT_ORDER = ['round', 'verdicts'] as const;
export const dgrpReportFields = { round: uint, verdicts: list(dgrpVerdict, MAX_TASK_PROCS) };

/** A live process of a DGRP task: its event counter (even: recommended, spec 2.2.3) and the
 *  endpoint its tests go to (its G-MPI `host:port`; the tests use UDP on the same port). */
export type DgrpEntry = { vpid: number; counter: number; endpoint: string };
export const dgrpEntry: Schema<DgrpEntry> = struct<DgrpEntry>(['vpid', 'counter', 'endpoint'], { vpid: uint, counter: uint, endpoint: endpointText });
/** The group's view (§12.4): `view` counts changes, `released` is the last round whose barrier
 *  the group released (0: none yet), `entries` lists every live process in VPID order. */
export type DgrpView = { view: number; released: number; entries: DgrpEntry[] };
export const DGRP_VIEW_ORDER = ['view', 'released', 'entries'] as const;
export const dgrpViewFields = { view: uint, released: uint, entries: list(dgrpEntry, MAX_TASK_PROCS) };

/** The members of a view: the live processes whose counter is even. */
export const recommendedOf = (entries: readonly DgrpEntry[]): number[] => entries.filter((e) => e.counter % 2 === 0).map((e) => e.vpid);
