// The manager's replicated state and its deterministic transition on an ordered agent request
// (docs/PROTOCOL.md §5.4; spec §3.3 Fig. 4.25). Every replica applies the same requests in the
// same RSN order and must reach bit-identical state; the SHA-256 digest of the canonical
// encoding is what replicas compare (heartbeats now, self-diagnosis in issue 5).
//
// Kept small on purpose (spec §1.3): unacknowledged group messages are not here — they live in
// each replica's own link state.
import { MAX_BURST_COUNT } from './constants.ts';
import type { Hash, ProcessId } from './ports.ts';
import { pack } from './wire/frame.ts';
import type { AgentRequest, GroupMsgGC, GroupCommand } from './wire/messages.ts';

export type NodeRecord = { node: string; joined: boolean; slots: number };

export type ReplicatedState = {
  /** Last RSN processed (spec rsn_last). */
  rsn: number;
  /** Last GSSN used, for any destination (spec gssn_sent). */
  gssn: number;
  /** The replica set R and the primary (B = R − primary). */
  replicas: ProcessId[];
  primary: ProcessId;
  /** Per agent: the incarnation whose CSNs `csnReceived` counts (PROTOCOL §5.7). */
  clientInc: Map<ProcessId, number>;
  /** Per agent: last in-order CSN delivered (spec csn_rcvd). */
  csnReceived: Map<ProcessId, number>;
  /** Per agent: GSSN of the last group message sent to it (the prevGssn chain, PROTOCOL §5.2). */
  lastGssnTo: Map<ProcessId, number>;
  /** Per agent: its node and what it announced. */
  nodes: Map<ProcessId, NodeRecord>;
};

export function initialState(replicas: readonly ProcessId[], agents: readonly { id: ProcessId; node: string }[]): ReplicatedState {
  const primary = replicas[0];
  if (primary === undefined) throw new Error('a manager group needs replicas');
  const nodes = new Map<ProcessId, NodeRecord>();
  for (const a of agents) nodes.set(a.id, { node: a.node, joined: false, slots: 0 });
  return { rsn: 0, gssn: 0, replicas: [...replicas], primary, clientInc: new Map(), csnReceived: new Map(), lastGssnTo: new Map(), nodes };
}

const sortedEntries = <V>(m: Map<string, V>): [string, V][] => [...m.entries()].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));

/** Canonical bytes: arrays in a fixed order, map entries sorted by key (DESIGN.md §3). */
export function encodeState(s: ReplicatedState): Uint8Array {
  return pack([
    s.rsn, s.gssn, s.replicas, s.primary,
    sortedEntries(s.clientInc),
    sortedEntries(s.csnReceived),
    sortedEntries(s.lastGssnTo),
    sortedEntries(s.nodes).map(([id, n]) => [id, n.node, n.joined, n.slots]),
  ]);
}

export function digestState(s: ReplicatedState, hash: Hash): Uint8Array {
  return hash(encodeState(s));
}

/** Group messages the transition asks to send, and what it tells the replica's shell. */
export type ApplyResult = {
  messages: GroupMsgGC[];
  /** An agent reported copies that timed out or did not match: a self-diagnosis trigger. */
  report: { gssn: number; count: number; kind: string; suspects: ProcessId[] } | null;
};

function emit(s: ReplicatedState, dest: ProcessId, payload: GroupCommand, out: GroupMsgGC[]): void {
  s.gssn++;
  out.push({
    gssn: s.gssn, prevGssn: s.lastGssnTo.get(dest) ?? 0, csnAck: s.csnReceived.get(dest) ?? 0,
    destInc: s.clientInc.get(dest) ?? 0, payload, dest,
  });
  s.lastGssnTo.set(dest, s.gssn);
}

/** The CSN the next request of `client` must carry, given the incarnation `inc` it comes
 *  from, or null for an older incarnation (a replay of a dead agent's request). */
export function expectedCsn(s: ReplicatedState, client: ProcessId, inc: number): number | null {
  const known = s.clientInc.get(client) ?? 0;
  if (inc < known) return null;
  return inc > known ? 1 : (s.csnReceived.get(client) ?? 0) + 1;
}

/** A request from a newer incarnation of `client` is being delivered: its CSNs and its GSSN
 *  chain start afresh (PROTOCOL §5.7). Deterministic: it happens at the request's RSN. */
export function adoptIncarnation(s: ReplicatedState, client: ProcessId, inc: number): void {
  if (inc <= (s.clientInc.get(client) ?? 0)) return;
  s.clientInc.set(client, inc);
  s.csnReceived.set(client, 0);
  s.lastGssnTo.set(client, 0);
}

/** Apply one request from `client`, already accepted in CSN order, at RSN `s.rsn`. */
export function applyRequest(s: ReplicatedState, client: ProcessId, request: AgentRequest): ApplyResult {
  const messages: GroupMsgGC[] = [];
  switch (request.type) {
    case 'node.join': {
      // Every agent's first request; its incarnation was adopted just before (replica.ts deliver).
      const rec = s.nodes.get(client);
      if (rec !== undefined) s.nodes.set(client, { ...rec, joined: true, slots: request.slots });
      return { messages, report: null };
    }
    case 'echo': {
      // Only agents that joined: their incarnation is adopted, so their chain is well defined
      // (PROTOCOL §5.7). The sender itself has joined by now: its request was just ordered.
      const joined = [...s.nodes.entries()].filter(([, n]) => n.joined).map(([id]) => id).sort();
      const targets = request.fanout === 'self' ? [client] : joined;
      // A faulty agent cannot make the group flood the cluster (constants.ts MAX_BURST_COUNT).
      const count = Math.min(request.count, MAX_BURST_COUNT);
      for (let index = 0; index < count; index++) {
        for (const dest of targets) {
          emit(s, dest, { type: 'echo.reply', origin: client, tag: request.tag, rsn: s.rsn, index, data: request.data }, messages);
        }
      }
      return { messages, report: null };
    }
    case 'error.report':
      return { messages, report: { gssn: request.gssn, count: request.count, kind: request.kind, suspects: request.suspects } };
    default: {
      const never: never = request;
      return never;
    }
  }
}
