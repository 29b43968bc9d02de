// FsmAgentProc (spec §6.3, Table 4.6; fsm/fsm-agent-proc.ts A1–A18): one named test per
// transition, the connect timeout in ticks, the normal/abnormal rule, ignored events, exactly one
// report on every path to Dead, and plain-data determinism. Pure transition() only.
import { describe, expect, it } from 'vitest';
import { initialTransition, transition } from 'xstate';
import {
  classifyExit,
  fsmAgentProc,
  LINK_FIX,
  type FsmAgentProcEvent,
  type FsmAgentProcState,
  type SpawnCommand,
} from '../../../fsm/fsm-agent-proc.ts';
import { initialStep, step, type MachineAction, type MachineData } from '../../../fsm/plain-data.ts';

const TIMEOUT = 3;
const INPUT = { vpid: 5, connectTimeoutTicks: TIMEOUT };
const COMMAND: SpawnCommand = {
  taskId: 't1',
  file: '/usr/bin/app',
  args: ['--x', '1'],
  cwd: '/tmp/t1',
  env: { B: '2', A: '1' },
  taskSize: 2,
  restarted: false,
  endpoints: [{ vpid: 5, node: 'n1' }, { vpid: 6, node: 'n2' }],
};

const ev = {
  spawn: { type: 'cm.spawn', command: COMMAND },
  terminate: { type: 'cm.terminate' },
  forkFailed: { type: 'os.forkFailed', error: 'spawn failed: ENOENT /no/such/file' },
  spawned: { type: 'os.spawned', pid: 900 },
  connected: { type: 'os.connected' },
  disconnected: { type: 'os.disconnected' },
  exit0: { type: 'os.exited', code: 0, signal: null },
  exit1: { type: 'os.exited', code: 1, signal: null },
  killed: { type: 'os.exited', code: null, signal: 'SIGKILL' },
  tick: { type: 'clock.tick' },
} as const satisfies Record<string, FsmAgentProcEvent>;

const ALL_EVENTS: FsmAgentProcEvent[] = Object.values(ev);

const PATH: Record<FsmAgentProcState, FsmAgentProcEvent[]> = {
  idle: [],
  spawning: [ev.spawn, ev.spawned],
  aborting: [ev.spawn, ev.spawned, ev.terminate],
  running: [ev.spawn, ev.spawned, ev.connected],
  terminating: [ev.spawn, ev.spawned, ev.connected, ev.terminate],
  dead: [ev.spawn, ev.spawned, ev.connected, ev.killed],
};

/** Which event types each state (as reached by PATH) accepts; the rest must be ignored. */
const ACCEPTS: Record<FsmAgentProcState, FsmAgentProcEvent['type'][]> = {
  idle: ['cm.spawn'],
  spawning: ['os.connected', 'os.forkFailed', 'os.exited', 'clock.tick', 'cm.terminate'], // pid already set: os.spawned ignored
  aborting: ['os.exited', 'os.forkFailed', 'cm.terminate'], // pid already set: os.spawned ignored
  running: ['os.disconnected', 'os.exited', 'cm.terminate'],
  terminating: ['os.disconnected', 'os.exited', 'cm.terminate'],
  dead: [],
};

function run(events: readonly FsmAgentProcEvent[], from?: MachineData, input = INPUT): { data: MachineData; actions: MachineAction[] } {
  let data = from ?? initialStep(fsmAgentProc, input).data;
  const actions: MachineAction[] = [];
  for (const e of events) {
    const r = step(fsmAgentProc, data, e);
    data = r.data;
    actions.push(...r.actions);
  }
  return { data, actions };
}

const at = (state: FsmAgentProcState): MachineData => run(PATH[state]).data;
const ctx = (d: MachineData) => d.context as Record<string, unknown>;

const report = (params: Record<string, unknown>) => ({ type: 'report', params: { vpid: 5, ...params } });
const destroyPipes = { type: 'destroyPipes', params: { vpid: 5 } };
const killWith = (signal: string, pid: number | null = 900) => ({ type: 'killProcess', params: { vpid: 5, pid, signal } });

function expectStep(from: MachineData, event: FsmAgentProcEvent, to: FsmAgentProcState) {
  const r = step(fsmAgentProc, from, event);
  expect(r.data.value).toBe(to);
  return r;
}

describe('FsmAgentProc transitions (spec §6.3)', () => {
  it('§6.3 initial: Idle, connect countdown at its limit, no action', () => {
    const r = initialStep(fsmAgentProc, INPUT);
    expect(r.data.value).toBe('idle');
    expect(ctx(r.data)).toMatchObject({ vpid: 5, connectTimeoutTicks: TIMEOUT, ticksLeft: TIMEOUT, pid: null, command: null, result: null });
    expect(r.actions).toEqual([]);
  });

  it('§6.3 A1: Idle --cm.spawn--> Spawning creates pipes and forks/execs the command', () => {
    const r = expectStep(at('idle'), ev.spawn, 'spawning');
    expect(r.actions).toEqual([
      { type: 'spawnProcess', params: { vpid: 5, taskId: 't1', file: '/usr/bin/app', args: ['--x', '1'], cwd: '/tmp/t1', env: { A: '1', B: '2' } } },
    ]);
    expect(ctx(r.data).command).toEqual(COMMAND);
  });

  it('§6.3 A2: Spawning --os.spawned--> Spawning records the pid, no action', () => {
    const r = expectStep(run([ev.spawn]).data, ev.spawned, 'spawning');
    expect(ctx(r.data).pid).toBe(900);
    expect(r.actions).toEqual([]);
  });

  it('§6.3 A3: Spawning --os.connected (Process-connect)--> Running sends the mapping, reports Spawn succeeded', () => {
    const r = expectStep(at('spawning'), ev.connected, 'running');
    expect(r.actions).toEqual([
      { type: 'sendMapping', params: { vpid: 5, taskId: 't1', taskSize: 2, restarted: false, endpoints: COMMAND.endpoints } },
      report({ kind: 'spawnSucceeded', pid: 900 }),
    ]);
  });

  it('§6.3 A3 guard: a connect before os.spawned is ignored (the connect timeout reclaims it)', () => {
    const before = run([ev.spawn]).data;
    const r = step(fsmAgentProc, before, ev.connected);
    expect(r.data).toEqual(before);
    expect(r.actions).toEqual([]);
  });

  it('§6.3 A4: Spawning --os.forkFailed (Fork-exec failure)--> Dead: destroy pipes, report Spawn failed [INTERP]', () => {
    const r = expectStep(run([ev.spawn]).data, ev.forkFailed, 'dead');
    expect(r.actions).toEqual([destroyPipes, report({ kind: 'spawnFailed', reason: 'spawn failed: ENOENT /no/such/file' })]);
  });

  it('§6.3 A5: Spawning --os.exited--> Dead: exiting before connecting is Spawn failed [SRC-ISSUE]', () => {
    const r = expectStep(at('spawning'), ev.exit0, 'dead');
    expect(r.actions).toEqual([destroyPipes, report({ kind: 'spawnFailed', reason: 'exited before connecting (code 0)' })]);
    const s = expectStep(at('spawning'), ev.killed, 'dead');
    expect(s.actions[1]).toEqual(report({ kind: 'spawnFailed', reason: 'exited before connecting (signal SIGKILL)' }));
  });

  it('§6.3 A6: Spawning --clock.tick--> Spawning counts one tick down, no action', () => {
    const r = expectStep(at('spawning'), ev.tick, 'spawning');
    expect(ctx(r.data).ticksLeft).toBe(TIMEOUT - 1);
    expect(r.actions).toEqual([]);
  });

  it('§6.3 A7: Spawning --Nth clock.tick--> Aborting kills the unconnected process with SIGKILL [SRC-ISSUE]', () => {
    const r = run([ev.spawn, ev.spawned, ev.tick, ev.tick, ev.tick]);
    expect(r.data.value).toBe('aborting');
    expect(r.actions).toEqual([expect.objectContaining({ type: 'spawnProcess' }), killWith('SIGKILL')]);
    expect(ctx(r.data).reason).toBe(`never linked: no connection to its agent within ${TIMEOUT} ticks: ${LINK_FIX}`);
  });

  it('§6.3 A8: Spawning --cm.terminate--> Aborting kills with SIGKILL, no report yet', () => {
    const r = expectStep(at('spawning'), ev.terminate, 'aborting');
    expect(r.actions).toEqual([killWith('SIGKILL')]);
  });

  it('§6.3 A9: Aborting --os.exited--> Dead reports Spawn failed with the abort reason', () => {
    const r = expectStep(at('aborting'), ev.killed, 'dead');
    expect(r.actions).toEqual([destroyPipes, report({ kind: 'spawnFailed', reason: 'terminated before connecting' })]);
    const timedOut = run([ev.spawn, ev.spawned, ev.tick, ev.tick, ev.tick]).data;
    expect(expectStep(timedOut, ev.killed, 'dead').actions[1]).toEqual(report({ kind: 'spawnFailed', reason: `never linked: no connection to its agent within ${TIMEOUT} ticks: ${LINK_FIX}` }));
  });

  it('§6.3 A10: Aborting --os.forkFailed--> Dead reports Spawn failed with the OS error', () => {
    const r = expectStep(run([ev.spawn, ev.terminate]).data, ev.forkFailed, 'dead');
    expect(r.actions).toEqual([destroyPipes, report({ kind: 'spawnFailed', reason: 'spawn failed: ENOENT /no/such/file' })]);
  });

  it('§6.3 A11: Aborting --cm.terminate--> Aborting kills again (re-sent Terminate)', () => {
    const before = at('aborting');
    const r = step(fsmAgentProc, before, ev.terminate);
    expect(r.data).toEqual(before);
    expect(r.actions).toEqual([killWith('SIGKILL')]);
  });

  it('§6.3 A12: Aborting --os.spawned--> Aborting records the pid of a process killed mid-spawn', () => {
    const r = expectStep(run([ev.spawn, ev.terminate]).data, ev.spawned, 'aborting');
    expect(ctx(r.data).pid).toBe(900);
    expect(r.actions).toEqual([]);
  });

  it('§6.3 A2, A12: os.spawned arrives at most once; a second one, with another pid, changes nothing (Spawning and Aborting)', () => {
    const other = { type: 'os.spawned', pid: 901 } as const;
    for (const [state, path] of [['spawning', [ev.spawn, ev.spawned]], ['aborting', [ev.spawn, ev.spawned, ev.terminate]]] as const) {
      const r = expectStep(run(path).data, other, state);
      expect(ctx(r.data).pid, state).toBe(900);
      expect(r.actions, state).toEqual([]);
    }
    // The kill of a killed-mid-spawn process names the pid the OS gave first.
    expect(run([ev.spawn, ev.terminate, ev.spawned, other, ev.terminate]).actions.at(-1)).toEqual(killWith('SIGKILL', 900));
  });

  it('§6.3 A13: Running --os.disconnected--> Running records the clean disconnect, no report yet', () => {
    const r = expectStep(at('running'), ev.disconnected, 'running');
    expect(ctx(r.data).disconnected).toBe(true);
    expect(r.actions).toEqual([]);
  });

  it('§6.3 A14: Running --os.exited--> Dead: disconnect then exit 0 reports Terminated normally', () => {
    const r = expectStep(run([...PATH.running, ev.disconnected]).data, ev.exit0, 'dead');
    expect(r.actions).toEqual([destroyPipes, report({ kind: 'terminatedNormally', exitCode: 0 })]);
  });

  it('§6.3 A14: Running --os.exited--> Dead: exit without disconnect (Process-nonexistent) reports Terminated abnormally', () => {
    const r = expectStep(at('running'), ev.exit0, 'dead');
    expect(r.actions).toEqual([destroyPipes, report({ kind: 'terminatedAbnormally', exitCode: 0, signal: null, reason: 'exited without disconnecting' })]);
  });

  it('§6.3 A15: Running --cm.terminate--> Terminating sends SIGTERM', () => {
    const r = expectStep(at('running'), ev.terminate, 'terminating');
    expect(r.actions).toEqual([killWith('SIGTERM')]);
  });

  it('§6.3 A16: Terminating --os.disconnected--> Terminating records the clean disconnect', () => {
    const r = expectStep(at('terminating'), ev.disconnected, 'terminating');
    expect(ctx(r.data).disconnected).toBe(true);
    expect(r.actions).toEqual([]);
  });

  it('§6.3 A17: Terminating --os.exited--> Dead: clean disconnect + exit 0 is normal, a signal is abnormal', () => {
    const clean = expectStep(run([...PATH.terminating, ev.disconnected]).data, ev.exit0, 'dead');
    expect(clean.actions).toEqual([destroyPipes, report({ kind: 'terminatedNormally', exitCode: 0 })]);
    const killed = expectStep(at('terminating'), { type: 'os.exited', code: null, signal: 'SIGTERM' }, 'dead');
    expect(killed.actions).toEqual([destroyPipes, report({ kind: 'terminatedAbnormally', exitCode: null, signal: 'SIGTERM', reason: 'killed by SIGTERM' })]);
  });

  it('§6.3 A18: Terminating --cm.terminate--> Terminating escalates to SIGKILL', () => {
    const before = at('terminating');
    const r = step(fsmAgentProc, before, ev.terminate);
    expect(r.data).toEqual(before);
    expect(r.actions).toEqual([killWith('SIGKILL')]);
  });
});

describe('connect timeout in ticks (spec §6.3 [SRC-ISSUE]: Spawn failed on no connect)', () => {
  for (const n of [1, 2, 5]) {
    it(`with connectTimeoutTicks = ${n} the kill comes on exactly tick ${n}`, () => {
      let data = run([ev.spawn, ev.spawned], undefined, { vpid: 5, connectTimeoutTicks: n }).data;
      for (let i = 1; i < n; i++) {
        const r = step(fsmAgentProc, data, ev.tick);
        expect(r.data.value).toBe('spawning');
        expect(r.actions).toEqual([]);
        data = r.data;
      }
      const last = step(fsmAgentProc, data, ev.tick);
      expect(last.data.value).toBe('aborting');
      expect(last.actions).toEqual([killWith('SIGKILL')]);
    });
  }

  it('a connect on the tick before the limit wins; later ticks do nothing', () => {
    const r = run([ev.spawn, ev.spawned, ev.tick, ev.tick, ev.connected, ev.tick, ev.tick, ev.tick]);
    expect(r.data.value).toBe('running');
    expect(r.actions.map((a) => a.type)).toEqual(['spawnProcess', 'sendMapping', 'report']);
  });

  it('ticks before cm.spawn do not count: the countdown starts at the spawn', () => {
    const r = run([ev.tick, ev.tick, ev.tick, ev.spawn, ev.spawned, ev.tick, ev.tick]);
    expect(r.data.value).toBe('spawning');
  });
});

describe('normal vs abnormal termination: the exact rule (spec §6.3, §7 items 6–7)', () => {
  const cases: Array<[boolean, number | null, string | null, string]> = [
    [true, 0, null, 'terminatedNormally'],
    [false, 0, null, 'terminatedAbnormally'],
    [true, 2, null, 'terminatedAbnormally'],
    [false, 2, null, 'terminatedAbnormally'],
    [true, null, 'SIGTERM', 'terminatedAbnormally'],
    [false, null, 'SIGKILL', 'terminatedAbnormally'],
  ];
  for (const [disconnected, code, signal, result] of cases) {
    it(`disconnected=${disconnected}, code=${code}, signal=${signal} → ${result}`, () => {
      expect(classifyExit(disconnected, { code, signal }).result).toBe(result);
    });
  }
});

describe('FsmAgentProc ignores events its state does not accept (spec §6.3)', () => {
  for (const state of Object.keys(PATH) as FsmAgentProcState[]) {
    const ignored = ALL_EVENTS.filter((e) => !ACCEPTS[state].includes(e.type));
    it(`${state}: ${[...new Set(ignored.map((e) => e.type))].join(', ')} leave the data unchanged, with no action`, () => {
      const before = at(state);
      const frozen = JSON.stringify(before);
      for (const e of ignored) {
        const r = step(fsmAgentProc, before, e);
        expect(JSON.stringify(r.data)).toBe(frozen);
        expect(r.actions).toEqual([]);
      }
    });
  }

  it('an ignored event returns the very same xstate snapshot (pure transition(), no throw)', () => {
    const [s0] = initialTransition(fsmAgentProc, INPUT);
    const [s1, actions] = transition(fsmAgentProc, s0, { type: 'os.exited', code: 1, signal: null });
    expect(s1).toBe(s0);
    expect(actions).toEqual([]);
  });
});

describe('every path to Dead reports exactly once (spec §6.3)', () => {
  it('exhaustively over all reachable states and events', () => {
    type Node = { data: MachineData; succeeded: number; terminal: string | null; pipes: number };
    const seen = new Set<string>();
    const queue: Node[] = [{ data: initialStep(fsmAgentProc, INPUT).data, succeeded: 0, terminal: null, pipes: 0 }];
    let deadPaths = 0;
    while (queue.length > 0) {
      const n = queue.shift() as Node;
      const key = JSON.stringify(n);
      if (seen.has(key)) continue;
      seen.add(key);
      if (n.data.value === 'dead') {
        deadPaths++;
        // One terminal report and one destroyPipes on reaching Dead; Spawn succeeded decides which kind.
        expect(n.terminal).not.toBeNull();
        expect(n.pipes).toBe(1);
        expect(n.terminal === 'spawnFailed').toBe(n.succeeded === 0);
      } else {
        expect(n.terminal).toBeNull();
        expect(n.pipes).toBe(0);
      }
      for (const e of ALL_EVENTS) {
        const r = step(fsmAgentProc, n.data, e);
        let { succeeded, terminal, pipes } = n;
        for (const a of r.actions) {
          if (a.type === 'destroyPipes') pipes++;
          if (a.type !== 'report') continue;
          const kind = (a.params as { kind: string }).kind;
          expect(terminal).toBeNull(); // nothing is reported after the terminal report
          if (kind === 'spawnSucceeded') succeeded++;
          else terminal = kind;
        }
        expect(succeeded).toBeLessThanOrEqual(1);
        queue.push({ data: r.data, succeeded, terminal, pipes });
      }
    }
    expect(deadPaths).toBeGreaterThan(5);
  });
});

describe('FsmAgentProc as plain data (DESIGN.md §3)', () => {
  const events: FsmAgentProcEvent[] = [ev.tick, ev.spawn, ev.tick, ev.spawned, ev.connected, ev.tick, ev.disconnected, ev.terminate, ev.terminate, ev.exit0, ev.exit1];

  it('the same events give the same JSON, actions included', () => {
    expect(JSON.stringify(run(events))).toBe(JSON.stringify(run(events)));
  });

  it('restoring from JSON at any point gives the same result as never stopping', () => {
    const whole = run(events);
    for (let cut = 0; cut <= events.length; cut++) {
      const first = run(events.slice(0, cut));
      const second = run(events.slice(cut), JSON.parse(JSON.stringify(first.data)) as MachineData);
      expect(JSON.stringify(second.data)).toBe(JSON.stringify(whole.data));
      expect([...first.actions, ...second.actions]).toEqual(whole.actions);
    }
  });
});
