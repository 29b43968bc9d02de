// The watchdog core (the paper's spacecraft control computer, spec §1.6): a pure, deterministic
// step that records the replicas' heartbeats and answers operator status queries. It is kept
// tiny and never sends on the routine path (spec §1.6: "must not be burdened with routine
// operation"). Cluster resets and self-diagnosis reports arrive in a later issue.
import { toHex } from './hex.ts';
import type { Core, CoreEffect, CoreInput, Membership } from './node.ts';
import type { ProcessId } from './ports.ts';
import { unreachable, type DropCode } from './result.ts';
import type { PeerHealth } from './status.ts';
import type { Item, Role } from './wire/messages.ts';

/** A heartbeat older than this many periods makes its replica `late`, older than
 *  WATCHDOG_SILENT_PERIODS `silent`. Two periods tolerate one lost heartbeat without alarm;
 *  four match the spec §1.7 node-failure detection window (two missed checks). */
export const WATCHDOG_LATE_PERIODS = 2;
export const WATCHDOG_SILENT_PERIODS = 4;

/** What the watchdog knows of one replica. */
export type WatchdogReplicaView = {
  id: ProcessId;
  /** Incarnation and counter of the last accepted heartbeat (replays must increase them). */
  inc: number | null;
  counter: number | null;
  lastHeartbeatAgeMs: number | null;
  health: PeerHealth;
  role: Role | null;
  rsn: number | null;
  gssn: number | null;
  /** SHA-256 state digest from the last heartbeat, hex. */
  digest: string | null;
  heartbeats: number;
  /** Heartbeats dropped because (inc, counter) did not increase. */
  replays: number;
};

export type WatchdogStatus = {
  id: ProcessId;
  role: 'watchdog';
  inc: number;
  replicas: WatchdogReplicaView[];
  /** Items ignored because the watchdog does not take them from their sender. */
  ignored: number;
  /** Node resets ordered by the group (spec §1.6 rule 1), oldest first, bounded. */
  resets: { node: string; rsn: number; requestedBy: ProcessId[]; atMs: number }[];
  /** Dropped frames (by the shell) and items (replays, non-members), by reason. */
  drops: Record<string, number>;
};

type ReplicaRecord = {
  inc: number;
  counter: number;
  lastAtMs: number;
  role: Role;
  rsn: number;
  gssn: number;
  digest: string;
  heartbeats: number;
};

/** Node resets remembered (for status and to ignore re-sent requests). */
export const MAX_RESET_HISTORY = 256;

export type WatchdogOptions = { id: ProcessId; membership: Membership; inc: number };


export function createWatchdog(opts: WatchdogOptions): Core & { status(nowMs: number): WatchdogStatus } {
  const { id, membership, inc } = opts;
  const replicaIds = new Set(membership.replicas);
  const operatorIds = new Set(membership.operators);
  const records = new Map<ProcessId, ReplicaRecord>();
  const replays = new Map<ProcessId, number>();
  const drops: Record<string, number> = {};
  let ignored = 0;
  const periodMs = membership.timing.sccHeartbeatMs;
  /** Reset requests per (node, rsn): the replicas that asked. Two distinct replicas make a
   *  command (f + 1: one faulty replica cannot reset a node on its own). */
  const resetVotes = new Map<string, Set<ProcessId>>();
  const resets: WatchdogStatus['resets'] = [];
  const knownNodes = new Set(membership.agents.map((a) => a.node));

  /** Spec §1.6 rule 1: the group commands a node's power reset. */
  function onResetRequest(from: ProcessId, nowMs: number, item: Extract<Item, { type: 'reset.node' }>, out: CoreEffect[]): void {
    if (!replicaIds.has(from) || !knownNodes.has(item.node)) {
      ignore(replicaIds.has(from) ? 'UNEXPECTED' : 'NOT_A_MEMBER');
      return;
    }
    const key = `${item.node}@${item.rsn}`;
    if (resets.some((r) => r.node === item.node && r.rsn === item.rsn)) return; // done already; re-sent
    let votes = resetVotes.get(key);
    if (votes === undefined) {
      // Bounded: a faulty replica inventing RSNs can hold one pending vote per node at most.
      for (const k of [...resetVotes.keys()]) if (k.startsWith(`${item.node}@`) && resetVotes.get(k)?.has(from)) resetVotes.delete(k);
      resetVotes.set(key, (votes = new Set()));
    }
    votes.add(from);
    if (votes.size < 2) return;
    resetVotes.delete(key);
    resets.push({ node: item.node, rsn: item.rsn, requestedBy: [...votes].sort(), atMs: nowMs });
    if (resets.length > MAX_RESET_HISTORY) resets.shift();
    out.push({ type: 'reset.node', node: item.node, rsn: item.rsn });
    out.push({ type: 'log', level: 'warn', event: 'node.reset', fields: { node: item.node, rsn: item.rsn, requestedBy: [...votes] } });
  }

  /** An item the watchdog does not take from this sender: counted, never acted on. */
  function ignore(code: DropCode): void {
    ignored++;
    drops[code] = (drops[code] ?? 0) + 1;
  }

  function health(ageMs: number | null): PeerHealth {
    if (ageMs === null) return 'unknown';
    if (ageMs <= WATCHDOG_LATE_PERIODS * periodMs) return 'healthy';
    if (ageMs <= WATCHDOG_SILENT_PERIODS * periodMs) return 'late';
    return 'silent';
  }

  function status(nowMs: number): WatchdogStatus {
    return {
      id,
      role: 'watchdog',
      inc,
      replicas: membership.replicas.map((r) => {
        const rec = records.get(r);
        const age = rec === undefined ? null : Math.max(0, nowMs - rec.lastAtMs);
        return {
          id: r,
          inc: rec?.inc ?? null,
          counter: rec?.counter ?? null,
          lastHeartbeatAgeMs: age,
          health: health(age),
          role: rec?.role ?? null,
          rsn: rec?.rsn ?? null,
          gssn: rec?.gssn ?? null,
          digest: rec?.digest ?? null,
          heartbeats: rec?.heartbeats ?? 0,
          replays: replays.get(r) ?? 0,
        };
      }),
      ignored,
      resets: resets.map((r) => ({ ...r, requestedBy: [...r.requestedBy] })),
      drops: { ...drops },
    };
  }

  /** Spec §1.6 rule 2: heartbeats from the manager group. Replays never refresh liveness. */
  function onHeartbeat(from: ProcessId, nowMs: number, item: Extract<Item, { type: 'hb' }>, out: CoreEffect[]): void {
    if (!replicaIds.has(from) || item.info.type !== 'replica') {
      ignore(replicaIds.has(from) ? 'UNEXPECTED' : 'NOT_A_MEMBER');
      return;
    }
    const rec = records.get(from);
    const fresh = rec === undefined || item.inc > rec.inc || (item.inc === rec.inc && item.counter > rec.counter);
    if (!fresh) {
      replays.set(from, (replays.get(from) ?? 0) + 1);
      drops['REPLAYED'] = (drops['REPLAYED'] ?? 0) + 1;
      out.push({ type: 'log', level: 'debug', event: 'hb.replayed', fields: { from, inc: item.inc, counter: item.counter } });
      return;
    }
    if (rec !== undefined && item.inc !== rec.inc) {
      out.push({ type: 'log', level: 'info', event: 'replica.restarted', fields: { replica: from, inc: item.inc } });
    }
    records.set(from, {
      inc: item.inc,
      counter: item.counter,
      lastAtMs: nowMs,
      role: item.info.role,
      rsn: item.info.rsn,
      gssn: item.info.gssn,
      digest: toHex(item.info.digest),
      heartbeats: (rec?.heartbeats ?? 0) + 1,
    });
  }

  function step(input: CoreInput): CoreEffect[] {
    const out: CoreEffect[] = [];
    switch (input.type) {
      case 'frame': {
        const from = input.frame.from;
        for (const item of input.frame.items) {
          if (item.type === 'hb') {
            onHeartbeat(from, input.nowMs, item, out);
          } else if (item.type === 'reset.node') {
            onResetRequest(from, input.nowMs, item, out);
          } else if (item.type === 'status.query') {
            if (!operatorIds.has(from)) {
              ignore('NOT_A_MEMBER');
              continue;
            }
            const json = JSON.stringify(status(input.nowMs));
            out.push({ type: 'send', to: from, item: { type: 'status.reply', nonce: item.nonce, json } });
          } else {
            ignore('UNEXPECTED');
          }
        }
        break;
      }
      case 'dropped':
        drops[input.code] = (drops[input.code] ?? 0) + 1;
        break;
      case 'tick':
      case 'transport.up':
      case 'transport.down':
      case 'request':
      case 'notice':
        break;
      default:
        return unreachable(input);
    }
    return out;
  }

  return { id, step, nextWakeMs: () => null, status };
}
