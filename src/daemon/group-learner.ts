// How a new agent incarnation learns the group as it is now (docs/PROTOCOL.md §10.7): it asks the
// replica pool for their status on its own transport, takes the answers out of verified frames
// before the core sees them (the way src/daemon/logs-server.ts takes `logs.read`), and, once two
// replicas report the same view, primary and members, hands that group to the core as its
// `group` input. A replica answers status only on a fresh challenge of its own (PROTOCOL §7), so
// each round sends `challenge.ask`, and each `challenge` that comes back is answered at once with
// a `status.query` carrying it.
//
// Why on the agent's own transport, not a client of its own: a replica routes everything for a
// peer id to the connection that peer bound last (src/io/ws-transport.ts). A second connection
// under the agent's id, as a status client once opened, took the agent's copies from a replica
// for as long as it stayed open, and the agent, one copy short of every command, never heard of
// the new group (a flaky e2e test on namespace hosts found it).
import { parseMovedPorts } from '../core/group-view.ts';
import type { LogLevel } from '../core/node.ts';
import type { ProcessId } from '../core/ports.ts';
import { MAX_REPLICAS } from '../core/constants.ts';
import { toHex } from '../base/hex.ts';
import type { AddedReplica, Frame, Item, MovedPort } from '../core/wire/messages.ts';
import { addedReplicaFromJson } from '../io/added-replicas.ts';

/** How often the agent asks again while no two replicas agree: two answers on a LAN take
 *  milliseconds, so the keeper's standby is promoted well inside the ~400 ms a node has. */
export const AGENT_GROUP_QUERY_MS = 300;
/** How long a new agent incarnation keeps asking (while it runs from cluster.json's group). An
 *  agent that boots cut off from the replicas (a node reset while its link is down) learns the
 *  group once its link is back; a stale group could leave it unable ever to see two matching
 *  copies. */
export const AGENT_GROUP_WAIT_MS = 60_000;

export type LearntGroup = { view: number; primary: ProcessId; replicas: ProcessId[]; ports: MovedPort[]; added: AddedReplica[] };

/** The members' keys a status reply gives (ReplicaStatus.added, PROTOCOL §10.12), checked as the
 *  wire checks them; null if any entry is not one, or not a member's. */
function parseAdded(v: unknown, members: readonly ProcessId[]): AddedReplica[] | null {
  if (!Array.isArray(v) || v.length > MAX_REPLICAS) return null;
  const out = v.map(addedReplicaFromJson);
  return out.every((x): x is AddedReplica => x !== null && members.includes(x.id)) ? out : null;
}

/** What the agent takes from a replica's status reply; null if it is not that shape (a verified
 *  replica may still be faulty and send nonsense). */
export function parseGroupOf(json: string, from: ProcessId): LearntGroup | null {
  let v: unknown;
  try {
    v = JSON.parse(json);
  } catch {
    return null;
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return null;
  const s = v as Record<string, unknown>;
  const { view, primary, members } = s;
  if (s['id'] !== from || typeof view !== 'number' || !Number.isSafeInteger(view) || view < 0) return null;
  if (typeof primary !== 'string' || !Array.isArray(members) || !members.every((m) => typeof m === 'string')) return null;
  if (!members.includes(primary)) return null;
  // Absent from a replica of an older release: nobody moved.
  const ports = s['ports'] === undefined ? [] : parseMovedPorts(s['ports']);
  if (ports === null) return null;
  const added = s['added'] === undefined ? [] : parseAdded(s['added'], members);
  if (added === null) return null;
  return { view, primary, replicas: [...members], ports, added };
}

/** The highest group two replicas report alike, the added members' keys included; undefined if
 *  no two agree. One faulty replica cannot choose it, nor give a member a key of its own. */
export function agreedGroup(answers: Iterable<LearntGroup>): LearntGroup | undefined {
  const count = new Map<string, { n: number; g: LearntGroup }>();
  for (const g of answers) {
    const added = g.added.map((x) => `${x.id}@${x.node}/${x.address}:${x.port}/${toHex(x.publicKey)}`).join(',');
    const key = `${g.view}|${g.primary}|${g.replicas.join(',')}|${g.ports.map((p) => `${p.id}:${p.port}`).join(',')}|${added}`;
    count.set(key, { n: (count.get(key)?.n ?? 0) + 1, g });
  }
  return [...count.values()].filter((c) => c.n >= 2).sort((a, b) => b.g.view - a.g.view)[0]?.g;
}

export type GroupLearnerOptions = {
  /** Whom to ask: the whole replica pool (after replacements the group holds spares). */
  pool: readonly ProcessId[];
  /** Sends one item to a replica, in a frame of its own, on the agent's transport. */
  send: (to: ProcessId, item: Item) => void;
  onLearnt: (group: LearntGroup) => void;
  log: (level: LogLevel, event: string, fields: Record<string, unknown>) => void;
  /** A fresh query nonce. */
  nonce: () => number;
  queryMs?: number;
  waitMs?: number;
};

export type GroupLearner = {
  /** Takes the replies to our query out of a verified frame; returns what the core gets. */
  intercept: (frame: Frame) => Frame | null;
  stop: () => void;
};

/** Starts asking at once, every `queryMs`, until two replicas agree or `waitMs` passed. */
export function startGroupLearner(opts: GroupLearnerOptions): GroupLearner {
  const queryMs = opts.queryMs ?? AGENT_GROUP_QUERY_MS;
  const nonce = opts.nonce();
  const answers = new Map<ProcessId, LearntGroup>();
  let timer: NodeJS.Timeout | null = null;
  let done = false;
  const deadline = Date.now() + (opts.waitMs ?? AGENT_GROUP_WAIT_MS);
  const stop = (): void => {
    done = true;
    if (timer !== null) clearTimeout(timer);
    timer = null;
  };
  const ask = (): void => {
    timer = null;
    if (done) return;
    if (Date.now() >= deadline) {
      stop();
      opts.log('warn', 'agent.group.unknown', { why: `no two replicas agreed within ${opts.waitMs ?? AGENT_GROUP_WAIT_MS} ms`, answered: [...answers.keys()] });
      return;
    }
    for (const r of opts.pool) opts.send(r, { type: 'challenge.ask', nonce });
    timer = setTimeout(ask, queryMs);
    timer.unref();
  };
  const intercept = (frame: Frame): Frame | null => {
    const ours = (i: Item) => (i.type === 'status.reply' || i.type === 'challenge') && i.nonce === nonce && opts.pool.includes(frame.from);
    if (!frame.items.some(ours)) return frame;
    for (const item of frame.items) {
      if (done || !ours(item)) continue;
      if (item.type === 'challenge') {
        opts.send(frame.from, { type: 'status.query', nonce, challenge: item.challenge });
        continue;
      }
      if (item.type !== 'status.reply') continue;
      const g = parseGroupOf(item.json, frame.from);
      if (g === null) {
        opts.log('warn', 'agent.group.bad-reply', { from: frame.from });
        continue;
      }
      answers.set(frame.from, g);
      const agreed = agreedGroup(answers.values());
      if (agreed !== undefined) {
        stop();
        opts.onLearnt(agreed);
      }
    }
    const rest = frame.items.filter((i) => !ours(i));
    return rest.length === 0 ? null : { ...frame, items: rest };
  };
  ask();
  return { intercept, stop };
}
