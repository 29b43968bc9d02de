// The agent's process table (src/core/agent-procs.ts; spec §6.3 FsmAgentProc, §7 item 2 the
// mapping, PROTOCOL §8.6 adoption), pure: every path a process can take from a delivered
// command to the report the group receives — plain spawn and its synthesised connect, normal and
// abnormal exits, fork failures with the spawner's text unchanged, terminate with SIGTERM then
// SIGKILL, the connect timeout, idempotent duplicates, respawn of a dead key, adoption of
// survivors after an agent restart (alive, dead, never confirmed, orphans) and linked processes
// (PROTOCOL §9.4: connect on the socket, finalize, signals both ways). Every report must be a valid wire request.
import { describe, expect, it } from 'vitest';
import { LINK_FIX } from '../../../fsm/fsm-agent-proc.ts';
import { drainOutbox } from '../../../src/core/agent-outbox.ts';
import { adoptedProcs, commandProcs, onProcOs, recoveredProcs, tickProcs } from '../../../src/core/agent-procs.ts';
import {
  ADOPTED_EXIT, ADOPTED_EXIT_TERMINATED, EXITED_WHILE_DOWN, LINKED_ORPHANED, RESTARTED_WHILE_SPAWNING,
} from '../../../src/core/agent-procs-adopt.ts';
import { closeApp, connectApp, finalizeApp, progressFromApp, signalFromApp } from '../../../src/core/agent-procs-app.ts';
import {
  ADOPTED_KILL_GRACE_TICKS, createAgentProcs, procRecords, TERMINATE_KILL_GRACE_TICKS,
  type AgentProcs, type AgentProcsEffect, type ProcRecord, type ProcRef,
} from '../../../src/core/agent-procs-state.ts';
import { MAX_AGENT_PROCS, MAX_TEXT_CHARS } from '../../../src/core/constants.ts';
import { agentRequest, type GroupCommand, type ProcReport, type ProcSpawn } from '../../../src/core/wire/messages.ts';

const TICKS = 4;

const SPAWN: ProcSpawn = {
  type: 'proc.spawn',
  task: 't1',
  vpid: 0,
  mode: 'plain',
  file: '/usr/bin/app',
  args: ['--n', '1'],
  cwd: '/tmp',
  env: [['A', '1'], ['TRINE_TASK', 'forged']],
  size: 2,
  rank: 0,
  restarted: false,
  endpoints: [{ vpid: 0, node: 'n1' }, { vpid: 1, node: 'n2' }],
  taskKey: new Uint8Array(32).fill(7),
};

const spawnCmd = (over: Partial<ProcSpawn> = {}): ProcSpawn => ({ ...SPAWN, ...over });
const terminate = (task = 't1', vpid = 0): GroupCommand => ({ type: 'proc.terminate', task, vpid });

const of = <T extends AgentProcsEffect['type']>(effects: AgentProcsEffect[], type: T) =>
  effects.filter((e): e is Extract<AgentProcsEffect, { type: T }> => e.type === type);
const reports = (effects: AgentProcsEffect[]): ProcReport[] => of(effects, 'report').map((e) => e.report);
const kills = (effects: AgentProcsEffect[]) => of(effects, 'kill').map(({ pid, signal, child }) => ({ pid, signal, child }));

/** Every report is what the group's decoder accepts as a `proc.report` request. */
function expectWireValid(effects: AgentProcsEffect[]): void {
  for (const r of reports(effects)) {
    const decoded = agentRequest.dec(agentRequest.enc({ type: 'proc.report', reports: [r] }), 'req');
    expect(decoded.ok, JSON.stringify(r)).toBe(true);
  }
}

/** A table driven through a spawn; `ref` is the spawn's, `all` every effect so far. */
function started(procs: AgentProcs = createAgentProcs({ connectTimeoutTicks: TICKS }), cmd: ProcSpawn = SPAWN) {
  const all = commandProcs(procs, cmd);
  const spawn = of(all, 'spawn')[0];
  if (spawn === undefined) throw new Error(`no spawn effect: ${JSON.stringify(all)}`);
  const feed = (effects: AgentProcsEffect[]) => {
    all.push(...effects);
    expectWireValid(effects);
    return effects;
  };
  return { procs, ref: spawn.ref, spawn, all, feed };
}

function running(pid = 100) {
  const s = started();
  s.feed(onProcOs(s.procs, s.ref, { type: 'os.spawned', pid }));
  return s;
}

describe('spawn (plain mode)', () => {
  it('spawns with the task environment plus the mapping message, which wins over a same-named task variable', () => {
    const { spawn, all } = started();
    expect(spawn.spec).toMatchObject({ vpid: 0, taskId: 't1', file: '/usr/bin/app', args: ['--n', '1'], cwd: '/tmp' });
    expect(spawn.spec.env).toEqual({
      A: '1',
      TRINE_TASK: 't1',
      TRINE_VPID: '0',
      TRINE_SIZE: '2',
      TRINE_RANK: '0',
      TRINE_RESTARTED: '0',
      TRINE_ENDPOINTS: JSON.stringify([{ vpid: 0, node: 'n1' }, { vpid: 1, node: 'n2' }]),
    });
    expect(reports(all)).toEqual([]);
    expect(started(undefined, spawnCmd({ restarted: true })).spawn.spec.env['TRINE_RESTARTED']).toBe('1');
  });

  it('the task key travels beside the spec, for the socket\'s welcome: never in the environment or arguments (PROTOCOL §9.5)', () => {
    const { spawn, all } = started(undefined, spawnCmd({ mode: 'linked' }));
    expect(spawn.taskKey).toEqual(SPAWN.taskKey);
    const hex = Buffer.from(SPAWN.taskKey).toString('hex');
    const text = JSON.stringify({ spec: spawn.spec, logs: of(all, 'log') });
    expect(text).not.toContain(hex);
    expect(text).not.toContain('7,7,7,7');
  });

  it('a successful exec is the connect: spawnSucceeded with the pid at once, and the pid is recorded', () => {
    const s = started();
    const effects = s.feed(onProcOs(s.procs, s.ref, { type: 'os.spawned', pid: 4242 }));
    expect(reports(effects)).toEqual([{ task: 't1', vpid: 0, kind: 'spawnSucceeded', pid: 4242, exitCode: null, signal: null, reason: 'running', endpoint: '' }]);
    expect(of(effects, 'records')).toEqual([{ type: 'records', procs: [{ task: 't1', vpid: 0, pid: 4242 }] }]);
    expect(procRecords(s.procs)).toEqual([{ task: 't1', vpid: 0, pid: 4242 }]);
  });

  it('exit code 0 without a signal is the clean disconnect: terminatedNormally, and the record goes', () => {
    const s = running();
    const effects = s.feed(onProcOs(s.procs, s.ref, { type: 'os.exited', code: 0, signal: null }));
    expect(reports(effects)).toEqual([{ task: 't1', vpid: 0, kind: 'terminatedNormally', pid: 100, exitCode: 0, signal: null, reason: 'exited with code 0', endpoint: '' }]);
    expect(of(effects, 'records')).toEqual([{ type: 'records', procs: [] }]);
    expect(s.procs.entries.size).toBe(0);
  });

  it('exit code 1 is abnormal', () => {
    const s = running();
    expect(reports(s.feed(onProcOs(s.procs, s.ref, { type: 'os.exited', code: 1, signal: null })))).toEqual([
      { task: 't1', vpid: 0, kind: 'terminatedAbnormally', pid: 100, exitCode: 1, signal: null, reason: 'exited with code 1', endpoint: '' },
    ]);
  });

  it('death by SIGKILL is abnormal', () => {
    const s = running();
    expect(reports(s.feed(onProcOs(s.procs, s.ref, { type: 'os.exited', code: null, signal: 'SIGKILL' })))).toEqual([
      { task: 't1', vpid: 0, kind: 'terminatedAbnormally', pid: 100, exitCode: null, signal: 'SIGKILL', reason: 'killed by SIGKILL', endpoint: '' },
    ]);
  });

  it("a fork/exec failure is spawnFailed with the spawner's text unchanged", () => {
    const s = started();
    const text = 'spawn failed: ENOENT /no/such/app (executable or its interpreter not found)';
    const effects = s.feed(onProcOs(s.procs, s.ref, { type: 'os.forkFailed', error: text }));
    expect(reports(effects)).toEqual([{ task: 't1', vpid: 0, kind: 'spawnFailed', pid: 0, exitCode: null, signal: null, reason: text, endpoint: '' }]);
    expect(s.procs.entries.size).toBe(0);
  });

  it('a reason longer than the wire allows is clipped, never refused by the group', () => {
    const s = started();
    const effects = s.feed(onProcOs(s.procs, s.ref, { type: 'os.forkFailed', error: `spawn failed: ENAMETOOLONG ${'x'.repeat(MAX_TEXT_CHARS)}` }));
    const [r] = reports(effects);
    expect(r?.reason.length).toBe(MAX_TEXT_CHARS);
    expect(r?.reason.startsWith('spawn failed: ENAMETOOLONG')).toBe(true);
  });

  it('each report is sent exactly once, whatever comes after the process is gone', () => {
    const s = running();
    s.feed(onProcOs(s.procs, s.ref, { type: 'os.exited', code: 0, signal: null }));
    s.feed(onProcOs(s.procs, s.ref, { type: 'os.exited', code: 1, signal: null }));
    s.feed(commandProcs(s.procs, terminate()));
    s.feed(tickProcs(s.procs));
    expect(reports(s.all).map((r) => r.kind)).toEqual(['spawnSucceeded', 'terminatedNormally']);
  });
});

describe('terminate', () => {
  it('SIGTERM first, SIGKILL when repeated; the end is reported once', () => {
    const s = running(300);
    expect(kills(s.feed(commandProcs(s.procs, terminate())))).toEqual([{ pid: 300, signal: 'SIGTERM', child: true }]);
    expect(kills(s.feed(commandProcs(s.procs, terminate())))).toEqual([{ pid: 300, signal: 'SIGKILL', child: true }]);
    const end = s.feed(onProcOs(s.procs, s.ref, { type: 'os.exited', code: null, signal: 'SIGKILL' }));
    expect(reports(end)).toEqual([{ task: 't1', vpid: 0, kind: 'terminatedAbnormally', pid: 300, exitCode: null, signal: 'SIGKILL', reason: 'killed by SIGKILL', endpoint: '' }]);
  });

  it('node.shutdown (PROTOCOL §10.11) terminates every process of the node: SIGTERM, and SIGKILL when the driver repeats it', () => {
    const s = running(310);
    const second = commandProcs(s.procs, spawnCmd({ vpid: 1 }));
    const ref1 = of(second, 'spawn')[0]?.ref;
    if (ref1 === undefined) throw new Error('no second spawn');
    s.feed(onProcOs(s.procs, ref1, { type: 'os.spawned', pid: 311 }));
    const shutdown: GroupCommand = { type: 'node.shutdown', rsn: 12, removed: false };
    expect(kills(s.feed(commandProcs(s.procs, shutdown)))).toEqual([{ pid: 310, signal: 'SIGTERM', child: true }, { pid: 311, signal: 'SIGTERM', child: true }]);
    s.feed(onProcOs(s.procs, ref1, { type: 'os.exited', code: 0, signal: null }));
    expect(kills(s.feed(commandProcs(s.procs, shutdown)))).toEqual([{ pid: 310, signal: 'SIGKILL', child: true }]);
  });

  it('a plain process that exits 0 on SIGTERM ended normally', () => {
    const s = running(301);
    s.feed(commandProcs(s.procs, terminate()));
    expect(reports(s.feed(onProcOs(s.procs, s.ref, { type: 'os.exited', code: 0, signal: null })))[0]?.kind).toBe('terminatedNormally');
  });

  it('before the exec answered: SIGKILL as soon as the pid is known, then spawnFailed', () => {
    const s = started();
    expect(kills(s.feed(commandProcs(s.procs, terminate())))).toEqual([]);
    const spawned = s.feed(onProcOs(s.procs, s.ref, { type: 'os.spawned', pid: 302 }));
    expect(kills(spawned)).toEqual([{ pid: 302, signal: 'SIGKILL', child: true }]);
    expect(reports(spawned)).toEqual([]); // never spawnSucceeded for a process being aborted
    const end = s.feed(onProcOs(s.procs, s.ref, { type: 'os.exited', code: null, signal: 'SIGKILL' }));
    expect(reports(end)).toEqual([{ task: 't1', vpid: 0, kind: 'spawnFailed', pid: 302, exitCode: null, signal: 'SIGKILL', reason: 'terminated before connecting', endpoint: '' }]);
  });

  it('an unknown key: nothing is reported, only logged', () => {
    const procs = createAgentProcs({ connectTimeoutTicks: TICKS });
    const effects = commandProcs(procs, terminate('t9', 3));
    expect(reports(effects)).toEqual([]);
    expect(kills(effects)).toEqual([]);
    expect(of(effects, 'log')).toMatchObject([{ event: 'proc.terminate.unknown', fields: { task: 't9', vpid: 3 } }]);
  });
});

describe('connect timeout', () => {
  it('is irrelevant for a plain process once it runs', () => {
    const s = running(400);
    for (let i = 0; i < TICKS * 100; i++) expect(tickProcs(s.procs)).toEqual([]);
    expect(procRecords(s.procs)).toEqual([{ task: 't1', vpid: 0, pid: 400 }]);
  });

  it('still bounds an exec that never answers: SIGKILL once the pid arrives, then spawnFailed', () => {
    const s = started();
    for (let i = 0; i < TICKS; i++) s.feed(tickProcs(s.procs));
    expect(kills(s.all)).toEqual([]);
    expect(kills(s.feed(onProcOs(s.procs, s.ref, { type: 'os.spawned', pid: 401 })))).toEqual([{ pid: 401, signal: 'SIGKILL', child: true }]);
    const end = s.feed(onProcOs(s.procs, s.ref, { type: 'os.exited', code: null, signal: 'SIGKILL' }));
    expect(reports(end)[0]).toMatchObject({ kind: 'spawnFailed', pid: 401, reason: `never linked: no connection to its agent within ${TICKS} ticks: ${LINK_FIX}` });
  });
});

describe('idempotence', () => {
  it('the same proc.spawn twice never spawns twice: while spawning and while running', () => {
    const s = started();
    expect(of(s.feed(commandProcs(s.procs, SPAWN)), 'spawn')).toEqual([]);
    s.feed(onProcOs(s.procs, s.ref, { type: 'os.spawned', pid: 500 }));
    const again = s.feed(commandProcs(s.procs, SPAWN));
    expect(of(again, 'spawn')).toEqual([]);
    expect(of(again, 'log')).toMatchObject([{ event: 'proc.spawn.duplicate' }]);
    expect(reports(s.all).map((r) => r.kind)).toEqual(['spawnSucceeded']);
  });

  it('a dead key is spawned again; events of the earlier process are not taken for the new one', () => {
    const s = running(600);
    s.feed(onProcOs(s.procs, s.ref, { type: 'os.exited', code: 1, signal: null }));
    const again = commandProcs(s.procs, spawnCmd({ restarted: true }));
    const [spawn] = of(again, 'spawn');
    expect(spawn?.ref.serial).toBeGreaterThan(s.ref.serial);
    expect(spawn?.spec.env['TRINE_RESTARTED']).toBe('1');
    expect(onProcOs(s.procs, s.ref, { type: 'os.exited', code: 0, signal: null }).filter((e) => e.type !== 'log')).toEqual([]);
    const ok = onProcOs(s.procs, spawn?.ref as ProcRef, { type: 'os.spawned', pid: 601 });
    expect(reports(ok)).toMatchObject([{ kind: 'spawnSucceeded', pid: 601 }]);
  });

  it('a spawn past MAX_AGENT_PROCS live processes is refused as spawnFailed, and taken again once one has gone', () => {
    const procs = createAgentProcs({ connectTimeoutTicks: TICKS });
    let first: ProcRef | undefined;
    for (let vpid = 0; vpid < MAX_AGENT_PROCS; vpid++) {
      const [spawn] = of(commandProcs(procs, spawnCmd({ vpid })), 'spawn');
      first ??= spawn?.ref;
    }
    expect(procs.entries.size).toBe(MAX_AGENT_PROCS);
    const full = commandProcs(procs, spawnCmd({ vpid: MAX_AGENT_PROCS }));
    expect(of(full, 'spawn')).toEqual([]);
    expect(reports(full)).toEqual([{
      task: 't1', vpid: MAX_AGENT_PROCS, kind: 'spawnFailed', pid: 0, exitCode: null, signal: null,
      reason: `agent process table full (${MAX_AGENT_PROCS} processes)`, endpoint: '',
    }]);
    onProcOs(procs, first as ProcRef, { type: 'os.forkFailed', error: 'EAGAIN' });
    expect(procs.entries.size).toBe(MAX_AGENT_PROCS - 1);
    expect(of(commandProcs(procs, spawnCmd({ vpid: MAX_AGENT_PROCS })), 'spawn')).toHaveLength(1);
  });

  it('an OS event of an earlier process of the same key, or of a key never spawned, is stale: logged, nothing reported', () => {
    const s = running(600);
    s.feed(onProcOs(s.procs, s.ref, { type: 'os.exited', code: 1, signal: null }));
    const [spawn] = of(commandProcs(s.procs, SPAWN), 'spawn');
    const stale = onProcOs(s.procs, s.ref, { type: 'os.spawned', pid: 999 });
    expect(stale).toEqual([{ type: 'log', level: 'debug', event: 'proc.os.stale', fields: { task: 't1', vpid: 0, serial: s.ref.serial, event: 'os.spawned' } }]);
    expect(procRecords(s.procs)).toEqual([]);
    expect(of(onProcOs(s.procs, { task: 't9', vpid: 0, serial: 1 }, { type: 'os.exited', code: 0, signal: null }), 'report')).toEqual([]);
    expect(reports(onProcOs(s.procs, spawn?.ref as ProcRef, { type: 'os.spawned', pid: 601 }))).toMatchObject([{ kind: 'spawnSucceeded', pid: 601 }]);
  });

  it('processes are keyed by task and vpid: another vpid or task is another process', () => {
    const procs = createAgentProcs({ connectTimeoutTicks: TICKS });
    const spawns = [SPAWN, spawnCmd({ vpid: 1 }), spawnCmd({ task: 't2' })].flatMap((c) => of(commandProcs(procs, c), 'spawn'));
    expect(spawns.map((e) => `${e.ref.task}/${e.ref.vpid}`)).toEqual(['t1/0', 't1/1', 't2/0']);
    expect(procs.entries.size).toBe(3);
  });
});

describe('linked mode (PROTOCOL §9.4)', () => {
  const LINKED = spawnCmd({ mode: 'linked' });
  const SIG = { signum: 100, dest: 1, arg: -5, epoch: 3 };

  function connected() {
    const t = started(createAgentProcs({ connectTimeoutTicks: TICKS }), LINKED);
    expect(t.spawn.linked).toBe(true);
    const spawned = t.feed(onProcOs(t.procs, t.ref, { type: 'os.spawned', pid: 4242 }));
    // The exec is not the connect for a linked process: nothing is reported yet.
    expect(reports(spawned)).toEqual([]);
    const c = connectApp(t.procs, 't1', 0, '10.0.0.1:5000');
    expect(c.ok).toBe(true);
    t.feed(c.effects);
    return t;
  }

  it('the library hello is Process-connect: spawnSucceeded carries the endpoint it announced', () => {
    const t = connected();
    expect(reports(t.all)).toEqual([
      { task: 't1', vpid: 0, kind: 'spawnSucceeded', pid: 4242, exitCode: null, signal: null, reason: 'running', endpoint: '10.0.0.1:5000' },
    ]);
  });

  it('a hello for a process that is not starting here is refused', () => {
    const t = connected();
    expect(connectApp(t.procs, 't1', 0, 'x:1').ok).toBe(false); // already connected
    expect(connectApp(t.procs, 't9', 0, 'x:1').ok).toBe(false); // unknown
    const plain = started();
    plain.feed(onProcOs(plain.procs, plain.ref, { type: 'os.spawned', pid: 7 }));
    expect(connectApp(plain.procs, 't1', 0, 'x:1').ok).toBe(false); // plain processes never link
  });

  it('a hello before the exec answered (no pid yet) is refused; the same hello after it is taken', () => {
    const t = started(createAgentProcs({ connectTimeoutTicks: TICKS }), LINKED);
    const early = connectApp(t.procs, 't1', 0, 'x:1');
    expect(early.ok).toBe(false);
    expect(early.effects).toEqual([{ type: 'log', level: 'warn', event: 'app.connect.refused', fields: { task: 't1', vpid: 0 } }]);
    t.feed(onProcOs(t.procs, t.ref, { type: 'os.spawned', pid: 4242 }));
    expect(connectApp(t.procs, 't1', 0, 'x:1').ok).toBe(true);
  });

  it('a terminating linked process still gets its signals and may still signal; once gone, neither', () => {
    const t = connected();
    t.feed(commandProcs(t.procs, terminate()));
    const sig = { type: 'proc.signal' as const, task: 't1', vpids: [0], signum: 20, src: 1, dest: 0, arg: 0, epoch: 1, node: '', data: '' };
    expect(of(commandProcs(t.procs, sig), 'deliver')).toHaveLength(1);
    drainOutbox(t.procs.outbox); // the spawn's report
    expect(signalFromApp(t.procs, 't1', 0, SIG)).toEqual([{ type: 'flush' }]);
    expect(drainOutbox(t.procs.outbox)).toHaveLength(1);
    t.feed(onProcOs(t.procs, t.ref, { type: 'os.exited', code: null, signal: 'SIGTERM' }));
    const late = commandProcs(t.procs, sig);
    expect(of(late, 'deliver')).toEqual([]);
    expect(of(late, 'log')).toMatchObject([{ event: 'proc.signal.undeliverable' }]);
    expect(signalFromApp(t.procs, 't1', 0, SIG)).toEqual([{ type: 'log', level: 'warn', event: 'app.signal.unconnected', fields: { task: 't1', vpid: 0, signum: SIG.signum } }]);
    expect(closeApp(t.procs, 't1', 0, false)).toEqual([]);
  });

  it('PROTOCOL §13.2: a connected process\'s progress goes to the group as proc.progress, in order with its signals; an unconnected one\'s is logged', () => {
    const t = connected();
    drainOutbox(t.procs.outbox); // the spawn's report
    expect(signalFromApp(t.procs, 't1', 0, SIG)).toEqual([{ type: 'flush' }]);
    expect(progressFromApp(t.procs, 't1', 0, 310)).toEqual([]);
    const sent = drainOutbox(t.procs.outbox);
    expect(sent.map((r) => r.type)).toEqual(['sig.request', 'proc.progress']);
    expect(sent[1]).toEqual({ type: 'proc.progress', task: 't1', vpid: 0, permille: 310 });
    expect(agentRequest.dec(agentRequest.enc(sent[1] as never), 'r')).toEqual({ ok: true, value: sent[1] });
    expect(progressFromApp(t.procs, 't9', 0, 1)).toEqual([{ type: 'log', level: 'debug', event: 'app.progress.unconnected', fields: { task: 't9', vpid: 0 } }]);
  });

  it('a linked process that never connects fails its start at the connect timeout', () => {
    const t = started(createAgentProcs({ connectTimeoutTicks: TICKS }), LINKED);
    t.feed(onProcOs(t.procs, t.ref, { type: 'os.spawned', pid: 4242 }));
    for (let i = 0; i < TICKS; i++) t.feed(tickProcs(t.procs));
    expect(kills(t.all)).toEqual([{ pid: 4242, signal: 'SIGKILL', child: true }]);
    t.feed(onProcOs(t.procs, t.ref, { type: 'os.exited', code: null, signal: 'SIGKILL' }));
    expect(reports(t.all).map((r) => r.kind)).toEqual(['spawnFailed']);
  });

  it('finalize then exit 0 is a normal end; exit 0 without finalize is a crash', () => {
    const clean = connected();
    clean.feed(finalizeApp(clean.procs, 't1', 0));
    clean.feed(onProcOs(clean.procs, clean.ref, { type: 'os.exited', code: 0, signal: null }));
    expect(reports(clean.all).map((r) => r.kind)).toEqual(['spawnSucceeded', 'terminatedNormally']);
    const crash = connected();
    crash.feed(onProcOs(crash.procs, crash.ref, { type: 'os.exited', code: 0, signal: null }));
    expect(reports(crash.all).map((r) => r.kind)).toEqual(['spawnSucceeded', 'terminatedAbnormally']);
  });

  it('PROTOCOL §11.3: a rollback rank killed after it finalized has finished (a normal end, the signal and why in its report); killed before, or in a task without rollback, it crashed', () => {
    const rollbackMapping = (t: ReturnType<typeof connected>) => t.feed(commandProcs(t.procs, {
      type: 'proc.mapping', task: 't1', vpids: [0], restarted: false, recovered: false, epoch: 1, quorum: 1, members: [{ vpid: 0, node: 'n1', endpoint: '' }],
      rollback: { ranks: [0], protectors: ['h:1'], marks: [[]], groups: [0], finished: [false], logging: 'rbml', checkpoint: 'nco', intervalMs: 500, maxStateBytes: 1024 }, dgrp: null, straggler: null,
    }));
    const done = connected();
    rollbackMapping(done);
    done.feed(finalizeApp(done.procs, 't1', 0));
    done.feed(onProcOs(done.procs, done.ref, { type: 'os.exited', code: null, signal: 'SIGKILL' }));
    expect(reports(done.all).at(-1)).toMatchObject({ kind: 'terminatedNormally', exitCode: null, signal: 'SIGKILL', reason: 'killed by SIGKILL after it finalized: its rank had finished (PROTOCOL §11.3)' });
    expect(of(done.all, 'log')).toContainEqual({ type: 'log', level: 'warn', event: 'proc.killed-after-finalize', fields: { task: 't1', vpid: 0, signal: 'SIGKILL' } });
    expect(agentRequest.dec(agentRequest.enc({ type: 'proc.report', reports: [reports(done.all).at(-1)!] } as never), 'r').ok).toBe(true);
    const early = connected();
    rollbackMapping(early);
    early.feed(onProcOs(early.procs, early.ref, { type: 'os.exited', code: null, signal: 'SIGKILL' }));
    expect(reports(early.all).at(-1)?.kind).toBe('terminatedAbnormally');
    const plain = connected();
    plain.feed(finalizeApp(plain.procs, 't1', 0));
    plain.feed(onProcOs(plain.procs, plain.ref, { type: 'os.exited', code: null, signal: 'SIGKILL' }));
    expect(reports(plain.all).at(-1)?.kind).toBe('terminatedAbnormally');
  });

  it('a connection closed without finalize while the process lives gets the process SIGKILLed', () => {
    const t = connected();
    expect(kills(closeApp(t.procs, 't1', 0, true))).toEqual([]);
    expect(kills(closeApp(t.procs, 't1', 0, false))).toEqual([{ pid: 4242, signal: 'SIGKILL', child: true }]);
  });

  it('a process that ignores SIGTERM gets SIGKILL after the grace ticks, without a second terminate', () => {
    const t = connected();
    t.feed(commandProcs(t.procs, terminate()));
    for (let i = 0; i < TERMINATE_KILL_GRACE_TICKS; i++) t.feed(tickProcs(t.procs));
    expect(kills(t.all)).toEqual([{ pid: 4242, signal: 'SIGTERM', child: true }, { pid: 4242, signal: 'SIGKILL', child: true }]);
  });

  it('signals from a connected process become sig.request requests; from anyone else nothing', () => {
    const t = connected();
    drainOutbox(t.procs.outbox); // the spawn's report
    expect(signalFromApp(t.procs, 't1', 0, SIG)).toEqual([{ type: 'flush' }]);
    const sent = drainOutbox(t.procs.outbox);
    expect(sent).toEqual([{ type: 'sig.request', task: 't1', vpid: 0, ...SIG }]);
    expect(agentRequest.dec(agentRequest.enc(sent[0] as never), 'r').ok).toBe(true);
    expect(of(signalFromApp(t.procs, 't1', 1, SIG), 'flush')).toEqual([]);
    expect(drainOutbox(t.procs.outbox)).toEqual([]);
  });

  it('proc.signal and proc.mapping are delivered to the listed connected processes only', () => {
    const t = connected();
    const sig = commandProcs(t.procs, { type: 'proc.signal', task: 't1', vpids: [0, 1], signum: 20, src: 0xffffffff, dest: 0xfffffffe, arg: 1, epoch: 4, node: '', data: '' });
    expect(of(sig, 'deliver')).toEqual([{
      type: 'deliver', task: 't1', vpid: 0,
      message: { type: 'signal', signum: 20, src: 0xffffffff, dest: 0xfffffffe, arg: 1, epoch: 4, node: '', data: '' },
    }]);
    const members = [{ vpid: 0, node: 'n1', endpoint: '10.0.0.1:5000' }, { vpid: 1, node: 'n2', endpoint: '10.0.0.2:5000' }];
    const map = commandProcs(t.procs, { type: 'proc.mapping', task: 't1', vpids: [0], restarted: false, recovered: true, epoch: 7, quorum: 2, members, rollback: null, dgrp: null, straggler: null });
    expect(of(map, 'deliver')[0]?.message).toEqual({
      type: 'mapping', task: 't1', vpid: 0, size: 2, restarted: false, recovered: true, epoch: 7, quorum: 2, members, rollback: null, dgrp: null, straggler: null,
    });
  });

  it('PROTOCOL §11.2: a rollback task\'s mapping gives each process its own rank from the table; a VPID the table lacks gets none', () => {
    const t = connected();
    const members = [{ vpid: 0, node: 'n1', endpoint: '10.0.0.1:5000' }];
    const options = { logging: 'hmpl', checkpoint: 'bsco', intervalMs: 500, maxStateBytes: 1024 } as const;
    const map = commandProcs(t.procs, {
      type: 'proc.mapping', task: 't1', vpids: [0], restarted: false, recovered: true, epoch: 3, quorum: 2, members, rollback: { ranks: [5, 0], protectors: ['h:1', 'h:2'], marks: [[], []], groups: [0, 1], finished: [false, false], ...options }, dgrp: null, straggler: null,
    });
    expect(of(map, 'deliver')[0]?.message).toMatchObject({ type: 'mapping', vpid: 0, recovered: true, rollback: { rank: 1, protector: 'h:2', ranks: [5, 0], ...options } });
    const stray = commandProcs(t.procs, {
      type: 'proc.mapping', task: 't1', vpids: [0], restarted: false, recovered: true, epoch: 3, quorum: 2, members, rollback: { ranks: [5, 6], protectors: ['', ''], marks: [[], []], groups: [0, 1], finished: [false, false], ...options }, dgrp: null, straggler: null,
    });
    expect(of(stray, 'deliver')).toEqual([]);
    expect(of(stray, 'log')).toEqual([{ type: 'log', level: 'warn', event: 'proc.mapping.no-rank', fields: { task: 't1', vpid: 0 } }]);
  });
});

describe('adoption after an agent restart (PROTOCOL §8.6)', () => {
  const RECOVERED: ProcRecord[] = [
    { task: 't1', vpid: 0, pid: 100 }, // alive, the group knows its pid
    { task: 't1', vpid: 1, pid: 101 }, // alive, the group never heard it started (pid 0)
    { task: 't2', vpid: 0, pid: 200 }, // dead
    { task: 't3', vpid: 0, pid: 300 }, // alive, the group does not list it: orphan
    { task: 't6', vpid: 0, pid: 600 }, // dead and not listed: forgotten
  ];
  const ALIVE = new Set([100, 101, 300]);
  const local = RECOVERED.map((r) => ({ ...r, alive: ALIVE.has(r.pid) }));
  const ADOPT: GroupCommand = {
    type: 'procs.adopt',
    procs: [
      { task: 't1', vpid: 0, pid: 100, linked: false },
      { task: 't1', vpid: 1, pid: 0, linked: false },
      { task: 't2', vpid: 0, pid: 200, linked: false },
      { task: 't4', vpid: 0, pid: 0, linked: false }, // never recorded here: the agent died while spawning
      { task: 't5', vpid: 0, pid: 500, linked: false }, // never recorded here either
    ],
  };

  it('a linked process found alive is killed, not adopted: it cannot reconnect to the new agent (PROTOCOL §9.4)', () => {
    const procs = createAgentProcs({ connectTimeoutTicks: TICKS, recovered: [{ task: 't1', vpid: 0, pid: 100 }] });
    const out = commandProcs(procs, { type: 'procs.adopt', procs: [{ task: 't1', vpid: 0, pid: 100, linked: true }] }, [{ task: 't1', vpid: 0, pid: 100, alive: true }]);
    expect(kills(out)).toEqual([{ pid: 100, signal: 'SIGKILL', child: false }]);
    const ref = adoptedProcs(procs)[0]?.ref;
    expect(ref).toBeDefined();
    const end = onProcOs(procs, ref as ProcRef, { type: 'os.exited', code: null, signal: null });
    expect(reports(end)).toMatchObject([{ kind: 'terminatedAbnormally', reason: LINKED_ORPHANED }]);
  });

  function adopted() {
    const procs = createAgentProcs({ connectTimeoutTicks: TICKS, recovered: RECOVERED });
    const effects = commandProcs(procs, ADOPT, local);
    expectWireValid(effects);
    return { procs, effects };
  }

  it('holds the recovered records (and keeps them in the file) until procs.adopt decides', () => {
    const procs = createAgentProcs({ connectTimeoutTicks: TICKS, recovered: RECOVERED });
    expect(procRecords(procs)).toEqual(RECOVERED);
    expect(recoveredProcs(procs)).toEqual(RECOVERED);
    // A spawn for a key the previous incarnation may still run waits for the adopt.
    const early = commandProcs(procs, spawnCmd({ task: 't3' }));
    expect(of(early, 'spawn')).toEqual([]);
    expect(of(early, 'log')).toMatchObject([{ event: 'proc.spawn.before-adopt' }]);
  });

  it('alive → adopted; pid 0 → spawnSucceeded with the real pid; dead → reported; unlisted alive → SIGKILL', () => {
    const { procs, effects } = adopted();
    expect(reports(effects)).toEqual([
      { task: 't1', vpid: 1, kind: 'spawnSucceeded', pid: 101, exitCode: null, signal: null, reason: 'running (adopted after an agent restart)', endpoint: '' },
      { task: 't2', vpid: 0, kind: 'terminatedAbnormally', pid: 200, exitCode: null, signal: null, reason: EXITED_WHILE_DOWN, endpoint: '' },
      { task: 't4', vpid: 0, kind: 'spawnFailed', pid: 0, exitCode: null, signal: null, reason: RESTARTED_WHILE_SPAWNING, endpoint: '' },
      { task: 't5', vpid: 0, kind: 'terminatedAbnormally', pid: 500, exitCode: null, signal: null, reason: EXITED_WHILE_DOWN, endpoint: '' },
    ]);
    expect(kills(effects)).toEqual([{ pid: 300, signal: 'SIGKILL', child: false }]);
    expect(adoptedProcs(procs).map((a) => [a.ref.task, a.ref.vpid, a.pid])).toEqual([['t1', 0, 100], ['t1', 1, 101]]);
    expect(recoveredProcs(procs)).toEqual([]);
    expect(of(effects, 'records').at(-1)?.procs).toEqual([{ task: 't1', vpid: 0, pid: 100 }, { task: 't1', vpid: 1, pid: 101 }]);
  });

  it("an adopted process's end: terminatedAbnormally with its exit status unknown", () => {
    const { procs } = adopted();
    const a = adoptedProcs(procs)[0];
    if (a === undefined) throw new Error('nothing adopted');
    const end = onProcOs(procs, a.ref, { type: 'os.exited', code: null, signal: null });
    expect(reports(end)).toEqual([{ task: 't1', vpid: 0, kind: 'terminatedAbnormally', pid: 100, exitCode: null, signal: null, reason: ADOPTED_EXIT, endpoint: '' }]);
    expect(adoptedProcs(procs)).toHaveLength(1);
    expect(reports(onProcOs(procs, a.ref, { type: 'os.exited', code: null, signal: null }))).toEqual([]);
  });

  it('terminating an adopted process: SIGTERM then SIGKILL, pids re-checked by the driver; still abnormal', () => {
    const { procs } = adopted();
    expect(kills(commandProcs(procs, terminate('t1', 1)))).toEqual([{ pid: 101, signal: 'SIGTERM', child: false }]);
    expect(kills(commandProcs(procs, terminate('t1', 1)))).toEqual([{ pid: 101, signal: 'SIGKILL', child: false }]);
    const a = adoptedProcs(procs).find((x) => x.ref.vpid === 1);
    const end = onProcOs(procs, a?.ref as ProcRef, { type: 'os.exited', code: null, signal: null });
    expect(reports(end)).toMatchObject([{ kind: 'terminatedAbnormally', exitCode: null, reason: ADOPTED_EXIT_TERMINATED }]);
  });

  it('an adopted process under terminate gets SIGKILL by itself ADOPTED_KILL_GRACE_TICKS ticks after the SIGTERM, once', () => {
    const { procs } = adopted();
    expect(kills(commandProcs(procs, terminate('t1', 0)))).toEqual([{ pid: 100, signal: 'SIGTERM', child: false }]);
    for (let i = 1; i < ADOPTED_KILL_GRACE_TICKS; i++) expect(kills(tickProcs(procs))).toEqual([]);
    expect(kills(tickProcs(procs))).toEqual([{ pid: 100, signal: 'SIGKILL', child: false }]);
    for (let i = 0; i < 2 * ADOPTED_KILL_GRACE_TICKS; i++) expect(kills(tickProcs(procs))).toEqual([]);
    // Untouched adopted processes are never killed by ticks.
    expect(adoptedProcs(procs).map((a) => a.pid)).toEqual([100, 101]);
  });

  it('procs.adopt judges each key once: a repeated entry is skipped, a key already running here is only logged, a differing pid is logged and ours kept', () => {
    const procs = createAgentProcs({ connectTimeoutTicks: TICKS, recovered: [{ task: 't1', vpid: 0, pid: 100 }] });
    const fresh = of(commandProcs(procs, spawnCmd({ task: 't7' })), 'spawn')[0];
    onProcOs(procs, fresh?.ref as ProcRef, { type: 'os.spawned', pid: 700 });
    const out = commandProcs(procs, {
      type: 'procs.adopt',
      procs: [
        { task: 't1', vpid: 0, pid: 99, linked: false },
        { task: 't1', vpid: 0, pid: 99, linked: false },
        { task: 't7', vpid: 0, pid: 700, linked: false },
      ],
    }, [{ task: 't1', vpid: 0, pid: 100, alive: true }]);
    expect(reports(out)).toEqual([]);
    expect(kills(out)).toEqual([]);
    expect(of(out, 'log').map((l) => l.event)).toEqual(['proc.adopted', 'proc.adopted.pid-differs', 'procs.adopt.known']);
    expect(of(out, 'log')[1]?.fields).toEqual({ task: 't1', vpid: 0, pid: 100, groupPid: 99 });
    expect(adoptedProcs(procs).map((a) => a.pid)).toEqual([100]);
    expect(procRecords(procs)).toEqual([{ task: 't1', vpid: 0, pid: 100 }, { task: 't7', vpid: 0, pid: 700 }]);
  });

  it('a linked process alive whose start the group never heard of (pid 0) is reported running, then killed', () => {
    const procs = createAgentProcs({ connectTimeoutTicks: TICKS, recovered: [{ task: 't1', vpid: 0, pid: 100 }] });
    const out = commandProcs(procs, { type: 'procs.adopt', procs: [{ task: 't1', vpid: 0, pid: 0, linked: true }] }, [{ task: 't1', vpid: 0, pid: 100, alive: true }]);
    expect(reports(out)).toMatchObject([{ kind: 'spawnSucceeded', pid: 100 }]);
    expect(kills(out)).toEqual([{ pid: 100, signal: 'SIGKILL', child: false }]);
    // Its kill is already the last word: a terminate now is a SIGKILL again, never a SIGTERM.
    expect(kills(commandProcs(procs, terminate('t1', 0)))).toEqual([{ pid: 100, signal: 'SIGKILL', child: false }]);
  });

  it('a proc.spawn for an adopted key is a duplicate; a second procs.adopt changes nothing', () => {
    const { procs } = adopted();
    expect(of(commandProcs(procs, spawnCmd()), 'spawn')).toEqual([]);
    const again = commandProcs(procs, ADOPT, local);
    expect(reports(again)).toEqual([]);
    expect(kills(again)).toEqual([]);
    expect(of(again, 'log')).toMatchObject([{ event: 'procs.adopt.again' }]);
  });

  it('a fresh agent with no records: every listed process is reported dead, nothing is killed', () => {
    const procs = createAgentProcs({ connectTimeoutTicks: TICKS });
    const effects = commandProcs(procs, ADOPT, []);
    expect(reports(effects).map((r) => `${r.task}/${r.vpid} ${r.kind}`)).toEqual([
      't1/0 terminatedAbnormally', 't1/1 spawnFailed', 't2/0 terminatedAbnormally', 't4/0 spawnFailed', 't5/0 terminatedAbnormally',
    ]);
    expect(kills(effects)).toEqual([]);
    expect(procs.entries.size).toBe(0);
  });
});

it('commands that are not about processes are ignored', () => {
  const procs = createAgentProcs({ connectTimeoutTicks: TICKS });
  expect(commandProcs(procs, { type: 'echo.reply', origin: 'a1', tag: 'x', rsn: 1, index: 0, data: new Uint8Array() }).filter((e) => e.type !== 'records')).toEqual([]);
});
