// A node agent's core (docs/PROTOCOL.md §5; spec §3.5–3.6, §1.4). It votes on the group message
// replicas the three replicas send: a command is delivered on f+1 = 2 matching copies, in the
// order of the per-agent GSSN chain; its group-ack mark advances only once every replica's copy
// has arrived and matched (flaw 1 fix). It sends its own requests with a CSN to the primary,
// keeps each until f+1 replicas acknowledge it, falls back to both backups when that takes
// longer than four retransmission periods, and heartbeats the backups.
// Deterministic: no clock, no I/O, no randomness.
//
// The state is one record (src/core/agent-state.ts) and each part of the agent a module of verbs
// over it: its own requests (agent-requests.ts), the group message buffer with its timeouts and
// error reports (agent-gmb.ts), and the voting, delivery and group changes (agent-group.ts).
// This file dispatches the inputs (stepAgent), runs the timers and the heartbeat, and offers the
// record as a Core (createAgent) to the drivers.
import { countDrop, unreachable } from '../base/result.ts';
import { flushAcks, linkReceive, linkSend, linkTimers, startLinks, type Delivery } from './link.ts';
import { linkNextWakeMs, linkView, logSessionEvent } from './link-views.ts';
import type { AgentInput, Core, CoreEffect } from './node.ts';
import type { ProcessId } from './ports.ts';
import type { Frame } from './wire/messages.ts';
import { groupRoom, replicaTimeouts, sendReports } from './agent-gmb.ts';
import { applyGroup, learnKeys, onCopy } from './agent-group.ts';
import { onCsnAck, requestsDue, requestTimers, sendRequest } from './agent-requests.ts';
import { backups, createAgentState, type AgentOptions, type AgentState } from './agent-state.ts';

export type AgentStatus = {
  id: ProcessId;
  inc: number;
  primary: ProcessId;
  gssnDelivered: number;
  gssnAcked: number;
  csnSent: number;
  csnAcked: number;
  pendingCopies: number;
  pendingRequests: number;
  errorReports: number;
  drops: Record<string, number>;
  terminated: string | null;
  replicas: { id: ProcessId; connected: boolean; unacked: number; queued: number }[];
  /** The group's view as this agent last learnt it (PROTOCOL §10.7). */
  view: number;
};

export type AgentCore = Core<AgentInput> & { status(nowMs: number): AgentStatus };

/** The agent as the drivers' Core port: its state record behind the port's three methods. */
export function createAgent(opts: AgentOptions): AgentCore {
  const s = createAgentState(opts);
  return { id: s.id, step: (input) => stepAgent(s, input), nextWakeMs: () => agentNextWakeMs(s), status: () => agentStatus(s) };
}

function onDelivery(s: AgentState, d: Delivery, nowMs: number, out: CoreEffect[]): void {
  switch (d.type) {
    case 'grp':
      if (d.body.type === 'gc') onCopy(s, d.from, d.body.gc, nowMs, out);
      return;
    case 'gack':
      onCsnAck(s, d.from, d.ack, nowMs);
      return;
    case 'ptp':
      if (d.payload.type === 'notice') out.push({ type: 'deliver.notice', from: d.from, text: d.payload.text });
      return;
    case 'established':
    case 'reset':
      logSessionEvent(d, out);
      return;
    default: {
      const never: never = d;
      return never;
    }
  }
}

function onFrame(s: AgentState, frame: Frame, nowMs: number, out: CoreEffect[]): void {
  const from = frame.from;
  for (const item of frame.items) {
    if (s.terminated !== null) break;
    if (item.type === 'probe') {
      if (s.replicas.includes(from)) out.push({ type: 'send', to: from, item: { type: 'probe.reply', nonce: item.nonce } });
      continue;
    }
    if (item.type === 'hb' || item.type === 'probe.reply' || item.type === 'status.query' || item.type === 'status.reply' || item.type === 'challenge') continue;
    const r = linkReceive(s.links, from, item, nowMs, out, (peer, body) => groupRoom(s, peer, body));
    if (r.drop !== null) countDrop(s.drops, r.drop);
    for (const d of r.deliveries) onDelivery(s, d, nowMs, out);
  }
}

function timers(s: AgentState, nowMs: number, out: CoreEffect[]): void {
  if (requestsDue(s) <= nowMs) requestTimers(s, nowMs, out);
  linkTimers(s.links, nowMs, out, s.primary);
  if (s.replicaTimeoutsDueAtMs <= nowMs) replicaTimeouts(s, nowMs);
  sendReports(s, nowMs, out);
  if (s.heartbeatAtMs <= nowMs) {
    // spec §1.3: every 75 ms to one backup, alternating.
    const bs = backups(s);
    const to = bs[s.nextBackup % bs.length];
    s.nextBackup++;
    s.heartbeatCounter++;
    if (to !== undefined) {
      out.push({ type: 'send', to, item: { type: 'hb', inc: s.links.inc, counter: s.heartbeatCounter, info: { type: 'agent', gssnDelivered: s.gssnDelivered, csnSent: s.csnSent } } });
    }
    s.heartbeatAtMs = nowMs + s.timing.agentHeartbeatMs;
  }
}

export function stepAgent(s: AgentState, input: AgentInput): CoreEffect[] {
  const out: CoreEffect[] = [];
  if (s.terminated !== null) return out;
  const nowMs = input.nowMs;
  if (!s.started) {
    s.started = true;
    s.startedAtMs = nowMs;
    startLinks(s.links, nowMs, out);
    s.heartbeatAtMs = nowMs;
    sendRequest(s, { type: 'node.join', slots: s.slots, resync: s.resync }, nowMs, out);
  }
  switch (input.type) {
    case 'tick':
    case 'transport.up':
    case 'transport.down':
      break;
    case 'dropped':
      countDrop(s.drops, input.code);
      break;
    case 'request':
      sendRequest(s, input.request, nowMs, out);
      break;
    case 'group':
      learnKeys(s, input.added, out);
      applyGroup(s, { type: 'replicas', view: input.view, primary: input.primary, replicas: input.replicas, ports: input.ports, added: input.added }, nowMs, out);
      break;
    case 'notice':
      linkSend(s.links, input.to, 0, { type: 'notice', text: input.text }, nowMs, out);
      break;
    case 'frame':
      onFrame(s, input.frame, nowMs, out);
      break;
    default:
      return unreachable(input);
  }
  if (s.terminated === null) timers(s, nowMs, out);
  flushAcks(s.links, out, () => s.gssnAcked, nowMs);
  return out;
}

export function agentNextWakeMs(s: AgentState): number | null {
  if (s.terminated !== null) return null;
  if (!s.started) return 0;
  let next = s.heartbeatAtMs;
  const l = linkNextWakeMs(s.links);
  if (l !== null) next = Math.min(next, l);
  next = Math.min(next, s.replicaTimeoutsDueAtMs, requestsDue(s));
  if (s.reports.size > 0) next = Math.min(next, s.reportAtMs);
  return next;
}

export function agentStatus(s: AgentState): AgentStatus {
  return {
    id: s.id, inc: s.inc, primary: s.primary, view: s.view, gssnDelivered: s.gssnDelivered, gssnAcked: s.gssnAcked, csnSent: s.csnSent,
    csnAcked: s.csnAcked, pendingCopies: s.gmb.size, pendingRequests: s.pending.size, errorReports: s.errorReports, drops: { ...s.drops },
    terminated: s.terminated,
    replicas: s.replicas.map((r) => {
      const v = linkView(s.links, r);
      return { id: r, connected: v?.established ?? false, unacked: v?.unacked ?? 0, queued: v?.queued ?? 0 };
    }),
  };
}
