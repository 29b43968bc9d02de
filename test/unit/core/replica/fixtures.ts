// Shared by the unit tests of the replica's parts (src/core/replica/): one replica's state record,
// made by createReplicaRecord and started by replica.ts's firstStep, whose
// verbs a test calls by hand at exact times, as test/unit/core/link.test.ts steps two links. The
// helpers read back what a peer would observe: the sends (and the lane-0 payloads inside them),
// the suspicions, the logs, and the status.
import { createHash } from 'node:crypto';
import { DEFAULT_TIMING } from '../../../../src/core/constants.ts';
import { createLinks, linkReceive, startLinks } from '../../../../src/core/link.ts';
import type { CoreEffect, Membership } from '../../../../src/core/node.ts';
import type { ProcessId } from '../../../../src/core/ports.ts';
import { firstStep } from '../../../../src/core/replica.ts';
import { createReplicaRecord, type Replica } from '../../../../src/core/replica/record.ts';
import { onHeartbeat } from '../../../../src/core/replica/failure-detector.ts';
import { order } from '../../../../src/core/replica/primary.ts';
import { onConfirmation, onOrderedRequest } from '../../../../src/core/replica/backup.ts';
import { pack, signCG } from '../../../../src/core/wire/frame.ts';
import { orderClaim, type AgentRequest, type Item, type OperatorRequest, type PtpPayload, type SignedCG } from '../../../../src/core/wire/messages.ts';
import { hmacSigner, hmacVerifier } from '../harness.ts';

export const T = DEFAULT_TIMING;
/** Three replicas on n1–n3; agent a1 shares n1 with r1, agent a4 has n4 to itself. */
export const membership: Membership = {
  cluster: 'c1', replicas: ['r1', 'r2', 'r3'], replicaNodes: ['n1', 'n2', 'n3'], spareReplicas: [],
  agents: [{ id: 'a1', node: 'n1' }, { id: 'a4', node: 'n4' }], scc: 'scc', operators: ['op'], timing: T,
};
export const hash = (d: Uint8Array): Uint8Array => new Uint8Array(createHash('sha256').update(d).digest());

/** Replica `id`'s record, not started. */
export const record = (id: ProcessId): Replica =>
  createReplicaRecord({ id, membership, hash, inc: 1, signer: hmacSigner(id), verifier: hmacVerifier(['r1', 'r2', 'r3', 'a1', 'a4', 'scc', 'op']) });

/** Replica `id` started at `nowMs` by its first step (firstStep: links, detector), with
 *  sessions open to `peers`: what it sends them on lane 0 then leaves at once as `send` effects. */
export function started(id: ProcessId, peers: readonly ProcessId[] = [], nowMs = 0): Replica {
  const r = record(id);
  firstStep(r, nowMs, []);
  for (const p of peers) connect(r, p, nowMs);
  return r;
}

/** The three hellos of PROTOCOL §3.2 between `r` and a peer of incarnation 1. */
function connect(r: Replica, peer: ProcessId, nowMs: number): void {
  const other = createLinks(peer, 1, T, [r.id]);
  let toR: CoreEffect[] = [];
  startLinks(other, nowMs, toR);
  for (let round = 0; round < 2; round++) {
    const toPeer: CoreEffect[] = [];
    for (const s of sends(toR)) if (s.to === r.id) linkReceive(r.links, peer, s.item, nowMs, toPeer);
    toR = [];
    for (const s of sends(toPeer)) if (s.to === peer) linkReceive(other, r.id, s.item, nowMs, toR);
  }
  if (r.links.peers.get(peer)?.established !== true) throw new Error(`no session between ${r.id} and ${peer}`);
}

export const sends = (out: CoreEffect[]): { to: ProcessId; item: Item }[] => out.flatMap((e) => (e.type === 'send' ? [{ to: e.to, item: e.item }] : []));
/** Lane-0 payloads sent, as the peer's link hands them up. */
export const ptps = (out: CoreEffect[]): { to: ProcessId; body: PtpPayload }[] =>
  sends(out).flatMap((s) => (s.item.type === 'ptp' && s.item.body !== null ? [{ to: s.to, body: s.item.body }] : []));
/** Unsequenced items (heartbeats, probes, replies, reports to the watchdog) of one type. */
export const items = <K extends Item['type']>(out: CoreEffect[], type: K): { to: ProcessId; item: Extract<Item, { type: K }> }[] =>
  sends(out).flatMap((s) => (s.item.type === type ? [{ to: s.to, item: s.item as Extract<Item, { type: K }> }] : []));
export const suspicions = (out: CoreEffect[]): [ProcessId | null, string, string][] =>
  out.flatMap((e) => (e.type === 'suspect' ? [[e.target, e.reason, e.detail] as [ProcessId | null, string, string]] : []));
export const logs = (out: CoreEffect[], event: string): Record<string, unknown>[] =>
  out.flatMap((e) => (e.type === 'log' && e.event === event ? [e.fields] : []));
/** [rsn, client, csn] of each request delivered (spec §3.6 G9). */
export const delivered = (out: CoreEffect[]): [number, ProcessId, number][] =>
  out.flatMap((e) => (e.type === 'deliver.request' ? [[e.rsn, e.client, e.csn] as [number, ProcessId, number]] : []));

export const echo = (tag: string): AgentRequest => ({ type: 'echo', tag, fanout: 'self', count: 1, data: new Uint8Array([1]) });
export const join: AgentRequest = { type: 'node.join', slots: 4, resync: false };
/** An agent's request as the agent signs it (PROTOCOL §5.5). */
export const cg = (client: ProcessId, csn: number, payload: AgentRequest = echo(`${client}/${csn}`), inc = 1): SignedCG =>
  signCG({ csn, gssnAck: 0, payload, client, inc }, hmacSigner(client));
/** An operator's request as the operator signs it (PROTOCOL §8.1: csn = inc = 0). */
export const opRequest = (payload: OperatorRequest): SignedCG => signCG({ csn: 0, gssnAck: 0, payload, client: 'op', inc: 0 }, hmacSigner('op'));
export const kill = (nonce: string, task = 't9'): OperatorRequest => ({ type: 'task.kill', nonce, task });

/** Backup `from`'s `order` confirmation of `digest` at `rsn` (PROTOCOL §5.8), signed by it
 *  unless `sig` is given. */
export function confirmation(r: Replica, from: ProcessId, rsn: number, digest: Uint8Array, sig?: Uint8Array): Extract<PtpPayload, { type: 'order' }> {
  const view = r.state.group.view;
  return { type: 'order', rsn, digest, view, sig: sig ?? hmacSigner(from).sign(pack(orderClaim(from, view, rsn, digest))) };
}

/** A heartbeat from `from` with counter `counter` (PROTOCOL §6), as `r` receives it. */
export function heartbeat(r: Replica, from: ProcessId, counter: number, nowMs: number, out: CoreEffect[] = [], inc = 1): boolean {
  const info = from.startsWith('a') ? { type: 'agent' as const, gssnDelivered: 0, csnSent: 0 }
    : { type: 'replica' as const, role: 'backup' as const, rsn: 0, gssn: 0, digest: new Uint8Array(32), view: r.state.group.view, ckptRsn: 0, ckptDigest: new Uint8Array(32) };
  return onHeartbeat(r, from, { type: 'hb', inc, counter, info }, nowMs, out);
}

/** `agent` joins (its `node.join` at the next RSN, CSN 1): ordered by the primary, or, on a
 *  backup, proposed by the primary and confirmed by the other backup. */
export function joined(r: Replica, agent: ProcessId, nowMs: number): void {
  const signed = cg(agent, 1, join);
  const out: CoreEffect[] = [];
  if (r.state.primary === r.id) order(r, signed, nowMs, out);
  else {
    const rsn = r.state.rsn + 1;
    onOrderedRequest(r, rsn, signed, nowMs, out);
    const other = r.state.replicas.find((x) => x !== r.id && x !== r.state.primary) as ProcessId;
    onConfirmation(r, other, confirmation(r, other, rsn, hash(signed.bytes)), nowMs, out);
  }
  if (r.state.nodes.get(agent)?.joined !== true) throw new Error(`${agent} did not join`);
}
