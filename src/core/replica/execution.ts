// Executing the order (spec §3.6 G9; docs/PROTOCOL.md §5, §8.1, §10.4): every replica, primary or
// backup, runs each ordered input at its RSN against the replicated state and sends what it
// produced — group messages on lane 1, the operator's answer, journal entries, the watchdog's
// reset or shutdown notice, self-diagnosis triggers — then takes a checkpoint digest when due.
import { accuse, ownDigest } from '../diagnosis.ts';
import { MAX_JOURNAL_EVENTS } from '../constants.ts';
import { linkAddPeer, linkSend } from '../link.ts';
import type { CoreEffect, LearntKey } from '../node.ts';
import type { Ordered } from '../order-confirm.ts';
import type { ProcessId } from '../ports.ts';
import { applyGroupInput, applyOperatorRequest, applyRequest } from '../replicated-apply.ts';
import {
  adoptIncarnation, encodeState, expectedCsn, isOperatorRequest, mayRequest, type ApplyResult, type OperatorOutcome,
} from '../replicated-state.ts';
import { statePayloads } from '../state-transfer.ts';
import type { SignedCG } from '../wire/messages.ts';
import { digest, groupAck, isMember, logDelivered, progressKey, suspect, type Replica } from './record.ts';
import { unheard } from './failure-detector.ts';
import { onViewChanged, sendOwedState, syncLinks } from './group-change.ts';

export function reply(operator: ProcessId, o: OperatorOutcome, out: CoreEffect[]): void {
  out.push({ type: 'send', to: operator, item: { type: 'op.reply', nonce: o.nonce, rsn: o.rsn, ok: o.ok, text: o.text } });
}

/** Execute one ordered input at RSN `state.rsn` (already incremented). */
export function execute(r: Replica, o: Ordered, nowMs: number, out: CoreEffect[]): void {
  if (o.type === 'cg') {
    deliver(r, o.signed, nowMs, out);
  } else {
    const { state } = r;
    logDelivered(r, o);
    out.push({ type: 'deliver.input', rsn: state.rsn, input: o.input });
    const claimView = state.group.view; // the view a replica.add's port claim names
    applied(r, applyGroupInput(state, o.input), null, nowMs, out);
    // PROTOCOL §10.6: the new member gets the state as of the RSN where it joined, addressed
    // to the incarnation that asked for it (a spare id started again may still have a session
    // of its dead incarnation here, whose lanes die with the handshake).
    const joined = o.input.type === 'replica.add' ? o.input.id : null;
    if (joined !== null && joined !== r.id && isMember(r, joined) && isMember(r, r.id)) {
      const seen = r.detector.heard.get(joined);
      if (seen !== undefined) Object.assign(seen, { atMs: nowMs, sinceCheck: true, missedChecks: 0 }); // its predecessor's silence is not its own
      r.change.owedState.set(joined, { view: claimView, payloads: statePayloads(state.rsn, encodeState(state), digest(r)) });
      sendOwedState(r, joined, nowMs, out);
    }
  }
  checkpoint(r, nowMs, out);
}

/** spec §3.6 G9: deliver an ordered request (an agent's, or an operator's, PROTOCOL §8.1). */
export function deliver(r: Replica, signed: SignedCG, nowMs: number, out: CoreEffect[]): void {
  const { state } = r;
  const cg = signed.cg;
  r.backup.progressTimers.delete(progressKey(cg));
  // Logged even when refused below: the RSN is spent either way (a no-op), and a survivor
  // syncing after a condemned primary (PROTOCOL §10.5) must be able to replay every RSN the
  // other executed, no-ops included, or it never reaches the other's RSN.
  logDelivered(r, { type: 'cg', signed });
  if (r.nonceClients.has(cg.client)) {
    if (!isOperatorRequest(cg.payload) || !mayRequest(cg.client, cg.payload, r.operators, r.m.scc)) {
      suspect(r, out, state.primary, 'rsn.gap', `rsn ${state.rsn} carries a ${cg.payload.type} from ${cg.client}`);
      return;
    }
    out.push({ type: 'deliver.request', rsn: state.rsn, client: cg.client, inc: cg.inc, csn: cg.csn, request: cg.payload });
    applied(r, applyOperatorRequest(state, cg.payload, { bytes: signed.bytes, sig: signed.sig }), cg.client, nowMs, out);
    return;
  }
  const expected = expectedCsn(state, cg.client, cg.inc);
  if (cg.csn !== expected || isOperatorRequest(cg.payload)) {
    // The primary orders only the next CSN of the newest incarnation, and only operators'
    // task requests, so a backup seeing anything else caught it lying.
    suspect(r, out, state.primary, 'rsn.gap', `rsn ${state.rsn} carries csn ${cg.csn}/${cg.inc} ${cg.payload.type} of ${cg.client}, expected ${expected}`);
    return;
  }
  adoptIncarnation(state, cg.client, cg.inc);
  state.csnReceived.set(cg.client, cg.csn);
  out.push({ type: 'deliver.request', rsn: state.rsn, client: cg.client, inc: cg.inc, csn: cg.csn, request: cg.payload });
  if (cg.payload.type === 'node.join') {
    // A new incarnation of the agent is alive: any suspicion of its node is over.
    r.detector.probes.delete(cg.client);
    const node = state.nodes.get(cg.client)?.node;
    if (node !== undefined) r.resets.delete(node);
  }
  applied(r, applyRequest(state, cg.client, cg.payload, cg.inc), cg.client, nowMs, out);
  groupAck(r, cg.client, nowMs);
}

/** Send what an applied input produced: group messages, the operator's answer, journal
 *  entries, the watchdog's reset request, and self-diagnosis triggers. */
function applied(r: Replica, result: ApplyResult, client: ProcessId | null, nowMs: number, out: CoreEffect[]): void {
  const { state } = r;
  for (const gc of result.messages) {
    const sent = linkSend(r.links, gc.dest, 1, { type: 'gc', gc }, nowMs, out, gc.destInc);
    if (sent === 'full' || sent === 'unknown-peer') {
      out.push({ type: 'log', level: 'error', event: 'group.send.refused', fields: { dest: gc.dest, gssn: gc.gssn, why: sent } });
    }
  }
  if (result.report !== null) {
    const rep = result.report;
    const detail = `${client} reports ${rep.kind} for ${rep.count} gssn from ${rep.gssn} (suspects ${rep.suspects.join(',')})`;
    // A report naming no member (copies missing from a replica already removed, or from
    // nobody two members agree with) initiates nothing (PROTOCOL §10.2).
    for (const target of rep.suspects.filter((x) => isMember(r, x))) suspect(r, out, target, 'error.report', detail);
  }
  if (result.reply !== null && client !== null) reply(client, result.reply, out);
  const journal = r.report.journal;
  for (const e of result.events) {
    const { type: _type, ...fields } = e; // task, vpid, text, and kind and subject when tagged (eventEffect)
    journal.push({ atMs: nowMs, rsn: state.rsn, ...fields });
    out.push({ type: 'log', level: 'info', event: 'task.event', fields: { rsn: state.rsn, task: e.task, vpid: e.vpid, text: e.text } });
  }
  if (journal.length > MAX_JOURNAL_EVENTS) journal.splice(0, journal.length - MAX_JOURNAL_EVENTS);
  for (const target of result.accuse) accuse(r.diagnosis, target, 'agent.reports', 'error reports from two agents', nowMs, out);
  syncAgents(r, nowMs, out);
  if (result.viewChanged) onViewChanged(r, nowMs, out);
  else syncLinks(r, nowMs, out); // a replacement may have been commanded or abandoned
  if (result.shutdown !== null && r.report.stopping === null) {
    const stopping = { rsn: result.shutdown.rsn, sinceMs: nowMs, noticeAtMs: nowMs, acked: false, done: false };
    r.report.stopping = stopping;
    out.push({ type: 'send', to: r.m.scc, item: { type: 'shutdown.notice', rsn: stopping.rsn } });
    out.push({ type: 'log', level: 'warn', event: 'shutdown.ordered', fields: { rsn: stopping.rsn } });
  }
  if (result.reset !== null) {
    r.resets.set(result.reset.node, { rsn: result.reset.rsn, address: result.reset.address });
    out.push({ type: 'send', to: r.m.scc, item: { type: 'reset.node', ...result.reset } });
    out.push({ type: 'log', level: 'warn', event: 'node.reset.requested', fields: result.reset });
  }
}

/** PROTOCOL §10.4: the state's digest at every digestEveryRsn-th RSN, whichever path executed
 *  it. The primary's too: under load no heartbeat of a backup's names an RSN the primary took a
 *  heartbeat digest at, so a checkpoint is the only state it can compare with theirs. */
export function checkpoint(r: Replica, nowMs: number, out: CoreEffect[]): void {
  if (r.state.rsn % r.t.digestEveryRsn === 0) ownDigest(r.diagnosis, r.state.rsn, digest(r), nowMs, out);
}

/** The state added an agent (applied, or installed by a transfer): the driver learns its key,
 *  and the agent gets a session and heartbeat checks like the others (PROTOCOL §10.12). A
 *  removed agent keeps its session (its last command may still be in flight); its requests
 *  change nothing. */
export function syncAgents(r: Replica, nowMs: number, out: CoreEffect[]): void {
  const { state } = r;
  const announced = r.change.announcedKeys;
  // Called after every applied input: nothing to do unless a node was added (the added set
  // only grows, and every other agent has been known since the start).
  if (state.added.size === announced.size) return;
  const fresh = [...state.added].filter(([a]) => !announced.has(a));
  const keys: LearntKey[] = [];
  for (const [a, n] of fresh) {
    announced.add(a);
    keys.push({ id: a, publicKey: n.publicKey });
    // The node's spares are replicas from now on: their frames are replica frames (§10.12).
    for (const x of n.spares) {
      r.poolIds.add(x.id);
      if (x.id !== r.id && !r.detector.heard.has(x.id)) r.detector.heard.set(x.id, unheard());
      keys.push({ id: x.id, publicKey: x.publicKey, replica: { node: n.node, address: n.address, port: x.port } });
    }
  }
  out.push({ type: 'keys', keys });
  for (const a of state.nodes.keys()) {
    if (r.agentIds.has(a)) continue;
    r.agentIds.add(a);
    r.detector.heard.set(a, unheard());
    linkAddPeer(r.links, a, nowMs, out);
  }
}
