// The children of an agent's process table (src/core/agent-procs.ts): the processes this
// incarnation spawned, each driven by its FsmAgentProc (fsm/fsm-agent-proc.ts, spec §6.3), whose
// named actions become the table's effects. Pure: no clock, no I/O.
//
// Plain mode — the rule. A `plain` executable never links the application library, so it never
// opens the pipes FsmAgentProc's Process-connect / Process-disconnect are about (spec §6.3, §7
// items 1 and 6). For such a process the agent takes:
//   - a successful exec (os.spawned) as the connect: os.connected is fed right after it, so the
//     process is Running and spawnSucceeded is reported as soon as it exists;
//   - an exit with code 0 and no signal as the clean disconnect: os.disconnected is fed just
//     before that os.exited, so classifyExit says terminatedNormally. Any other exit (non-zero
//     code, any signal) stays abnormal, exactly as classifyExit rules for a linked process.
// The mapping message (spec §7 item 2) of a plain process cannot travel over pipes it never
// opens, so it is delivered in its environment at exec: TRINE_TASK, TRINE_VPID, TRINE_SIZE and
// TRINE_RANK (cluster-signals.ts spawnPlace), TRINE_RESTARTED (0/1) and TRINE_ENDPOINTS (JSON of [{vpid, node}]). The machine's
// `sendMapping` action is therefore already satisfied when it fires. The connect timeout cannot
// fire for a plain process once it exists (it leaves Spawning at os.spawned); it still bounds a
// fork/exec that never answers.
//
// Idempotence: commands arrive exactly once and in order from the agent core, but the group may
// legitimately send a key again (a restart). Only an absent key may be spawned; a live entry —
// spawning, running, terminating or adopted — is never replaced, so the same proc.spawn twice
// never starts two processes. Dead entries are removed as soon as they report, so "dead" and
// "absent" are the same.
import { MAX_AGENT_PROCS } from './constants.ts';
import { assert, unreachable } from '../base/result.ts';
import type { ProcSpawn } from './wire/messages.ts';
import {
  fsmAgentProc, type AgentProcReport, type FsmAgentProcContext, type FsmAgentProcEvent, type KillProcessParams,
  type SpawnCommand, type SpawnProcessParams,
} from '../../fsm/fsm-agent-proc.ts';
import { initialStep, step, type MachineAction } from '../../fsm/plain-data.ts';
import {
  contextOf, keyOf, logEffect, sendReport, stateOf, TERMINATE_KILL_GRACE_TICKS,
  type AgentProcs, type AgentProcsEffect, type ChildEntry, type ProcOsEvent,
} from './agent-procs-state.ts';

/** The mapping message in environment form (spec §7 item 2, see the header). It wins over a
 *  task's own variable of the same name: the process must be able to trust it. */
export function mappingEnv(cmd: ProcSpawn): Record<string, string> {
  return {
    TRINE_TASK: cmd.task,
    TRINE_VPID: String(cmd.vpid),
    TRINE_SIZE: String(cmd.size),
    TRINE_RANK: String(cmd.rank),
    TRINE_RESTARTED: cmd.restarted ? '1' : '0',
    TRINE_ENDPOINTS: JSON.stringify(cmd.endpoints.map((e) => ({ vpid: e.vpid, node: e.node }))),
  };
}

function spawnCommand(cmd: ProcSpawn): SpawnCommand {
  const env: Record<string, string> = {};
  for (const [name, value] of cmd.env) env[name] = value;
  Object.assign(env, mappingEnv(cmd));
  return {
    taskId: cmd.task, file: cmd.file, args: [...cmd.args], cwd: cmd.cwd, env,
    taskSize: cmd.size, restarted: cmd.restarted, endpoints: cmd.endpoints.map((e) => ({ vpid: e.vpid, node: e.node })),
  };
}

/** FsmAgentProc's report (plus what its context recorded) as the wire's ProcReport. */
function sendWireReport(s: AgentProcs, out: AgentProcsEffect[], entry: ChildEntry, r: AgentProcReport, ctx: FsmAgentProcContext): void {
  const { task } = entry.ref;
  const { endpoint } = entry;
  const pid = ctx.pid ?? 0;
  switch (r.kind) {
    case 'spawnSucceeded':
      return sendReport(s, out, task, r.vpid, 'spawnSucceeded', r.pid, null, null, 'running', endpoint);
    case 'spawnFailed':
      return sendReport(s, out, task, r.vpid, 'spawnFailed', pid, ctx.exitCode, ctx.signal, r.reason);
    case 'terminatedNormally':
      return sendReport(s, out, task, r.vpid, 'terminatedNormally', pid, r.exitCode, null, `exited with code ${r.exitCode}`);
    case 'terminatedAbnormally':
      // A rollback rank that finalized had closed its log and channels with every message of
      // its taken and logged (PROTOCOL §11.3): killed now, it has still finished, and a
      // replacement would re-execute towards peers that may have left. Its rank ends here.
      if (entry.rollback && entry.finalized && r.signal !== null) {
        out.push(logEffect('warn', 'proc.killed-after-finalize', { task, vpid: r.vpid, signal: r.signal }));
        return sendReport(s, out, task, r.vpid, 'terminatedNormally', pid, null, r.signal, `killed by ${r.signal} after it finalized: its rank had finished (PROTOCOL §11.3)`);
      }
      return sendReport(s, out, task, r.vpid, 'terminatedAbnormally', pid, r.exitCode, r.signal, r.reason);
    default:
      return unreachable(r);
  }
}

/** Advances a child's machine and executes its named actions as effects. */
export function advanceChild(s: AgentProcs, entry: ChildEntry, event: FsmAgentProcEvent, out: AgentProcsEffect[]): void {
  const result = step(fsmAgentProc, entry.data, event);
  entry.data = result.data;
  runActions(s, entry, result.actions, out);
}

function runActions(s: AgentProcs, entry: ChildEntry, actions: MachineAction[], out: AgentProcsEffect[]): void {
  const { task, vpid } = entry.ref;
  const ctx = contextOf(entry.data);
  for (const action of actions) {
    switch (action.type) {
      case 'spawnProcess':
        out.push({ type: 'spawn', ref: { ...entry.ref }, spec: action.params as SpawnProcessParams, linked: entry.linked, taskKey: entry.taskKey });
        break;
      case 'killProcess': {
        const p = action.params as KillProcessParams;
        if (p.pid === null) {
          // The exec has not answered yet: kill as soon as os.spawned gives us the pid.
          entry.pendingKill = p.signal;
        } else {
          out.push({ type: 'kill', task, vpid, pid: p.pid, signal: p.signal, child: true });
        }
        break;
      }
      case 'sendMapping':
        // Plain mode: the mapping went in the environment at exec (see the header).
        break;
      case 'destroyPipes':
        // Plain mode opens no pipes; the application library's (issue 4) are closed here.
        break;
      case 'report':
        sendWireReport(s, out, entry, action.params as AgentProcReport, ctx);
        break;
      default:
        assert(false, `FsmAgentProc asked for an unknown action ${action.type}`);
    }
  }
  if (stateOf(entry.data) === 'dead') s.entries.delete(keyOf(task, vpid));
}

/** `proc.spawn`: a new child for an absent key (see the header on idempotence). */
export function spawnChild(s: AgentProcs, cmd: ProcSpawn, out: AgentProcsEffect[]): void {
  const key = keyOf(cmd.task, cmd.vpid);
  const existing = s.entries.get(key);
  if (existing !== undefined) {
    out.push(logEffect('info', 'proc.spawn.duplicate', { task: cmd.task, vpid: cmd.vpid, state: existing.kind === 'adopted' ? 'adopted' : stateOf(existing.data) }));
    return;
  }
  if (s.recovered.some((r) => r.task === cmd.task && r.vpid === cmd.vpid)) {
    // The previous incarnation may still run it; procs.adopt (sent before any spawn to a new
    // incarnation) decides. Never two processes for one VPID.
    out.push(logEffect('warn', 'proc.spawn.before-adopt', { task: cmd.task, vpid: cmd.vpid }));
    return;
  }
  if (s.entries.size >= MAX_AGENT_PROCS) {
    sendReport(s, out, cmd.task, cmd.vpid, 'spawnFailed', 0, null, null, `agent process table full (${MAX_AGENT_PROCS} processes)`);
    return;
  }
  s.serial += 1;
  const init = initialStep(fsmAgentProc, { vpid: cmd.vpid, connectTimeoutTicks: s.connectTimeoutTicks });
  const entry: ChildEntry = {
    kind: 'child', ref: { task: cmd.task, vpid: cmd.vpid, serial: s.serial }, data: init.data, pendingKill: null,
    linked: cmd.mode === 'linked', taskKey: cmd.taskKey, endpoint: '', finalized: false, rollback: false, terminatingTicks: 0,
  };
  s.entries.set(key, entry);
  runActions(s, entry, init.actions, out);
  advanceChild(s, entry, { type: 'cm.spawn', command: spawnCommand(cmd) }, out);
}

/** What the OS said about a child (plain mode synthesises its connect and clean disconnect). */
export function onChildEvent(s: AgentProcs, entry: ChildEntry, event: ProcOsEvent, out: AgentProcsEffect[]): void {
  switch (event.type) {
    case 'os.spawned': {
      advanceChild(s, entry, event, out);
      const pid = contextOf(entry.data).pid;
      if (entry.pendingKill !== null && pid !== null) {
        out.push({ type: 'kill', task: entry.ref.task, vpid: entry.ref.vpid, pid, signal: entry.pendingKill, child: true });
        entry.pendingKill = null;
      }
      // Plain: the exec is the connect (header). Linked: the library's hello is.
      if (!entry.linked && stateOf(entry.data) === 'spawning') advanceChild(s, entry, { type: 'os.connected' }, out);
      return;
    }
    case 'os.exited': {
      const state = stateOf(entry.data);
      // Plain: exit code 0 without a signal is the clean disconnect (header).
      if (!entry.linked && (state === 'running' || state === 'terminating') && event.code === 0 && event.signal === null) {
        advanceChild(s, entry, { type: 'os.disconnected' }, out);
      }
      advanceChild(s, entry, event, out);
      return;
    }
    case 'os.forkFailed':
    case 'os.connected':
    case 'os.disconnected':
      advanceChild(s, entry, event, out);
      return;
    default:
      unreachable(event);
  }
}

/** One task tick of a child: only Spawning counts machine ticks (its connect timeout);
 *  Terminating counts its SIGKILL grace here. */
export function tickChild(s: AgentProcs, entry: ChildEntry, out: AgentProcsEffect[]): void {
  if (stateOf(entry.data) === 'spawning') advanceChild(s, entry, { type: 'clock.tick' }, out);
  if (stateOf(entry.data) === 'terminating' && ++entry.terminatingTicks === TERMINATE_KILL_GRACE_TICKS) {
    advanceChild(s, entry, { type: 'cm.terminate' }, out); // A18: SIGKILL
  }
}
