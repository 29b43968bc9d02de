// The agent's table of task processes on its node (spec §1.4 Agent, §6.3 FsmAgentProc, §7;
// issue 3 item 2). It owns one FsmAgentProc per (task, vpid), turns the group's commands
// (`proc.spawn`, `proc.terminate`, `procs.adopt`), the OS events the driver observes and ticks
// into effects for the driver: spawn, kill, a `proc.report` to send to the group, the set of
// live processes to record, and log lines. Pure (STYLE.md 1): no clock, no I/O; the driver
// (src/daemon/agent.ts) executes the effects.
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
// opens, so it is delivered in its environment at exec: TRINE_TASK, TRINE_VPID, TRINE_SIZE,
// TRINE_RESTARTED (0/1) and TRINE_ENDPOINTS (JSON of [{vpid, node}]). The machine's
// `sendMapping` action is therefore already satisfied when it fires. The connect timeout cannot
// fire for a plain process once it exists (it leaves Spawning at os.spawned); it still bounds a
// fork/exec that never answers.
//
// Linked mode (PROTOCOL §9.4). A `linked` process links the application library, which
// connects to the agent's Unix socket and says hello with its task, VPID and the secret token
// the driver put in its environment. The driver authenticates the token and calls
// `appConnected`: that is FsmAgentProc's Process-connect (A3), and the spawnSucceeded report
// carries the endpoint the process announced. `appFinalized` is Process-disconnect (A13/A16).
// A connection that closes without finalize while the process lives means the library is gone:
// the process is killed (SIGKILL), so its end is reported abnormal and promptly. The mapping
// message travels as the group's `proc.mapping` command once every member has connected (the
// machine's own `sendMapping` at connect has no endpoints to send yet); `proc.signal` commands
// are delivered to the named processes' connections in the order they arrive.
//
// Idempotence: commands arrive exactly once and in order from the agent core, but the group may
// legitimately send a key again (a restart). Only an absent key may be spawned; a live entry —
// spawning, running, terminating or adopted — is never replaced, so the same proc.spawn twice
// never starts two processes. Dead entries are removed as soon as they report, so "dead" and
// "absent" are the same. A terminate for an absent key reports nothing (FsmProc already has, or
// will get, the death report) and is logged.
//
// Adoption (PROTOCOL §8.6): a new agent incarnation reads the previous one's record of the
// processes it started (`recovered`), and the group's `procs.adopt` says which processes it
// believes run here. The driver checks each recovered record's liveness (pid present AND its
// start time unchanged, against pid reuse) and hands it in with the command. For each adopt
// entry: a live local record is adopted (monitored; if the group's pid is 0 it never heard of
// the spawn's success, so spawnSucceeded is reported with the real pid); otherwise the process
// is reported dead — pid 0: spawnFailed "agent restarted while spawning", else
// terminatedAbnormally "exited while its agent was down (exit status unknown)". A live local
// record the group does not list is an orphan and is killed with SIGKILL.
//
// Adopted processes are not our children: no exit status ever reaches us. The driver polls their
// liveness every tick and feeds os.exited (code and signal unknown) when one is gone; its end is
// always reported terminatedAbnormally with a null exit code — also when it was terminated on
// command, since nothing proves it ended cleanly (a plain process ends normally only with exit
// code 0 and no signal, which we cannot observe); the reason says which case it was.
import { MAX_AGENT_PROCS, MAX_TEXT_CHARS } from './constants.ts';
import { assert, unreachable } from '../base/result.ts';
import { clipText } from './wire/schema.ts';
import type { LogLevel } from './node.ts';
import type { AgentToProc } from './wire/app-wire.ts';
import type { AdoptEntry, AgentRequest, GroupCommand, ProcMapping, ProcReport, ProcSignal, ProcSpawn } from './wire/messages.ts';
import {
  fsmAgentProc, type AgentProcReport, type FsmAgentProcContext, type FsmAgentProcEvent, type KillProcessParams,
  type SpawnCommand, type SpawnProcessParams,
} from '../../fsm/fsm-agent-proc.ts';
import { initialStep, step, type MachineAction, type MachineData } from '../../fsm/plain-data.ts';


/** Ticks between the SIGTERM and the SIGKILL of an adopted process under terminate (10 × 50 ms:
 *  time for a clean shutdown, well within one Terminate-TO). */
export const ADOPTED_KILL_GRACE_TICKS = 10;
/** The same grace for a child under terminate: a process that ignores SIGTERM, or cannot take
 *  it (stopped, hung in a handler), gets SIGKILL after it, without waiting for the manager to
 *  re-send Terminate — an application's KILL request (FsmTask Killing) sends Terminate once. */
export const TERMINATE_KILL_GRACE_TICKS = ADOPTED_KILL_GRACE_TICKS;

export const RESTARTED_WHILE_SPAWNING = 'agent restarted while spawning';
export const EXITED_WHILE_DOWN = 'exited while its agent was down (exit status unknown)';
export const ADOPTED_EXIT = 'exit status unknown (adopted after an agent restart)';
export const ADOPTED_EXIT_TERMINATED = 'exit status unknown (adopted after an agent restart; terminated on command)';
export const LINKED_ORPHANED = 'killed after an agent restart: a linked process cannot reconnect to the new agent';

/** One process this agent started, as recorded in its procs file (without the start time,
 *  which only the driver can read). */
export type ProcRecord = { task: string; vpid: number; pid: number };
/** A recovered record with the liveness the driver found (pid exists, start time matches). */
export type LocalProc = ProcRecord & { alive: boolean };

/** Which spawn an OS event belongs to: `serial` grows with every entry, so an event from an
 *  earlier process of the same key can never be taken for the current one's. */
export type ProcRef = { task: string; vpid: number; serial: number };

/** What the driver observes about one process. `os.connected` / `os.disconnected` come from the
 *  application library's pipes (issue 4); plain processes get them synthesised here. */
export type ProcOsEvent = Extract<
  FsmAgentProcEvent,
  { type: 'os.spawned' | 'os.forkFailed' | 'os.exited' | 'os.connected' | 'os.disconnected' }
>;

export type AgentProcsEffect =
  /** Start a process: FsmAgentProc's spawnProcess with the mapping in its environment.
   *  `taskKey`: the task's G-MPI key, which the driver hands a linked process in its socket's
   *  welcome (PROTOCOL §9.5) — not part of `spec`, so never in the environment or a log line. */
  | { type: 'spawn'; ref: ProcRef; spec: SpawnProcessParams; linked: boolean; taskKey: Uint8Array }
  /** Signal the process group of `pid`. `child` is false for a process this incarnation did not
   *  start (adopted, orphan): its pid could have been reused, so the driver re-checks the start
   *  time before signalling; a child's pid cannot be reused before we reap it. */
  | { type: 'kill'; task: string; vpid: number; pid: number; signal: KillProcessParams['signal']; child: boolean }
  /** Send this report to the group as a `proc.report` request. */
  | { type: 'report'; report: ProcReport }
  /** Send this request to the group (a linked process's signal, PROTOCOL §9). */
  | { type: 'request'; request: Extract<AgentRequest, { type: 'sig.request' }> }
  /** Write this message to the process's connection (PROTOCOL §9.4). */
  | { type: 'deliver'; task: string; vpid: number; message: AgentToProc }
  /** The live processes changed: the driver rewrites its procs file with these. */
  | { type: 'records'; procs: ProcRecord[] }
  | { type: 'log'; level: LogLevel; event: string; fields: Record<string, unknown> };

type ChildEntry = {
  kind: 'child';
  ref: ProcRef;
  data: MachineData;
  /** A kill the machine asked for before the pid was known (A7/A8 before os.spawned). */
  pendingKill: KillProcessParams['signal'] | null;
  linked: boolean;
  /** The task's key (ProcSpawn.taskKey), for the spawn effect. */
  taskKey: Uint8Array;
  /** What the linked process announced at connect ("host:port"); empty before, or plain. */
  endpoint: string;
  /** Its connection said finalize (Process-disconnect). */
  finalized: boolean;
  /** Ticks spent in Terminating (TERMINATE_KILL_GRACE_TICKS). */
  terminatingTicks: number;
};
type AdoptedEntry = {
  kind: 'adopted';
  ref: ProcRef;
  pid: number;
  /** Terminates received: the first sends SIGTERM, any later one SIGKILL (as A15/A18). */
  terminates: number;
  /** Ticks left before a SIGTERM'd adopted process gets SIGKILL anyway; null when none is due. */
  killInTicks: number | null;
  /** Why its end is reported, when this agent itself killed it on adoption. */
  endReason: string | null;
};
type Entry = ChildEntry | AdoptedEntry;

export type AgentProcsOptions = {
  /** FsmAgentProc's connect timeout in ticks (DEFAULT_TIMING.connectTimeoutMs / taskTickMs). */
  connectTimeoutTicks: number;
  /** The previous incarnation's records (procs file), held until `procs.adopt` decides. */
  recovered?: readonly ProcRecord[];
};

export type AgentProcs = {
  /** A group command delivered on 2 matching copies. `local` is the liveness of `recovered()`,
   *  read by the driver; only `procs.adopt` uses it. */
  command(command: GroupCommand, local?: readonly LocalProc[]): AgentProcsEffect[];
  /** Something the OS said about the process `ref`. */
  os(ref: ProcRef, event: ProcOsEvent): AgentProcsEffect[];
  /** One task tick (taskTickMs): the connect timeouts. */
  tick(): AgentProcsEffect[];
  /** A linked process proved its identity on the agent's socket (Process-connect). `ok` false:
   *  refuse the connection (no such spawning linked process). */
  appConnected(task: string, vpid: number, endpoint: string): { ok: boolean; effects: AgentProcsEffect[] };
  /** Its connection said finalize (Process-disconnect). */
  appFinalized(task: string, vpid: number): AgentProcsEffect[];
  /** Its connection closed; `clean` when finalize came first. */
  appClosed(task: string, vpid: number, clean: boolean): AgentProcsEffect[];
  /** A signal from the process, to be sent to the group. */
  appSignal(task: string, vpid: number, req: { signum: number; dest: number; arg: number; epoch: number }): AgentProcsEffect[];
  /** Records of the previous incarnation not yet settled by `procs.adopt`. */
  recovered(): ProcRecord[];
  /** Adopted processes, whose liveness the driver polls (they are not its children). */
  adopted(): { ref: ProcRef; pid: number }[];
  /** Every process believed alive: what the procs file must hold. */
  records(): ProcRecord[];
  /** Live entries (for tests and status). */
  size(): number;
};

const keyOf = (task: string, vpid: number): string => `${task}/${vpid}`;

const clip = (s: string): string => clipText(s, MAX_TEXT_CHARS);

/** The mapping message in environment form (spec §7 item 2, see the header). It wins over a
 *  task's own variable of the same name: the process must be able to trust it. */
export function mappingEnv(cmd: ProcSpawn): Record<string, string> {
  return {
    TRINE_TASK: cmd.task,
    TRINE_VPID: String(cmd.vpid),
    TRINE_SIZE: String(cmd.size),
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

const stateOf = (data: MachineData): string => String(data.value);
const contextOf = (data: MachineData): FsmAgentProcContext => data.context as FsmAgentProcContext;

function report(
  task: string, vpid: number, kind: ProcReport['kind'], pid: number, exitCode: number | null, signal: string | null, reason: string, endpoint = '',
): AgentProcsEffect {
  return { type: 'report', report: { task, vpid, kind, pid, exitCode, signal, reason: clip(reason), endpoint } };
}

/** FsmAgentProc's report (plus what its context recorded) as the wire's ProcReport. */
function wireReport(task: string, r: AgentProcReport, ctx: FsmAgentProcContext, endpoint: string): AgentProcsEffect {
  const pid = ctx.pid ?? 0;
  switch (r.kind) {
    case 'spawnSucceeded':
      return report(task, r.vpid, 'spawnSucceeded', r.pid, null, null, 'running', endpoint);
    case 'spawnFailed':
      return report(task, r.vpid, 'spawnFailed', pid, ctx.exitCode, ctx.signal, r.reason);
    case 'terminatedNormally':
      return report(task, r.vpid, 'terminatedNormally', pid, r.exitCode, null, `exited with code ${r.exitCode}`);
    case 'terminatedAbnormally':
      return report(task, r.vpid, 'terminatedAbnormally', pid, r.exitCode, r.signal, r.reason);
    default:
      return unreachable(r);
  }
}

export function createAgentProcs(opts: AgentProcsOptions): AgentProcs {
  assert(Number.isSafeInteger(opts.connectTimeoutTicks) && opts.connectTimeoutTicks >= 1, 'connectTimeoutTicks must be a positive integer');
  const entries = new Map<string, Entry>();
  let recovered: ProcRecord[] = (opts.recovered ?? []).map((r) => ({ task: r.task, vpid: r.vpid, pid: r.pid }));
  let adoptDone = false;
  let serial = 0;
  /** The last `records` effect, so one is emitted only when the set changes. */
  let lastRecords = '';

  const log = (level: LogLevel, event: string, fields: Record<string, unknown>): AgentProcsEffect => ({ type: 'log', level, event, fields });

  function records(): ProcRecord[] {
    const out: ProcRecord[] = [...recovered];
    for (const e of entries.values()) {
      const pid = e.kind === 'adopted' ? e.pid : contextOf(e.data).pid;
      if (pid !== null) out.push({ task: e.ref.task, vpid: e.ref.vpid, pid });
    }
    return out.sort((a, b) => (a.task < b.task ? -1 : a.task > b.task ? 1 : a.vpid - b.vpid));
  }

  /** Appends a `records` effect if the live set changed since the last one. */
  function noteRecords(out: AgentProcsEffect[]): AgentProcsEffect[] {
    const procs = records();
    const text = JSON.stringify(procs);
    if (text !== lastRecords) {
      lastRecords = text;
      out.push({ type: 'records', procs });
    }
    return out;
  }

  /** Advances a child's machine and executes its named actions as effects. */
  function advance(entry: ChildEntry, event: FsmAgentProcEvent, out: AgentProcsEffect[]): void {
    const result = step(fsmAgentProc, entry.data, event);
    entry.data = result.data;
    runActions(entry, result.actions, out);
  }

  function runActions(entry: ChildEntry, actions: MachineAction[], out: AgentProcsEffect[]): void {
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
          out.push(wireReport(task, action.params as AgentProcReport, ctx, entry.endpoint));
          break;
        default:
          assert(false, `FsmAgentProc asked for an unknown action ${action.type}`);
      }
    }
    if (stateOf(entry.data) === 'dead') entries.delete(keyOf(task, vpid));
  }

  function onSpawn(cmd: ProcSpawn, out: AgentProcsEffect[]): void {
    const key = keyOf(cmd.task, cmd.vpid);
    const existing = entries.get(key);
    if (existing !== undefined) {
      out.push(log('info', 'proc.spawn.duplicate', { task: cmd.task, vpid: cmd.vpid, state: existing.kind === 'adopted' ? 'adopted' : stateOf(existing.data) }));
      return;
    }
    if (recovered.some((r) => r.task === cmd.task && r.vpid === cmd.vpid)) {
      // The previous incarnation may still run it; procs.adopt (sent before any spawn to a new
      // incarnation) decides. Never two processes for one VPID.
      out.push(log('warn', 'proc.spawn.before-adopt', { task: cmd.task, vpid: cmd.vpid }));
      return;
    }
    if (entries.size >= MAX_AGENT_PROCS) {
      out.push(report(cmd.task, cmd.vpid, 'spawnFailed', 0, null, null, `agent process table full (${MAX_AGENT_PROCS} processes)`));
      return;
    }
    serial += 1;
    const init = initialStep(fsmAgentProc, { vpid: cmd.vpid, connectTimeoutTicks: opts.connectTimeoutTicks });
    const entry: ChildEntry = {
      kind: 'child', ref: { task: cmd.task, vpid: cmd.vpid, serial }, data: init.data, pendingKill: null,
      linked: cmd.mode === 'linked', taskKey: cmd.taskKey, endpoint: '', finalized: false, terminatingTicks: 0,
    };
    entries.set(key, entry);
    runActions(entry, init.actions, out);
    advance(entry, { type: 'cm.spawn', command: spawnCommand(cmd) }, out);
  }

  function onTerminate(task: string, vpid: number, out: AgentProcsEffect[]): void {
    const entry = entries.get(keyOf(task, vpid));
    if (entry === undefined) {
      out.push(log('info', 'proc.terminate.unknown', { task, vpid }));
      return;
    }
    if (entry.kind === 'child') {
      advance(entry, { type: 'cm.terminate' }, out);
      return;
    }
    entry.terminates += 1;
    const signal = entry.terminates === 1 ? 'SIGTERM' : 'SIGKILL';
    // The group may have sent its terminates to the dead predecessor already, so the escalation
    // cannot wait for the next one (it may be the last, T17): SIGKILL follows by itself.
    entry.killInTicks = signal === 'SIGTERM' ? ADOPTED_KILL_GRACE_TICKS : null;
    out.push({ type: 'kill', task, vpid, pid: entry.pid, signal, child: false });
  }

  function onAdopt(list: readonly AdoptEntry[], local: readonly LocalProc[], out: AgentProcsEffect[]): void {
    if (adoptDone) {
      // One per incarnation (sent at node.join); a second one would re-judge settled processes.
      out.push(log('warn', 'procs.adopt.again', { count: list.length }));
      return;
    }
    adoptDone = true;
    const alive = new Map<string, LocalProc>();
    for (const l of local) if (l.alive) alive.set(keyOf(l.task, l.vpid), l);
    const listed = new Set<string>();
    for (const a of list) {
      const key = keyOf(a.task, a.vpid);
      if (listed.has(key)) continue;
      listed.add(key);
      if (entries.has(key)) {
        out.push(log('warn', 'procs.adopt.known', { task: a.task, vpid: a.vpid }));
        continue;
      }
      const mine = alive.get(key);
      if (mine !== undefined && a.linked) {
        // Its library's connection died with the old agent and cannot be re-established: a
        // member that can neither hear nor send signals would stall its task's group requests.
        // Killed now, its end is reported by the liveness poll, and the task is told.
        serial += 1;
        entries.set(key, {
          kind: 'adopted', ref: { task: a.task, vpid: a.vpid, serial }, pid: mine.pid, terminates: 2, killInTicks: null, endReason: LINKED_ORPHANED,
        });
        out.push(log('warn', 'proc.adopted.linked-killed', { task: a.task, vpid: a.vpid, pid: mine.pid }));
        out.push({ type: 'kill', task: a.task, vpid: a.vpid, pid: mine.pid, signal: 'SIGKILL', child: false });
        if (a.pid === 0) out.push(report(a.task, a.vpid, 'spawnSucceeded', mine.pid, null, null, 'running (adopted after an agent restart)'));
      } else if (mine !== undefined) {
        serial += 1;
        entries.set(key, { kind: 'adopted', ref: { task: a.task, vpid: a.vpid, serial }, pid: mine.pid, terminates: 0, killInTicks: null, endReason: null });
        out.push(log('info', 'proc.adopted', { task: a.task, vpid: a.vpid, pid: mine.pid, groupPid: a.pid }));
        if (a.pid === 0) out.push(report(a.task, a.vpid, 'spawnSucceeded', mine.pid, null, null, 'running (adopted after an agent restart)'));
        else if (a.pid !== mine.pid) out.push(log('warn', 'proc.adopted.pid-differs', { task: a.task, vpid: a.vpid, pid: mine.pid, groupPid: a.pid }));
      } else if (a.pid === 0) {
        out.push(report(a.task, a.vpid, 'spawnFailed', 0, null, null, RESTARTED_WHILE_SPAWNING));
      } else {
        out.push(report(a.task, a.vpid, 'terminatedAbnormally', a.pid, null, null, EXITED_WHILE_DOWN));
      }
    }
    for (const [key, l] of alive) {
      if (listed.has(key)) continue;
      out.push(log('warn', 'proc.orphan', { task: l.task, vpid: l.vpid, pid: l.pid }));
      out.push({ type: 'kill', task: l.task, vpid: l.vpid, pid: l.pid, signal: 'SIGKILL', child: false });
    }
    recovered = [];
  }

  function onAdoptedEvent(entry: AdoptedEntry, event: ProcOsEvent, out: AgentProcsEffect[]): void {
    if (event.type !== 'os.exited') return; // only its end is observable
    entries.delete(keyOf(entry.ref.task, entry.ref.vpid));
    const reason = entry.endReason ?? (entry.terminates > 0 ? ADOPTED_EXIT_TERMINATED : ADOPTED_EXIT);
    out.push(report(entry.ref.task, entry.ref.vpid, 'terminatedAbnormally', entry.pid, null, null, reason));
  }

  function onChildEvent(entry: ChildEntry, event: ProcOsEvent, out: AgentProcsEffect[]): void {
    switch (event.type) {
      case 'os.spawned': {
        advance(entry, event, out);
        const pid = contextOf(entry.data).pid;
        if (entry.pendingKill !== null && pid !== null) {
          out.push({ type: 'kill', task: entry.ref.task, vpid: entry.ref.vpid, pid, signal: entry.pendingKill, child: true });
          entry.pendingKill = null;
        }
        // Plain: the exec is the connect (header). Linked: the library's hello is.
        if (!entry.linked && stateOf(entry.data) === 'spawning') advance(entry, { type: 'os.connected' }, out);
        return;
      }
      case 'os.exited': {
        const state = stateOf(entry.data);
        // Plain: exit code 0 without a signal is the clean disconnect (header).
        if (!entry.linked && (state === 'running' || state === 'terminating') && event.code === 0 && event.signal === null) {
          advance(entry, { type: 'os.disconnected' }, out);
        }
        advance(entry, event, out);
        return;
      }
      case 'os.forkFailed':
      case 'os.connected':
      case 'os.disconnected':
        advance(entry, event, out);
        return;
      default:
        unreachable(event);
    }
  }

  /** A connected linked child of `task`/`vpid`, or null. */
  function linkedRunning(task: string, vpid: number): ChildEntry | null {
    const e = entries.get(keyOf(task, vpid));
    if (e === undefined || e.kind !== 'child' || !e.linked) return null;
    const state = stateOf(e.data);
    return state === 'running' || state === 'terminating' ? e : null;
  }

  function onSignal(cmd: ProcSignal, out: AgentProcsEffect[]): void {
    for (const vpid of cmd.vpids) {
      if (linkedRunning(cmd.task, vpid) === null) {
        out.push(log('debug', 'proc.signal.undeliverable', { task: cmd.task, vpid, signum: cmd.signum }));
        continue;
      }
      out.push({
        type: 'deliver', task: cmd.task, vpid,
        message: { type: 'signal', signum: cmd.signum, src: cmd.src, dest: cmd.dest, arg: cmd.arg, epoch: cmd.epoch, node: cmd.node, data: cmd.data },
      });
    }
  }

  function onMapping(cmd: ProcMapping, out: AgentProcsEffect[]): void {
    for (const vpid of cmd.vpids) {
      if (linkedRunning(cmd.task, vpid) === null) {
        out.push(log('debug', 'proc.mapping.undeliverable', { task: cmd.task, vpid }));
        continue;
      }
      out.push({
        type: 'deliver', task: cmd.task, vpid,
        message: {
          type: 'mapping', task: cmd.task, vpid, size: cmd.members.length, restarted: cmd.restarted, recovered: cmd.recovered,
          epoch: cmd.epoch, quorum: cmd.quorum, members: cmd.members.map((m) => ({ ...m })),
        },
      });
    }
  }

  return {
    appConnected(task, vpid, endpoint) {
      const out: AgentProcsEffect[] = [];
      const e = entries.get(keyOf(task, vpid));
      if (e === undefined || e.kind !== 'child' || !e.linked || stateOf(e.data) !== 'spawning' || contextOf(e.data).pid === null) {
        out.push(log('warn', 'app.connect.refused', { task, vpid }));
        return { ok: false, effects: out };
      }
      e.endpoint = endpoint;
      advance(e, { type: 'os.connected' }, out);
      return { ok: true, effects: noteRecords(out) };
    },

    appFinalized(task, vpid) {
      const out: AgentProcsEffect[] = [];
      const e = linkedRunning(task, vpid);
      if (e === null) return out;
      e.finalized = true;
      advance(e, { type: 'os.disconnected' }, out);
      return noteRecords(out);
    },

    appClosed(task, vpid, clean) {
      const out: AgentProcsEffect[] = [];
      const e = linkedRunning(task, vpid);
      if (e === null || clean || e.finalized) return out;
      // The library vanished while its process runs on (see the header): a crash.
      const pid = contextOf(e.data).pid;
      out.push(log('warn', 'app.connection.lost', { task, vpid, pid }));
      if (pid !== null) out.push({ type: 'kill', task, vpid, pid, signal: 'SIGKILL', child: true });
      return out;
    },

    appSignal(task, vpid, req) {
      if (linkedRunning(task, vpid) === null) return [log('warn', 'app.signal.unconnected', { task, vpid, signum: req.signum })];
      return [{ type: 'request', request: { type: 'sig.request', task, vpid, signum: req.signum, dest: req.dest, arg: req.arg, epoch: req.epoch } }];
    },

    command(command, local = []) {
      const out: AgentProcsEffect[] = [];
      switch (command.type) {
        case 'proc.spawn':
          onSpawn(command, out);
          break;
        case 'proc.terminate':
          onTerminate(command.task, command.vpid, out);
          break;
        case 'procs.adopt':
          onAdopt(command.procs, local, out);
          break;
        case 'proc.signal':
          onSignal(command, out);
          break;
        case 'proc.mapping':
          onMapping(command, out);
          break;
        case 'node.shutdown':
          // PROTOCOL §10.11: every process on this node ends. The driver repeats the command
          // after a grace, and a repeated terminate is a SIGKILL.
          for (const e of [...entries.values()]) onTerminate(e.ref.task, e.ref.vpid, out);
          break;
        case 'echo.reply':
        case 'replicas':
        case 'replica.spawn':
        case 'replica.kill':
          break; // not about task processes (the agent core and its driver, PROTOCOL §10.7)
        default:
          unreachable(command);
      }
      return noteRecords(out);
    },

    os(ref, event) {
      const out: AgentProcsEffect[] = [];
      const entry = entries.get(keyOf(ref.task, ref.vpid));
      if (entry === undefined || entry.ref.serial !== ref.serial) {
        // A spawner reports each process's end exactly once, so this is an event for an entry
        // already settled (e.g. a kill racing a liveness poll): nothing to do.
        out.push(log('debug', 'proc.os.stale', { task: ref.task, vpid: ref.vpid, serial: ref.serial, event: event.type }));
        return out;
      }
      if (entry.kind === 'adopted') onAdoptedEvent(entry, event, out);
      else onChildEvent(entry, event, out);
      return noteRecords(out);
    },

    tick() {
      const out: AgentProcsEffect[] = [];
      // Only Spawning counts machine ticks (its connect timeout); Terminating counts its SIGKILL grace here.
      for (const entry of [...entries.values()]) {
        if (entry.kind === 'child' && stateOf(entry.data) === 'spawning') advance(entry, { type: 'clock.tick' }, out);
        if (entry.kind === 'child' && stateOf(entry.data) === 'terminating' && ++entry.terminatingTicks === TERMINATE_KILL_GRACE_TICKS) {
          advance(entry, { type: 'cm.terminate' }, out); // A18: SIGKILL
        }
        if (entry.kind === 'adopted' && entry.killInTicks !== null && --entry.killInTicks <= 0) {
          entry.killInTicks = null;
          out.push({ type: 'kill', task: entry.ref.task, vpid: entry.ref.vpid, pid: entry.pid, signal: 'SIGKILL', child: false });
        }
      }
      return noteRecords(out);
    },

    recovered: () => recovered.map((r) => ({ ...r })),
    adopted: () => [...entries.values()].flatMap((e) => (e.kind === 'adopted' ? [{ ref: { ...e.ref }, pid: e.pid }] : [])),
    records,
    size: () => entries.size,
  };
}
