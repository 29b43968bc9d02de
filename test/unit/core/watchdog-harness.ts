// Shared by the watchdog's tests (watchdog*.test.ts): a membership with keys, heartbeat and
// frame builders, and `setup`, a watchdog driven by a group whose (inc, counter) always increase.
import { DEFAULT_TIMING } from '../../../src/core/constants.ts';
import type { CoreEffect, WatchdogInput, Membership } from '../../../src/core/node.ts';
import { createWatchdog } from '../../../src/core/watchdog.ts';
import { WATCHDOG_LATE_PERIODS } from '../../../src/core/watchdog-state.ts';
import type { Item } from '../../../src/core/wire/messages.ts';
import { hmacSigner, hmacVerifier } from './harness.ts';

export const keys = { signer: hmacSigner('scc'), verifier: hmacVerifier(['scc', 'op', 'r1', 'r2', 'r3']) };

export const membership: Membership = {
  cluster: 'c1',
  replicas: ['r1', 'r2', 'r3'],
  replicaNodes: ['n1', 'n2', 'n3'],
  spareReplicas: [],
  agents: [{ id: 'a1', node: 'n1' }],
  scc: 'scc',
  operators: ['op'],
  timing: DEFAULT_TIMING,
};

export const hb = (inc: number, counter: number, rsn = 1, role: 'primary' | 'backup' = 'backup', view = 0): Extract<Item, { type: 'hb' }> => ({
  type: 'hb', inc, counter, info: { type: 'replica', role, rsn, gssn: 2, digest: new Uint8Array(32).fill(0xab), view, ckptRsn: 0, ckptDigest: new Uint8Array(32) },
});
export const frame = (from: string, nowMs: number, ...items: Item[]): WatchdogInput => ({ type: 'frame', nowMs, frame: { from, to: 'scc', items } });
export const sends = (effects: CoreEffect[]) => effects.filter((e) => e.type === 'send');

export const PERIOD = DEFAULT_TIMING.sccHeartbeatMs;
/** How long a heartbeat counts as fresh: WATCHDOG_LATE_PERIODS periods. */
export const FRESH = WATCHDOG_LATE_PERIODS * PERIOD;
export const SILENCE = DEFAULT_TIMING.watchdogSilenceMs;
export const withSpare: Membership = { ...membership, spareReplicas: ['r4'] };

/** A watchdog and a group that drives it: every sender's (inc, counter) increases per item kind. */
export function setup(m: Membership = withSpare) {
  const w = createWatchdog({ id: 'scc', membership: m, inc: 1, ...keys });
  const counters = new Map<string, number>();
  const next = (key: string) => {
    const n = (counters.get(key) ?? 0) + 1;
    counters.set(key, n);
    return n;
  };
  const effects: CoreEffect[] = [];
  let lastMs = -Infinity;
  const feed = (input: WatchdogInput) => {
    const out = w.step(input);
    lastMs = input.nowMs;
    effects.push(...out);
    return out;
  };
  const beat = (from: string, nowMs: number, view = 0, inc = 10) => feed(frame(from, nowMs, hb(inc, next(`hb ${from} ${inc}`), 1, 'backup', view)));
  /** The watchdog running until `nowMs`: woken every period, as its nextWakeMs asks while armed
   *  (a longer gap would be a stall of its own, WATCHDOG_STALL_PERIODS). */
  const tick = (nowMs: number) => {
    const out: CoreEffect[] = [];
    for (let t = lastMs + PERIOD; t < nowMs; t += PERIOD) out.push(...feed({ type: 'tick', nowMs: t }));
    out.push(...feed({ type: 'tick', nowMs }));
    return out;
  };
  return {
    w,
    /** A frame of `items` from `from`, with the effects it gives. */
    send: (from: string, nowMs: number, ...items: Item[]) => feed(frame(from, nowMs, ...items)),
    beat,
    tick,
    /** The watchdog not running until `nowMs` (a stall of its own), then woken once. */
    stallUntil: (nowMs: number) => feed({ type: 'tick', nowMs }),
    /** When rule 2 resets the cluster unless two consistent heartbeats come first. */
    deadline: () => w.status(lastMs).silenceDeadlineMs ?? NaN,
    report: (from: string, nowMs: number, inc = 10) =>
      feed(frame(from, nowMs, { type: 'diag.report', inc, counter: next(`diag ${from} ${inc}`), view: 0, reason: 'silent', target: 'r3' })),
    /** Heartbeats from `ids` (in `view`) every period in [fromMs, toMs), each round followed by a tick. */
    run: (ids: string[], fromMs: number, toMs: number, view = 0, inc = 10) => {
      for (let t = fromMs; t < toMs; t += PERIOD) {
        for (const id of ids) beat(id, t, view, inc);
        tick(t);
      }
    },
    clusterResets: () => effects.filter((e) => e.type === 'reset.cluster'),
  };
}
