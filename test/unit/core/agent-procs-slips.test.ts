// Agent process-table behaviours no other row pins down (issue 15, mutation testing of
// src/core/agent-procs.ts): each row is what the group (a proc.report, a sig.request), a task
// process (a spawn, a kill, a delivered signal or mapping) or the operator (a log line, the procs
// file) observes, chosen so that a slip in a bound, a condition or a field changes it
// (docs/PROTOCOL.md §8.5 processes on the agent, §8.6 agent restart, §9.3 the mapping message,
// §9.4 the local socket). test/unit/core/agent-procs.test.ts holds the main paths.
import { describe, expect, it } from 'vitest';
import { LINK_FIX } from '../../../fsm/fsm-agent-proc.ts';
import { drainOutbox } from '../../../src/core/agent-outbox.ts';
import { adoptedProcs, commandProcs, onProcOs, recoveredProcs, tickProcs } from '../../../src/core/agent-procs.ts';
import { ADOPTED_EXIT_TERMINATED, EXITED_WHILE_DOWN, LINKED_ORPHANED, RESTARTED_WHILE_SPAWNING } from '../../../src/core/agent-procs-adopt.ts';
import { closeApp, connectApp, finalizeApp, signalFromApp } from '../../../src/core/agent-procs-app.ts';
import {
  ADOPTED_KILL_GRACE_TICKS, createAgentProcs, procRecords, TERMINATE_KILL_GRACE_TICKS, type AgentProcs, type AgentProcsEffect, type ProcRef,
} from '../../../src/core/agent-procs-state.ts';
import { DEFAULT_TIMING, MAX_TEXT_CHARS } from '../../../src/core/constants.ts';
import type { GroupCommand, ProcReport, ProcSignal, ProcSpawn } from '../../../src/core/wire/messages.ts';
import { agentRequest } from '../../../src/core/wire/messages.ts';

const TICKS = 4;

const SPAWN: ProcSpawn = {
  type: 'proc.spawn',
  task: 't1',
  vpid: 0,
  mode: 'plain',
  file: '/usr/bin/app',
  args: ['--n', '1'],
  cwd: '/tmp',
  env: [['A', '1']],
  size: 2,
  rank: 0,
  restarted: false,
  endpoints: [{ vpid: 0, node: 'n1' }, { vpid: 1, node: 'n2' }],
  taskKey: new Uint8Array(32).fill(7),
};
const LINKED = { mode: 'linked' } as const;

const spawnCmd = (over: Partial<ProcSpawn> = {}): ProcSpawn => ({ ...SPAWN, ...over });
const terminate = (task = 't1', vpid = 0): GroupCommand => ({ type: 'proc.terminate', task, vpid });
const signalCmd = (vpids: number[], over: Partial<ProcSignal> = {}): ProcSignal => ({
  type: 'proc.signal', task: 't1', vpids, signum: 20, src: 1, dest: 0, arg: 0, epoch: 1, node: '', data: '', ...over,
});
const SIG = { signum: 100, dest: 1, arg: -5, epoch: 3 };

const of = <T extends AgentProcsEffect['type']>(effects: AgentProcsEffect[], type: T) =>
  effects.filter((e): e is Extract<AgentProcsEffect, { type: T }> => e.type === type);
const reports = (effects: AgentProcsEffect[]): ProcReport[] => of(effects, 'report').map((e) => e.report);
const kills = (effects: AgentProcsEffect[]) => of(effects, 'kill').map(({ pid, signal, child }) => ({ pid, signal, child }));
const events = (effects: AgentProcsEffect[]) => of(effects, 'log').map((l) => l.event);

const fresh = (): AgentProcs => createAgentProcs({ connectTimeoutTicks: TICKS });

/** Spawns `cmd` on `procs`; returns its ref. */
function spawn(procs: AgentProcs, cmd: ProcSpawn = SPAWN): ProcRef {
  const ref = of(commandProcs(procs, cmd), 'spawn')[0]?.ref;
  if (ref === undefined) throw new Error(`no spawn for ${cmd.task}/${cmd.vpid}`);
  return ref;
}

/** A plain process of `cmd` running with `pid`. */
function running(procs: AgentProcs, pid: number, cmd: ProcSpawn = SPAWN): ProcRef {
  const ref = spawn(procs, cmd);
  onProcOs(procs, ref, { type: 'os.spawned', pid });
  return ref;
}

/** A linked process of `cmd` connected (its library said hello) with `pid`. */
function connected(procs: AgentProcs, pid: number, cmd: ProcSpawn = spawnCmd(LINKED)): ProcRef {
  const ref = running(procs, pid, cmd);
  if (!connectApp(procs, cmd.task, cmd.vpid, `10.0.0.${cmd.vpid}:5000`).ok) throw new Error('hello refused');
  return ref;
}

/** An agent whose predecessor left t1/0 (pid 100) running, adopted by a procs.adopt. */
function adoptedOne(pid = 100) {
  const procs = createAgentProcs({ connectTimeoutTicks: TICKS, recovered: [{ task: 't1', vpid: 0, pid }] });
  const out = commandProcs(procs, { type: 'procs.adopt', procs: [{ task: 't1', vpid: 0, pid, linked: false }] }, [{ task: 't1', vpid: 0, pid, alive: true }]);
  const ref = adoptedProcs(procs)[0]?.ref;
  if (ref === undefined) throw new Error('nothing adopted');
  return { procs, out, ref };
}

describe('reports and the procs file (PROTOCOL §8.5)', () => {
  it('a reason of exactly MAX_TEXT_CHARS travels unchanged; one character more is clipped to MAX_TEXT_CHARS with an ellipsis', () => {
    const exact = 'e'.repeat(MAX_TEXT_CHARS);
    const a = fresh();
    expect(reports(onProcOs(a, spawn(a), { type: 'os.forkFailed', error: exact }))[0]?.reason).toBe(exact);
    const b = fresh();
    const over = reports(onProcOs(b, spawn(b), { type: 'os.forkFailed', error: `${exact}x` }))[0]?.reason;
    expect(over).toBe(`${'e'.repeat(MAX_TEXT_CHARS - 1)}…`);
  });

  it('a clipped reason never ends in half a surrogate pair: a path with an emoji at the cut still makes a report the wire encodes', () => {
    const a = fresh();
    const error = `${'e'.repeat(MAX_TEXT_CHARS - 2)}\u{1F600}tail`; // the emoji's halves at MAX_TEXT_CHARS - 2 and - 1
    const report = reports(onProcOs(a, spawn(a), { type: 'os.forkFailed', error }))[0] as ProcReport;
    expect(report.reason).toBe(`${'e'.repeat(MAX_TEXT_CHARS - 2)}…`);
    expect(() => agentRequest.enc({ type: 'proc.report', reports: [report] })).not.toThrow();
  });

  it('a linked process that exits before its hello is spawnFailed with its exit code or signal (PROTOCOL §9.4)', () => {
    const procs = fresh();
    const ref = running(procs, 700, spawnCmd(LINKED));
    expect(reports(onProcOs(procs, ref, { type: 'os.exited', code: 3, signal: null }))).toEqual([
      { task: 't1', vpid: 0, kind: 'spawnFailed', pid: 700, exitCode: 3, signal: null, reason: 'exited before connecting (code 3)', endpoint: '' },
    ]);
    const ref2 = running(procs, 701, spawnCmd({ ...LINKED, vpid: 1 }));
    expect(reports(onProcOs(procs, ref2, { type: 'os.exited', code: null, signal: 'SIGSEGV' }))).toEqual([
      { task: 't1', vpid: 1, kind: 'spawnFailed', pid: 701, exitCode: null, signal: 'SIGSEGV', reason: 'exited before connecting (signal SIGSEGV)', endpoint: '' },
    ]);
  });

  it('the procs file lists live processes sorted by task, then by vpid, whatever the spawn order', () => {
    const procs = fresh();
    running(procs, 13, spawnCmd({ task: 't1', vpid: 5 }));
    running(procs, 14, spawnCmd({ task: 't3', vpid: 0 }));
    running(procs, 12, spawnCmd({ task: 't2', vpid: 10 }));
    running(procs, 11, spawnCmd({ task: 't2', vpid: 2 }));
    const out = commandProcs(procs, spawnCmd({ task: 't2', vpid: 1 })); // no pid yet: not in the file
    expect(of(out, 'records')).toEqual([]);
    const expected = [{ task: 't1', vpid: 5, pid: 13 }, { task: 't2', vpid: 2, pid: 11 }, { task: 't2', vpid: 10, pid: 12 }, { task: 't3', vpid: 0, pid: 14 }];
    expect(procRecords(procs)).toEqual(expected);
  });

  it('a connect timeout of one tick is accepted (the first tick aborts); zero or a fraction is refused at construction', () => {
    const procs = createAgentProcs({ connectTimeoutTicks: 1 });
    const ref = running(procs, 900, spawnCmd(LINKED));
    expect(kills(tickProcs(procs))).toEqual([{ pid: 900, signal: 'SIGKILL', child: true }]);
    expect(reports(onProcOs(procs, ref, { type: 'os.exited', code: null, signal: 'SIGKILL' }))).toMatchObject([{ kind: 'spawnFailed', reason: `never linked: no connection to its agent within 1 ticks: ${LINK_FIX}` }]);
    expect(() => createAgentProcs({ connectTimeoutTicks: 0 })).toThrow();
    expect(() => createAgentProcs({ connectTimeoutTicks: 1.5 })).toThrow();
  });
});

describe('spawn (PROTOCOL §8.5, §8.6)', () => {
  it('a duplicate proc.spawn is logged with the state of the live entry: spawning, running or adopted', () => {
    const procs = fresh();
    const ref = spawn(procs);
    expect(of(commandProcs(procs, SPAWN), 'log').map((l) => l.fields)).toEqual([{ task: 't1', vpid: 0, state: 'spawning' }]);
    onProcOs(procs, ref, { type: 'os.spawned', pid: 5 });
    expect(of(commandProcs(procs, SPAWN), 'log').map((l) => l.fields)).toEqual([{ task: 't1', vpid: 0, state: 'running' }]);
    const { procs: after } = adoptedOne();
    expect(of(commandProcs(after, SPAWN), 'log').map((l) => l.fields)).toEqual([{ task: 't1', vpid: 0, state: 'adopted' }]);
  });

  it('before procs.adopt only the recorded key waits: another vpid of its task and another task spawn at once', () => {
    const procs = createAgentProcs({ connectTimeoutTicks: TICKS, recovered: [{ task: 't1', vpid: 0, pid: 100 }] });
    expect(of(commandProcs(procs, spawnCmd({ vpid: 1 })), 'spawn')).toHaveLength(1);
    expect(of(commandProcs(procs, spawnCmd({ task: 't2' })), 'spawn')).toHaveLength(1);
    const held = commandProcs(procs, SPAWN);
    expect(of(held, 'spawn')).toEqual([]);
    expect(of(held, 'log')).toEqual([{ type: 'log', level: 'warn', event: 'proc.spawn.before-adopt', fields: { task: 't1', vpid: 0 } }]);
  });
});

describe('terminate: the SIGKILL grace (PROTOCOL §9.4)', () => {
  it('the grace is 500 ms of task ticks', () => {
    expect(TERMINATE_KILL_GRACE_TICKS * DEFAULT_TIMING.taskTickMs).toBe(500);
    expect(ADOPTED_KILL_GRACE_TICKS * DEFAULT_TIMING.taskTickMs).toBe(500);
  });

  it('a child that ignores SIGTERM gets exactly one SIGKILL, on the grace tick: not before, never again', () => {
    const procs = fresh();
    running(procs, 800);
    expect(kills(commandProcs(procs, terminate()))).toEqual([{ pid: 800, signal: 'SIGTERM', child: true }]);
    for (let i = 1; i < TERMINATE_KILL_GRACE_TICKS; i++) expect(kills(tickProcs(procs))).toEqual([]);
    expect(kills(tickProcs(procs))).toEqual([{ pid: 800, signal: 'SIGKILL', child: true }]);
    for (let i = 0; i < 3 * TERMINATE_KILL_GRACE_TICKS; i++) expect(kills(tickProcs(procs))).toEqual([]);
  });

  it('an adopted process terminated twice has had its SIGKILL: no further SIGKILL from the grace', () => {
    const { procs } = adoptedOne();
    commandProcs(procs, terminate());
    expect(kills(commandProcs(procs, terminate()))).toEqual([{ pid: 100, signal: 'SIGKILL', child: false }]);
    for (let i = 0; i < 3 * ADOPTED_KILL_GRACE_TICKS; i++) expect(kills(tickProcs(procs))).toEqual([]);
  });

  it('an adopted process terminated once that then ends is reported as terminated on command (PROTOCOL §8.6)', () => {
    const { procs, ref } = adoptedOne();
    commandProcs(procs, terminate());
    expect(reports(onProcOs(procs, ref, { type: 'os.exited', code: null, signal: null }))).toEqual([
      { task: 't1', vpid: 0, kind: 'terminatedAbnormally', pid: 100, exitCode: null, signal: null, reason: ADOPTED_EXIT_TERMINATED, endpoint: '' },
    ]);
  });
});

describe('adoption after an agent restart (PROTOCOL §8.6)', () => {
  it('an alive process whose pid the group knows is adopted silently: no report, no pid-differs warning', () => {
    const { out } = adoptedOne(100);
    expect(reports(out)).toEqual([]);
    expect(of(out, 'log')).toEqual([{ type: 'log', level: 'info', event: 'proc.adopted', fields: { task: 't1', vpid: 0, pid: 100, groupPid: 100 } }]);
  });

  it('the adoption log names our pid and the group\'s when they differ', () => {
    const procs = createAgentProcs({ connectTimeoutTicks: TICKS, recovered: [{ task: 't1', vpid: 0, pid: 100 }] });
    const out = commandProcs(procs, { type: 'procs.adopt', procs: [{ task: 't1', vpid: 0, pid: 99, linked: false }] }, [{ task: 't1', vpid: 0, pid: 100, alive: true }]);
    expect(of(out, 'log')[0]).toEqual({ type: 'log', level: 'info', event: 'proc.adopted', fields: { task: 't1', vpid: 0, pid: 100, groupPid: 99 } });
  });

  it('a second procs.adopt is logged with the size of its list', () => {
    const { procs } = adoptedOne();
    const again = commandProcs(procs, { type: 'procs.adopt', procs: [{ task: 't1', vpid: 0, pid: 100, linked: false }, { task: 't2', vpid: 0, pid: 0, linked: false }] }, []);
    expect(of(again, 'log')).toEqual([{ type: 'log', level: 'warn', event: 'procs.adopt.again', fields: { count: 2 } }]);
  });

  it('a linked process found alive with a known pid: SIGKILL only, no spawnSucceeded; the grace never kills it again; its end says why', () => {
    const procs = createAgentProcs({ connectTimeoutTicks: TICKS, recovered: [{ task: 't1', vpid: 0, pid: 100 }] });
    const out = commandProcs(procs, { type: 'procs.adopt', procs: [{ task: 't1', vpid: 0, pid: 100, linked: true }] }, [{ task: 't1', vpid: 0, pid: 100, alive: true }]);
    expect(reports(out)).toEqual([]);
    expect(kills(out)).toEqual([{ pid: 100, signal: 'SIGKILL', child: false }]);
    for (let i = 0; i < 3 * ADOPTED_KILL_GRACE_TICKS; i++) expect(kills(tickProcs(procs))).toEqual([]);
    const ref = adoptedProcs(procs)[0]?.ref as ProcRef;
    expect(reports(onProcOs(procs, ref, { type: 'os.exited', code: null, signal: null }))).toMatchObject([{ kind: 'terminatedAbnormally', pid: 100, reason: LINKED_ORPHANED }]);
  });

  it('linked processes found dead are reported like plain ones: never started, or exited while the agent was down; nothing killed', () => {
    const procs = createAgentProcs({ connectTimeoutTicks: TICKS, recovered: [{ task: 't1', vpid: 1, pid: 7 }] });
    const out = commandProcs(procs, {
      type: 'procs.adopt',
      procs: [{ task: 't1', vpid: 0, pid: 0, linked: true }, { task: 't1', vpid: 1, pid: 7, linked: true }],
    }, [{ task: 't1', vpid: 1, pid: 7, alive: false }]);
    expect(reports(out)).toEqual([
      { task: 't1', vpid: 0, kind: 'spawnFailed', pid: 0, exitCode: null, signal: null, reason: RESTARTED_WHILE_SPAWNING, endpoint: '' },
      { task: 't1', vpid: 1, kind: 'terminatedAbnormally', pid: 7, exitCode: null, signal: null, reason: EXITED_WHILE_DOWN, endpoint: '' },
    ]);
    expect(kills(out)).toEqual([]);
    expect(procs.entries.size).toBe(0);
  });

  it('an adopted process is reported only at its exit: any other OS event about it changes nothing', () => {
    const { procs, ref } = adoptedOne();
    for (const event of [{ type: 'os.spawned', pid: 5 }, { type: 'os.connected' }, { type: 'os.disconnected' }, { type: 'os.forkFailed', error: 'x' }] as const) {
      expect(onProcOs(procs, ref, event)).toEqual([]);
    }
    expect(adoptedProcs(procs)).toEqual([{ ref, pid: 100 }]);
  });
});

describe('adoption: what the operator reads, and stale events (PROTOCOL §8.6)', () => {
  it('a process the group lists that this incarnation already spawned is logged procs.adopt.known with its task and vpid, and left alone', () => {
    const procs = createAgentProcs({ connectTimeoutTicks: TICKS, recovered: [{ task: 't1', vpid: 0, pid: 100 }] });
    running(procs, 50, spawnCmd({ vpid: 1 })); // not recorded before: spawned at once
    const out = commandProcs(procs, { type: 'procs.adopt', procs: [{ task: 't1', vpid: 1, pid: 50, linked: false }] }, [{ task: 't1', vpid: 0, pid: 100, alive: true }]);
    expect(of(out, 'log').filter((l) => l.event === 'procs.adopt.known')).toEqual([{ type: 'log', level: 'warn', event: 'procs.adopt.known', fields: { task: 't1', vpid: 1 } }]);
    expect(reports(out)).toEqual([]);
  });

  it('a process alive here that the group does not list is logged proc.orphan with its task, vpid and pid, and SIGKILLed', () => {
    const procs = createAgentProcs({ connectTimeoutTicks: TICKS, recovered: [{ task: 't3', vpid: 2, pid: 300 }] });
    const out = commandProcs(procs, { type: 'procs.adopt', procs: [] }, [{ task: 't3', vpid: 2, pid: 300, alive: true }]);
    expect(of(out, 'log')).toEqual([{ type: 'log', level: 'warn', event: 'proc.orphan', fields: { task: 't3', vpid: 2, pid: 300 } }]);
    expect(kills(out)).toEqual([{ pid: 300, signal: 'SIGKILL', child: false }]);
  });

  for (const linked of [false, true]) {
    it(`an adopted ${linked ? 'linked' : 'plain'} process's end, repeated after its VPID was spawned again (a restart), is stale: the new process is not touched`, () => {
      const recovered = [{ task: 't1', vpid: 0, pid: 100 }, { task: 't1', vpid: 1, pid: 101 }];
      const procs = createAgentProcs({ connectTimeoutTicks: TICKS, recovered });
      commandProcs(procs, { type: 'procs.adopt', procs: recovered.map((r) => ({ ...r, linked })) }, recovered.map((r) => ({ ...r, alive: true })));
      const old = adoptedProcs(procs).find((a) => a.ref.vpid === 0)?.ref as ProcRef;
      expect(reports(onProcOs(procs, old, { type: 'os.exited', code: null, signal: 'SIGKILL' }))).toMatchObject([{ vpid: 0, kind: 'terminatedAbnormally' }]);
      const again = running(procs, 500); // t1/0 started again
      expect(again.serial).not.toBe(old.serial);
      const late = onProcOs(procs, old, { type: 'os.exited', code: null, signal: 'SIGKILL' });
      expect(reports(late)).toEqual([]);
      expect(events(late)).toEqual(['proc.os.stale']);
      expect(procRecords(procs)).toContainEqual({ task: 't1', vpid: 0, pid: 500 });
    });
  }
});

describe('linked processes and their connections (PROTOCOL §9.3, §9.4)', () => {
  it('a plain process has no connection: signals and mappings are undeliverable, its signals refused, a close kills nothing', () => {
    const procs = fresh();
    running(procs, 50);
    const sig = commandProcs(procs, signalCmd([0]));
    expect(of(sig, 'deliver')).toEqual([]);
    expect(of(sig, 'log')).toEqual([{ type: 'log', level: 'debug', event: 'proc.signal.undeliverable', fields: { task: 't1', vpid: 0, signum: 20 } }]);
    const map = commandProcs(procs, { type: 'proc.mapping', task: 't1', vpids: [0], restarted: false, recovered: false, epoch: 1, quorum: 1, members: [{ vpid: 0, node: 'n1', endpoint: '' }], rollback: null, dgrp: null, straggler: null });
    expect(of(map, 'deliver')).toEqual([]);
    expect(events(signalFromApp(procs, 't1', 0, SIG))).toEqual(['app.signal.unconnected']);
    expect(finalizeApp(procs, 't1', 0)).toEqual([]);
    expect(closeApp(procs, 't1', 0, false)).toEqual([]);
  });

  it('a linked process started but not yet connected gets no signals, may not signal, and a close of a stray connection kills nothing', () => {
    const procs = fresh();
    running(procs, 60, spawnCmd(LINKED));
    expect(of(commandProcs(procs, signalCmd([0])), 'deliver')).toEqual([]);
    drainOutbox(procs.outbox);
    expect(of(signalFromApp(procs, 't1', 0, SIG), 'flush')).toEqual([]);
    expect(drainOutbox(procs.outbox)).toEqual([]);
    expect(closeApp(procs, 't1', 0, false)).toEqual([]);
    expect(finalizeApp(procs, 't1', 0)).toEqual([]);
  });

  it('proc.signal carries the sender node and data to the process', () => {
    const procs = fresh();
    connected(procs, 61);
    const out = commandProcs(procs, signalCmd([0], { node: 'n7', data: 'payload', src: 3, dest: 0, arg: 9, epoch: 2, signum: 33 }));
    expect(of(out, 'deliver')).toEqual([{
      type: 'deliver', task: 't1', vpid: 0,
      message: { type: 'signal', signum: 33, src: 3, dest: 0, arg: 9, epoch: 2, node: 'n7', data: 'payload' },
    }]);
  });

  it('proc.mapping goes to each listed connected member with its own vpid; a listed vpid not connected here is only logged', () => {
    const procs = fresh();
    connected(procs, 70);
    connected(procs, 71, spawnCmd({ ...LINKED, vpid: 1 }));
    const members = [{ vpid: 0, node: 'n1', endpoint: 'a:1' }, { vpid: 1, node: 'n1', endpoint: 'b:1' }, { vpid: 2, node: 'n2', endpoint: 'c:1' }];
    const out = commandProcs(procs, { type: 'proc.mapping', task: 't1', vpids: [0, 2, 1], restarted: true, recovered: false, epoch: 5, quorum: 2, members, rollback: null, dgrp: null, straggler: null });
    expect(of(out, 'deliver').map((d) => [d.vpid, d.message.type === 'mapping' ? d.message.vpid : -1, d.message.type === 'mapping' ? d.message.size : -1])).toEqual([[0, 0, 3], [1, 1, 3]]);
    expect(of(out, 'log')).toEqual([{ type: 'log', level: 'debug', event: 'proc.mapping.undeliverable', fields: { task: 't1', vpid: 2 } }]);
  });

  it('a connection lost without finalize is logged for the operator with the pid it SIGKILLs', () => {
    const procs = fresh();
    connected(procs, 90);
    expect(closeApp(procs, 't1', 0, false)).toEqual([
      { type: 'log', level: 'warn', event: 'app.connection.lost', fields: { task: 't1', vpid: 0, pid: 90 } },
      { type: 'kill', task: 't1', vpid: 0, pid: 90, signal: 'SIGKILL', child: true },
    ]);
  });

  it('a connection that closes after finalize kills nothing, even if the close is not flagged clean', () => {
    const procs = fresh();
    const ref = connected(procs, 80);
    finalizeApp(procs, 't1', 0);
    expect(closeApp(procs, 't1', 0, false)).toEqual([]);
    expect(reports(onProcOs(procs, ref, { type: 'os.exited', code: 0, signal: null }))).toMatchObject([{ kind: 'terminatedNormally', pid: 80 }]);
  });
});
