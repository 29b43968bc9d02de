// A minimal in-memory cluster for unit tests of the cores: real Shells, real frame encoding,
// an HMAC signer, and a FIFO network whose links a test can cut or filter. The seeded
// simulator (src/sim/) is the thorough tool; this one keeps unit tests small and readable.
import { createHmac } from 'node:crypto';
import { DEFAULT_TIMING } from '../../../src/core/constants.ts';
import { createAgent, type AgentCore } from '../../../src/core/agent.ts';
import type { CoreEffect, CoreInput, Membership } from '../../../src/core/node.ts';
import type { ProcessId, Signer, Verifier } from '../../../src/core/ports.ts';
import { createReplica, type ReplicaCore } from '../../../src/core/replica.ts';
import { Shell } from '../../../src/core/shell.ts';
import { decodeJournal, type TaskJournal } from '../../../src/core/task-journal.ts';
import { createHash } from 'node:crypto';
import type { Core } from '../../../src/core/node.ts';
import { encodeFrame, signCG } from '../../../src/core/wire/frame.ts';
import type { Item, OperatorRequest } from '../../../src/core/wire/messages.ts';

export const hmacSigner = (id: ProcessId): Signer => ({
  id,
  sign: (data) => {
    const a = createHmac('sha256', `k-${id}`).update(data).digest();
    return new Uint8Array(Buffer.concat([a, a]));
  },
});
export const hmacVerifier = (ids: Iterable<ProcessId>): Verifier & { add(id: ProcessId): void } => {
  const known = new Set(ids);
  return {
    add: (id) => known.add(id),
    has: (id) => known.has(id),
    verify: (id, data, sig) => known.has(id) && sig.length === 64 && Buffer.compare(Buffer.from(hmacSigner(id).sign(data)), Buffer.from(sig)) === 0,
  };
};

/** A filter sees every item about to leave `from` for `to`, before it is signed: it returns the
 *  item (possibly rewritten, as a Byzantine sender would sign it) or null to drop it. */
export type ItemFilter = (from: ProcessId, to: ProcessId, item: Item) => Item | null;

export type Observed = { at: number; proc: ProcessId; effect: Exclude<CoreEffect, { type: 'send' }> };

export function makeCluster(nAgents = 2, opts: { latencyMs?: number; spares?: ProcessId[] } = {}) {
  const latency = opts.latencyMs ?? 1;
  const agents = Array.from({ length: nAgents }, (_, i) => ({ id: `a${i + 1}`, node: `n${i + 1}` }));
  const membership: Membership = {
    cluster: 'test', replicas: ['r1', 'r2', 'r3'], replicaNodes: ['n1', 'n2', 'n3'], spareReplicas: [...(opts.spares ?? [])], agents, scc: 'scc', operators: ['op'], timing: { ...DEFAULT_TIMING },
  };
  const ids = [...membership.replicas, ...membership.spareReplicas, ...agents.map((a) => a.id), 'scc', 'op'];
  const verifier = hmacVerifier(ids);
  const hash = (d: Uint8Array) => new Uint8Array(createHash('sha256').update(d).digest());
  let now = 0;
  const queue: { at: number; seq: number; to: ProcessId; bytes: Uint8Array; from: ProcessId }[] = [];
  let seq = 0;
  const observed: Observed[] = [];
  const filters: ItemFilter[] = [];
  const shells = new Map<ProcessId, Shell>();
  const down = new Set<ProcessId>();
  /** Processes that do not run for now (a starved host): they neither tick nor read, and what
   *  is sent to them waits, as in their sockets, until `resume`. */
  const paused = new Set<ProcessId>();
  const runs = (id: ProcessId): boolean => !down.has(id) && !paused.has(id);

  const mk = (core: ReplicaCore | AgentCore) => {
    const shell = new Shell({
      core, cluster: 'test', signer: hmacSigner(core.id), verifier,
      transport: { send: (to, bytes) => { if (shells.has(to)) queue.push({ at: now + latency, seq: seq++, to, bytes, from: core.id }); } },
      onEffect: (effect) => {
        observed.push({ at: now, proc: core.id, effect });
        // Like run-core: a replica's driver learns the keys of agents added at run time.
        if (effect.type === 'keys') for (const k of effect.keys) verifier.add(k.id);
      },
    });
    // Apply filters before signing by wrapping the core's step.
    // The harness routes each core only its own inputs; the wrapper passes on whatever it gets.
    type AnyStep = (input: CoreInput) => CoreEffect[];
    const step = core.step.bind(core) as AnyStep;
    (core as unknown as { step: AnyStep }).step = (input) =>
      step(input).flatMap((e): CoreEffect[] => {
        if (e.type !== 'send') return [e];
        let item: Item | null = e.item;
        for (const f of filters) if (item !== null) item = f(core.id, e.to, item);
        return item === null ? [] : [{ ...e, item }];
      });
    shells.set(core.id, shell);
    return core;
  };
  const replicas = membership.replicas.map((id) => mk(createReplica({ id, membership, hash, inc: 1, signer: hmacSigner(id), verifier })) as ReplicaCore);
  const newAgent = (id: ProcessId, inc: number) => mk(createAgent({ id, membership, inc, slots: 4, signer: hmacSigner(id) })) as AgentCore;
  const agentCores = agents.map((a) => newAgent(a.id, 1));
  /** An agent of a node added at run time (PROTOCOL §10.12), started once the group took it. */
  function addAgent(id: ProcessId, inc = 1): AgentCore {
    const core = newAgent(id, inc);
    agentCores.push(core);
    return core;
  }
  /** Frames in flight to `id` die with the process they were sent to. */
  const dropInFlight = (id: ProcessId): void => {
    for (let i = queue.length - 1; i >= 0; i--) if (queue[i]?.to === id) queue.splice(i, 1);
  };
  /** A process dies and comes back as a fresh core with a higher incarnation. */
  function restartAgent(id: ProcessId, inc: number): AgentCore {
    dropInFlight(id);
    const core = newAgent(id, inc);
    const k = agentCores.findIndex((a) => a.id === id);
    if (k >= 0) agentCores[k] = core;
    return core;
  }

  /** A replica started by an agent on the group's command (PROTOCOL §10.6), as a fresh core of
   *  incarnation `inc`: frames still in flight to an earlier incarnation are lost with it. */
  function startReplica(id: ProcessId, inc: number, joining: NonNullable<Parameters<typeof createReplica>[0]['joining']>): ReplicaCore {
    dropInFlight(id);
    down.delete(id);
    const core = mk(createReplica({ id, membership, hash, inc, signer: hmacSigner(id), verifier, joining })) as ReplicaCore;
    const k = replicas.findIndex((r) => r.id === id);
    if (k >= 0) replicas[k] = core;
    else replicas.push(core);
    return core;
  }

  /** The operator (and the watchdog, for its restores): signs requests as `op` (`scc`) and
   *  records the replicas' answers (PROTOCOL §8.1, §10.9). */
  const opReplies: { to: ProcessId; from: ProcessId; nonce: string; rsn: number; ok: boolean; text: string }[] = [];
  for (const client of ['op', 'scc']) {
    const core: Core = {
      id: client,
      step: (input) => {
        if (input.type === 'frame') {
          for (const it of input.frame.items) {
            if (it.type === 'op.reply') opReplies.push({ to: client, from: input.frame.from, nonce: it.nonce, rsn: it.rsn, ok: it.ok, text: it.text });
          }
        }
        return [];
      },
      nextWakeMs: () => null,
    };
    shells.set(client, new Shell({ core, cluster: 'test', signer: hmacSigner(client), verifier, transport: { send: () => {} } }));
  }
  function operate(payload: OperatorRequest, to: readonly ProcessId[] = membership.replicas, client: ProcessId = 'op'): void {
    const signed = signCG({ csn: 0, gssnAck: 0, payload, client, inc: 0 }, hmacSigner(client));
    for (const r of to) {
      const bytes = encodeFrame({ from: client, to: r, items: [{ type: 'op.request', signed }] }, { cluster: 'test', signer: hmacSigner(client) });
      queue.push({ at: now + latency, seq: seq++, to: r, bytes, from: client });
    }
  }

  /** A frame from `from` (the watchdog, the operator) to `to`, as its own shell would sign it. */
  function sendAs(from: ProcessId, to: ProcessId, items: Item[]): void {
    const bytes = encodeFrame({ from, to, items }, { cluster: 'test', signer: hmacSigner(from) });
    queue.push({ at: now + latency, seq: seq++, to, bytes, from });
  }

  function runUntil(endMs: number): void {
    while (now <= endMs) {
      queue.sort((a, b) => a.at - b.at || a.seq - b.seq);
      let nextAt = endMs + 1;
      const firstReady = queue.find((m) => !paused.has(m.to));
      if (firstReady !== undefined) nextAt = Math.min(nextAt, firstReady.at);
      for (const [id, s] of shells) if (runs(id)) { const w = s.nextWakeMs(); if (w !== null) nextAt = Math.min(nextAt, Math.max(w, now)); }
      if (nextAt > endMs) { now = endMs + 1; break; }
      now = nextAt;
      for (let i = 0; i < queue.length && (queue[i] as { at: number }).at <= now;) {
        const m = queue[i] as (typeof queue)[number];
        if (paused.has(m.to)) { i++; continue; }
        queue.splice(i, 1);
        if (!down.has(m.to)) shells.get(m.to)?.receive(m.bytes, now, m.from);
      }
      for (const [id, s] of shells) { if (!runs(id)) continue; const w = s.nextWakeMs(); if (w !== null && w <= now) s.tick(now); }
    }
  }

  /** A paused process runs again: its overdue timers first, then what waited for it, in the
   *  order Node.js takes them after a stall (timers, then I/O). */
  function resume(id: ProcessId): void {
    paused.delete(id);
    shells.get(id)?.tick(now);
  }

  /** Items leaving any process from now on, as `pick` names them (null: not recorded): what a
   *  peer or the watchdog receives. */
  function sent(pick: (from: ProcessId, to: ProcessId, item: Item) => string | null): string[] {
    const seen: string[] = [];
    filters.push((from, to, item) => {
      const name = pick(from, to, item);
      if (name !== null) seen.push(name);
      return item;
    });
    return seen;
  }

  return {
    membership, replicas, agents: agentCores, shells, observed, filters, sent, down, paused, resume, restartAgent, addAgent, startReplica, operate, opReplies, sendAs,
    now: () => now,
    runUntil,
    run: (ms: number) => runUntil(now + ms),
    input: (id: ProcessId, input: Parameters<Shell['input']>[0]) => shells.get(id)?.input(input),
    effects: <T extends Observed['effect']['type']>(type: T, proc?: ProcessId) =>
      observed.filter((o) => o.effect.type === type && (proc === undefined || o.proc === proc)).map((o) => ({ ...o, effect: o.effect as Extract<Observed['effect'], { type: T }> })),
  };
}

/** The last task journal (PROTOCOL §10.9) each replica of `c` wrote. */
export function journals(c: ReturnType<typeof makeCluster>): Map<string, TaskJournal> {
  const out = new Map<string, TaskJournal>();
  for (const o of c.effects('persist.tasks')) {
    const j = decodeJournal(o.effect.journal);
    if (!j.ok) throw new Error(`${o.proc} wrote an unreadable journal: ${j.detail}`);
    out.set(o.proc, j.value);
  }
  return out;
}
