// The deterministic transitions of the manager's replicated state (docs/PROTOCOL.md §5.4, §8,
// §10): an operator request (answered once per nonce), an input of the group's own (ticks,
// condemnations, added replicas, failed nodes), and an agent's request, each applied at its RSN
// to the ReplicatedState (replicated-state.ts), returning the ApplyResult.
import { dgrpRequest, nodeFailed, progressRequest, nodeJoined, operateTask, procReports, signalRequest, submitTask, tick } from './cluster-inputs.ts';
import { applyAdd, applyCondemn, checkEvidence, recordReport, recoveryStep, replicasCommand } from './group-view.ts';
import { MAX_BURST_COUNT, MAX_OPERATOR_OUTCOMES } from './constants.ts';
import { eventEffect } from './cluster-state.ts';
import type { ProcessId } from './ports.ts';
import { addNode, finishDrains, removeNode, shutdown, wasRemoved, type Done } from './replicated-members.ts';
import { absorb, absorbView, addedSpares, emit, groupContext, noResult, type ApplyResult, type OperatorOutcome, type ReplicatedState } from './replicated-state.ts';
import { unreachable } from '../base/result.ts';
import { guardCommands, markRank } from './cluster-rollback.ts';
import { unpack } from './wire/frame.ts';
import {
  groupMsgCG, type AgentRequest, type GroupInput, type GroupMsgGC, type NodeAdd, type NodeRemove, type NodeRestore, type OperatorRequest, type TaskRestore, type TaskSubmit,
} from './wire/messages.ts';

/** The submit a restore carries, decoded (its operator signature was checked before ordering:
 *  by the watchdog, and by each replica that received the restore, PROTOCOL §10.9). */
function restoredSubmit(request: TaskRestore): TaskSubmit | null {
  const tree = unpack(request.submit);
  const cg = tree.ok ? groupMsgCG.dec(tree.value, 'restore.submit') : tree;
  return cg.ok && cg.value.payload.type === 'task.submit' && cg.value.payload.nonce === request.nonce ? cg.value.payload : null;
}

/** The membership change a `node.restore` carries, decoded (its operator signature was checked
 *  before ordering, like a restored submit's). */
function restoredChange(request: NodeRestore): NodeAdd | NodeRemove | null {
  const tree = unpack(request.op);
  const cg = tree.ok ? groupMsgCG.dec(tree.value, 'restore.op') : tree;
  if (!cg.ok) return null;
  const p = cg.value.payload;
  return (p.type === 'node.add' || p.type === 'node.remove') && p.nonce === request.nonce ? p : null;
}

/** What one operator request does (applyOperatorRequest records and answers it). */
function operatorStep(s: ReplicatedState, request: OperatorRequest, signed: { bytes: Uint8Array; sig: Uint8Array } | null, r: ApplyResult): Done {
  const accepting = s.shutdownAt === null;
  const stopped: Done = { outcome: { ok: false, text: `the cluster is shutting down (ordered at RSN ${s.shutdownAt ?? 0}): nothing new is accepted` }, effects: [] };
  switch (request.type) {
    case 'cluster.shutdown':
      return shutdown(s, r);
    case 'node.add':
      return addNode(s, request, signed);
    case 'node.remove':
      return removeNode(s, request, signed, r);
    case 'node.restore': {
      const change = restoredChange(request);
      if (change === null) return { outcome: { ok: false, text: 'restore: not an operator\'s node.add or node.remove' }, effects: [] };
      const op = { bytes: request.op, sig: request.opSig };
      return change.type === 'node.add' ? addNode(s, change, op) : removeNode(s, change, op, r);
    }
    case 'task.submit':
      if (!accepting) return stopped;
      return submitTask(s.cluster, s.nodes, s.timers, request, s.rsn, signed === null ? null : { nonce: request.nonce, ...signed });
    case 'task.restore': {
      if (!accepting) return stopped;
      const submit = restoredSubmit(request);
      if (submit === null) return { outcome: { ok: false, text: `restore of ${request.task}: not an operator's task.submit` }, effects: [] };
      return submitTask(s.cluster, s.nodes, s.timers, submit, s.rsn, { nonce: request.nonce, bytes: request.submit, sig: request.submitSig }, request.task);
    }
    case 'task.kill':
    case 'task.restart':
      return operateTask(s.cluster, s.nodes, s.timers, request.task, request.type === 'task.kill' ? 'kill' : 'restart');
    default:
      return unreachable(request);
  }
}

/** Apply an operator request at RSN `s.rsn`; a nonce seen before is answered, not re-applied.
 *  `signed`: the CG it came in, journalled with a submitted task (PROTOCOL §10.9). */
export function applyOperatorRequest(s: ReplicatedState, request: OperatorRequest, signed: { bytes: Uint8Array; sig: Uint8Array } | null = null): ApplyResult {
  const r = noResult();
  const seen = s.outcomes.get(request.nonce);
  if (seen !== undefined) {
    r.reply = seen;
    return r;
  }
  const done = operatorStep(s, request, signed, r);
  absorb(s, done.effects, r);
  finishDrains(s, r);
  const outcome: OperatorOutcome = { nonce: request.nonce, rsn: s.rsn, ok: done.outcome.ok, text: done.outcome.text };
  s.outcomes.set(request.nonce, outcome);
  s.outcomeOrder.push(request.nonce);
  while (s.outcomeOrder.length > MAX_OPERATOR_OUTCOMES) s.outcomes.delete(s.outcomeOrder.shift() as string);
  r.reply = outcome;
  return r;
}

/** Apply an input of the group's own (PROTOCOL §8.3, §8.4) at RSN `s.rsn`. */
export function applyGroupInput(s: ReplicatedState, input: GroupInput): ApplyResult {
  const r = noResult();
  switch (input.type) {
    case 'tick':
      absorb(s, tick(s.cluster, s.nodes, s.timers), r);
      finishDrains(s, r);
      if (s.shutdownAt === null) absorbView(s, recoveryStep(groupContext(s), s.group), r);
      return r;
    case 'replica.condemn': {
      // The primary checked the evidence before ordering it; a correct primary never orders a
      // refused one, so nothing changes (the backups' order confirmation keeps them equal).
      const checked = checkEvidence(s.group, s.replicas, input.evidence);
      if ('refused' in checked) {
        r.events.push(eventEffect(null, null, `condemnation refused: ${checked.refused}`));
        return r;
      }
      const reason = input.evidence[0]?.accusation.reason ?? 'silent';
      absorbView(s, applyCondemn(groupContext(s), s.group, checked.target, reason), r);
      return r;
    }
    case 'replica.add':
      absorbView(s, applyAdd(groupContext(s), s.group, input.id, input.port), r);
      return r;
    case 'node.failed': {
      const rec = s.nodes.get(input.agent);
      // A newer incarnation joined since the suspicion began, or it was already declared; or the
      // cluster is shutting down, and its nodes stop on purpose (PROTOCOL §10.11).
      if (rec === undefined || rec.failed || !rec.joined || rec.inc !== input.inc || s.shutdownAt !== null) return r;
      s.nodes.set(input.agent, { ...rec, failed: true });
      absorb(s, nodeFailed(s.cluster, s.nodes, s.timers, input.agent), r);
      finishDrains(s, r);
      r.reset = { node: rec.node, rsn: s.rsn, address: s.added.get(input.agent)?.address ?? '' };
      absorbView(s, recoveryStep(groupContext(s), s.group), r);
      return r;
    }
    default:
      return unreachable(input);
  }
}

/** Apply one request from agent `client` (incarnation `inc`), already accepted in CSN order, at
 *  RSN `s.rsn`. */
export function applyRequest(s: ReplicatedState, client: ProcessId, request: AgentRequest, inc = 0): ApplyResult {
  const messages: GroupMsgGC[] = [];
  const result = (): ApplyResult => ({ ...noResult(), messages });
  switch (request.type) {
    case 'node.join': {
      // Every agent's first request; its incarnation was adopted just before (replica.ts deliver).
      const rec = s.nodes.get(client);
      if (rec === undefined) {
        // A removed node's agent that came back (restarted, or booted by a cluster reset before
        // the removal was restored) is told again to stop (PROTOCOL §10.12).
        const r = result();
        if (wasRemoved(s, client)) emit(s, client, { type: 'node.shutdown', rsn: s.rsn, removed: true }, messages);
        return r;
      }
      s.nodes.set(client, { ...rec, joined: true, slots: request.slots, failed: false, inc, protector: '' });
      // The new incarnation learns which of its node's processes the group believes run, when
      // there are any or it asks (PROTOCOL §8.6); placement may use its slots now.
      const r = result();
      const joined = nodeJoined(s.cluster, s.nodes, s.timers, client);
      if (request.resync || joined.adopt.length > 0) emit(s, client, { type: 'procs.adopt', procs: joined.adopt }, messages);
      absorb(s, joined.effects, r);
      // A (re)joined agent learns the group as it is now, and may host a replacement.
      if (s.group.view > 0) emit(s, client, replicasCommand(s.group, s.replicas, s.primary, addedSpares(s.added)), messages);
      // One that joins while the cluster shuts down stops too (PROTOCOL §10.11).
      if (s.shutdownAt !== null) emit(s, client, { type: 'node.shutdown', rsn: s.shutdownAt, removed: false }, messages);
      else absorbView(s, recoveryStep(groupContext(s), s.group), r);
      return r;
    }
    case 'node.protector': {
      const rec = s.nodes.get(client);
      if (rec === undefined || !rec.joined) return result();
      s.nodes.set(client, { ...rec, protector: request.endpoint });
      // Its store is empty (a new incarnation's too): it learns the live rollback tasks' keys.
      for (const command of guardCommands(s.cluster)) emit(s, client, command, messages);
      return result();
    }
    case 'echo': {
      if (!s.nodes.has(client)) return result(); // a removed node's (PROTOCOL §10.12)
      // Only agents that joined: their incarnation is adopted, so their chain is well defined
      // (PROTOCOL §5.7). The sender itself has joined by now: its request was just ordered.
      const joined = [...s.nodes.entries()].filter(([, n]) => n.joined && !n.failed).map(([id]) => id).sort();
      const targets = request.fanout === 'self' ? [client] : joined;
      // A faulty agent cannot make the group flood the cluster (constants.ts MAX_BURST_COUNT).
      const count = Math.min(request.count, MAX_BURST_COUNT);
      for (let index = 0; index < count; index++) {
        for (const dest of targets) {
          emit(s, dest, { type: 'echo.reply', origin: client, tag: request.tag, rsn: s.rsn, index, data: request.data }, messages);
        }
      }
      return result();
    }
    case 'error.report':
      return {
        ...result(), report: { gssn: request.gssn, count: request.count, kind: request.kind, suspects: request.suspects },
        accuse: recordReport(s.group, s.replicas, client, request.kind, request.suspects),
      };
    case 'proc.report': {
      const r = result();
      // A failed node's reports are stale: its processes were declared dead (PROTOCOL §8.4); a
      // removed node has none left (§10.12).
      if (s.nodes.get(client)?.failed !== false) return r;
      absorb(s, procReports(s.cluster, s.nodes, s.timers, client, request.reports), r);
      finishDrains(s, r);
      return r;
    }
    case 'rollback.mark': {
      const node = s.nodes.get(client);
      const rec = s.cluster.tasks.get(request.task);
      if (node === undefined || node.failed || rec === undefined) return result();
      const { type: _t, task: _k, vpid, ...mark } = request;
      markRank(rec, node.node, vpid, mark);
      return result();
    }
    case 'dgrp.report':
    case 'dgrp.arrive': {
      const r = result();
      if (s.nodes.get(client)?.failed !== false) return r;
      absorb(s, dgrpRequest(s.cluster, s.nodes, client, request), r);
      return r;
    }
    case 'proc.progress': {
      const r = result();
      if (s.nodes.get(client)?.failed !== false) return r;
      absorb(s, progressRequest(s.cluster, s.nodes, client, request), r);
      return r;
    }
    case 'sig.request': {
      const r = result();
      if (s.nodes.get(client)?.failed !== false) return r;
      absorb(s, signalRequest(s.cluster, s.nodes, s.timers, client, request), r);
      return r;
    }
    case 'task.submit':
    case 'task.kill':
    case 'task.restart':
    case 'task.restore':
    case 'cluster.shutdown':
    case 'node.add':
    case 'node.remove':
    case 'node.restore':
      // Replicas refuse these from agents before ordering; a primary that ordered one anyway
      // changes nothing.
      return result();
    default:
      return unreachable(request);
  }
}
