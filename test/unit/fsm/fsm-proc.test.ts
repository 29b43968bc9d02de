// FsmProc (spec §6.2, Table 4.5; fsm/fsm-proc.ts P1–P15): one named test per transition, ignored
// events, plain-data determinism, and FsmProc driven by FsmAgentProc's reports (spec §6.3).
// Machines are advanced only with xstate's pure transition(), through fsm/plain-data.ts.
import { describe, expect, it } from 'vitest';
import { initialTransition, transition } from 'xstate';
import { fsmAgentProc, LINK_FIX, type AgentProcReport, type FsmAgentProcEvent, type SpawnCommand } from '../../../fsm/fsm-agent-proc.ts';
import { fsmProc, FSM_PROC_FINAL_STATES, type FsmProcEvent, type FsmProcState } from '../../../fsm/fsm-proc.ts';
import { initialStep, step, type MachineAction, type MachineData } from '../../../fsm/plain-data.ts';

const INPUT = { taskId: 't1', vpid: 3 };

const ev = {
  allocated: { type: 'res.allocated', node: 'n1' },
  removed: { type: 'res.removed' },
  spawn: { type: 'task.spawn' },
  terminate: { type: 'task.terminate' },
  succeeded: { type: 'agent.spawnSucceeded', pid: 4242 },
  failed: { type: 'agent.spawnFailed', reason: 'spawn failed: ENOENT /no/such/file' },
  normal: { type: 'agent.terminatedNormally', exitCode: 0 },
  abnormal: { type: 'agent.terminatedAbnormally', exitCode: null, signal: 'SIGSEGV', reason: 'killed by SIGSEGV' },
} as const satisfies Record<string, FsmProcEvent>;

const ALL_EVENTS: FsmProcEvent[] = Object.values(ev);

/** The shortest event path from the initial state to each state. */
const PATH: Record<FsmProcState, FsmProcEvent[]> = {
  waitForResource: [],
  allocated: [ev.allocated],
  spawning: [ev.allocated, ev.spawn],
  running: [ev.allocated, ev.spawn, ev.succeeded],
  terminating: [ev.allocated, ev.spawn, ev.succeeded, ev.terminate],
  spawnFailed: [ev.allocated, ev.spawn, ev.failed],
  terminatedNormally: [ev.allocated, ev.spawn, ev.succeeded, ev.normal],
  terminatedAbnormally: [ev.allocated, ev.spawn, ev.succeeded, ev.abnormal],
};

/** Which events each state accepts (every other event must be ignored). */
const ACCEPTS: Record<FsmProcState, FsmProcEvent['type'][]> = {
  waitForResource: ['res.allocated', 'task.terminate'],
  allocated: ['task.spawn', 'res.removed', 'task.terminate'],
  spawning: ['agent.spawnSucceeded', 'agent.spawnFailed', 'res.removed', 'task.terminate'],
  running: ['task.terminate', 'agent.terminatedNormally', 'agent.terminatedAbnormally', 'res.removed'],
  terminating: ['agent.terminatedNormally', 'agent.terminatedAbnormally', 'res.removed', 'task.terminate', 'agent.spawnFailed', 'agent.spawnSucceeded'],
  spawnFailed: [],
  terminatedNormally: [],
  terminatedAbnormally: [],
};

function run(events: readonly FsmProcEvent[], from?: MachineData): { data: MachineData; actions: MachineAction[] } {
  let data = from ?? initialStep(fsmProc, INPUT).data;
  const actions: MachineAction[] = [];
  for (const e of events) {
    const r = step(fsmProc, data, e);
    data = r.data;
    actions.push(...r.actions);
  }
  return { data, actions };
}

const at = (state: FsmProcState): MachineData => run(PATH[state]).data;

/** Steps `state` by `event`, checks the new state value and returns the actions and context. */
function expectStep(state: FsmProcState, event: FsmProcEvent, to: FsmProcState) {
  const r = step(fsmProc, at(state), event);
  expect(r.data.value).toBe(to);
  return { actions: r.actions, context: r.data.context as Record<string, unknown> };
}

const reportTo = (state: FsmProcState) => ({ type: 'reportToTask', params: { taskId: 't1', vpid: 3, state } });
const commandAgent = (command: 'spawn' | 'terminate') => ({ type: 'commandAgent', params: { command, node: 'n1', taskId: 't1', vpid: 3 } });

describe('FsmProc transitions (spec §6.2)', () => {
  it('§6.2 initial: starts in Wait-for-resource with an empty record and no action', () => {
    const r = initialStep(fsmProc, INPUT);
    expect(r.data).toEqual({
      value: 'waitForResource',
      context: { taskId: 't1', vpid: 3, node: null, pid: null, exitCode: null, signal: null, reason: null },
    });
    expect(r.actions).toEqual([]);
  });

  it('§6.2 P1: Wait-for-resource --res.allocated--> Allocated records the node and reports', () => {
    const { actions, context } = expectStep('waitForResource', ev.allocated, 'allocated');
    expect(context.node).toBe('n1');
    expect(actions).toEqual([reportTo('allocated')]);
  });

  it('§6.2 P2: Allocated --task.spawn--> Spawning commands the Agent on that node to spawn', () => {
    const { actions } = expectStep('allocated', ev.spawn, 'spawning');
    expect(actions).toEqual([commandAgent('spawn'), reportTo('spawning')]);
  });

  it('§6.2 P3: Spawning --agent.spawnSucceeded--> Running records the pid', () => {
    const { actions, context } = expectStep('spawning', ev.succeeded, 'running');
    expect(context.pid).toBe(4242);
    expect(actions).toEqual([reportTo('running')]);
  });

  it('§6.2 P4: Spawning --agent.spawnFailed--> Spawn-failed (final) records the reason', () => {
    const r = step(fsmProc, at('spawning'), ev.failed);
    expect(r.data.value).toBe('spawnFailed');
    expect((r.data.context as { reason: string }).reason).toBe('spawn failed: ENOENT /no/such/file');
    expect(r.actions).toEqual([reportTo('spawnFailed')]);
    expect(fsmProc.resolveState(r.data as never).status).toBe('done');
  });

  it('§6.2 P5: Running --task.terminate--> Terminating commands the Agent to terminate', () => {
    const { actions } = expectStep('running', ev.terminate, 'terminating');
    expect(actions).toEqual([commandAgent('terminate'), reportTo('terminating')]);
  });

  it('§6.2 P6: Terminating --agent.terminatedNormally--> Terminated-normally records the exit code', () => {
    const { actions, context } = expectStep('terminating', ev.normal, 'terminatedNormally');
    expect(context.exitCode).toBe(0);
    expect(actions).toEqual([reportTo('terminatedNormally')]);
  });

  it('§6.2 P7: Terminating --agent.terminatedAbnormally--> Terminated-abnormally records signal and reason', () => {
    const { actions, context } = expectStep('terminating', ev.abnormal, 'terminatedAbnormally');
    expect(context).toMatchObject({ exitCode: null, signal: 'SIGSEGV', reason: 'killed by SIGSEGV', pid: 4242 });
    expect(actions).toEqual([reportTo('terminatedAbnormally')]);
  });

  it('§6.2 P8: Running --agent.terminatedNormally--> Terminated-normally without a command', () => {
    const { actions, context } = expectStep('running', ev.normal, 'terminatedNormally');
    expect(context.exitCode).toBe(0);
    expect(actions).toEqual([reportTo('terminatedNormally')]);
  });

  it('§6.2 P9: Running --agent.terminatedAbnormally--> Terminated-abnormally (a crash) records exit code', () => {
    const crash: FsmProcEvent = { type: 'agent.terminatedAbnormally', exitCode: 3, signal: null, reason: 'exited with code 3' };
    const { actions, context } = expectStep('running', crash, 'terminatedAbnormally');
    expect(context).toMatchObject({ exitCode: 3, signal: null, reason: 'exited with code 3' });
    expect(actions).toEqual([reportTo('terminatedAbnormally')]);
  });

  for (const from of ['allocated', 'spawning', 'running', 'terminating'] as const) {
    it(`§6.2 P10: ${from} --res.removed--> Terminated-abnormally with reason 'node lost' [INTERP]`, () => {
      const { actions, context } = expectStep(from, ev.removed, 'terminatedAbnormally');
      expect(context.reason).toBe('node lost');
      expect(actions).toEqual([reportTo('terminatedAbnormally')]);
    });
  }

  it('§6.2 P11: Spawning --task.terminate--> Terminating (FsmTask T5 abort) commands terminate', () => {
    const { actions } = expectStep('spawning', ev.terminate, 'terminating');
    expect(actions).toEqual([commandAgent('terminate'), reportTo('terminating')]);
  });

  it('§6.2 P12: Terminating --task.terminate--> Terminating re-sends terminate (FsmTask T17), no report', () => {
    const before = at('terminating');
    const r = step(fsmProc, before, ev.terminate);
    expect(r.data).toEqual(before);
    expect(r.actions).toEqual([commandAgent('terminate')]);
  });

  it('§6.2 P13: Terminating --agent.spawnFailed--> Spawn-failed (terminated before it connected)', () => {
    const terminatingUnspawned = run([ev.allocated, ev.spawn, ev.terminate]).data;
    const r = step(fsmProc, terminatingUnspawned, { type: 'agent.spawnFailed', reason: 'terminated before connecting' });
    expect(r.data.value).toBe('spawnFailed');
    expect((r.data.context as { reason: string }).reason).toBe('terminated before connecting');
    expect(r.actions).toEqual([reportTo('spawnFailed')]);
  });

  it('§6.2 P14: Terminating --agent.spawnSucceeded--> Terminating records the pid, no report', () => {
    const terminatingUnspawned = run([ev.allocated, ev.spawn, ev.terminate]).data;
    const r = step(fsmProc, terminatingUnspawned, { type: 'agent.spawnSucceeded', pid: 7 });
    expect(r.data.value).toBe('terminating');
    expect((r.data.context as { pid: number }).pid).toBe(7);
    expect(r.actions).toEqual([]);
  });

  for (const from of ['waitForResource', 'allocated'] as const) {
    it(`§6.2 P15: ${from} --task.terminate--> Terminated-normally without commanding any Agent`, () => {
      const { actions, context } = expectStep(from, ev.terminate, 'terminatedNormally');
      expect(context).toMatchObject({ reason: 'terminated before spawn', exitCode: null, pid: null });
      expect(actions).toEqual([reportTo('terminatedNormally')]);
    });
  }
});

describe('FsmProc ignores events its state does not accept (spec §6.2)', () => {
  for (const state of Object.keys(PATH) as FsmProcState[]) {
    const ignored = ALL_EVENTS.filter((e) => !ACCEPTS[state].includes(e.type));
    it(`${state}: ${ignored.map((e) => e.type).join(', ') || '(none)'} leave the data unchanged, with no action`, () => {
      const before = at(state);
      const frozen = JSON.stringify(before);
      for (const e of ignored) {
        const r = step(fsmProc, before, e);
        expect(JSON.stringify(r.data)).toBe(frozen);
        expect(r.actions).toEqual([]);
      }
      expect(JSON.stringify(before)).toBe(frozen);
    });
  }

  it('an ignored event returns the very same xstate snapshot (pure transition(), no throw)', () => {
    const [s0] = initialTransition(fsmProc, INPUT);
    const [s1, actions] = transition(fsmProc, s0, { type: 'agent.spawnSucceeded', pid: 1 });
    expect(s1).toBe(s0);
    expect(actions).toEqual([]);
  });

  it('the three final states are exactly those whose snapshot is done', () => {
    for (const state of Object.keys(PATH) as FsmProcState[]) {
      const done = fsmProc.resolveState(at(state) as never).status === 'done';
      expect(done).toBe(FSM_PROC_FINAL_STATES.includes(state));
    }
  });
});

describe('FsmProc as plain data (DESIGN.md §3)', () => {
  const events: FsmProcEvent[] = [ev.allocated, ev.removed, ev.spawn, ev.spawn, ev.succeeded, ev.terminate, ev.terminate, ev.abnormal, ev.normal];

  it('the same events give the same JSON, actions included', () => {
    const a = run(events);
    const b = run(events);
    expect(JSON.stringify(a)).toBe(JSON.stringify(b));
  });

  it('restoring from JSON at any point gives the same result as never stopping', () => {
    const whole = run(events);
    for (let cut = 0; cut <= events.length; cut++) {
      const first = run(events.slice(0, cut));
      const restored = JSON.parse(JSON.stringify(first.data)) as MachineData;
      const second = run(events.slice(cut), restored);
      expect(JSON.stringify(second.data)).toBe(JSON.stringify(whole.data));
      expect([...first.actions, ...second.actions]).toEqual(whole.actions);
    }
  });

  it('every reachable state reports each change once, ends at most once, and never commands without a node', () => {
    // Exhaustive walk of the reachable (state, history summary) space over every event.
    type Node = { data: MachineData; finals: number; spawns: number };
    const seen = new Set<string>();
    const queue: Node[] = [{ data: initialStep(fsmProc, INPUT).data, finals: 0, spawns: 0 }];
    let explored = 0;
    while (queue.length > 0) {
      const n = queue.shift() as Node;
      const key = JSON.stringify(n);
      if (seen.has(key)) continue;
      seen.add(key);
      explored++;
      for (const e of ALL_EVENTS) {
        const r = step(fsmProc, n.data, e);
        const reports = r.actions.filter((a) => a.type === 'reportToTask');
        const changed = r.data.value !== n.data.value;
        expect(reports).toHaveLength(changed ? 1 : 0);
        if (changed) expect((reports[0]?.params as { state: string }).state).toBe(r.data.value);
        const finals = n.finals + (changed && FSM_PROC_FINAL_STATES.includes(r.data.value as FsmProcState) ? 1 : 0);
        expect(finals).toBeLessThanOrEqual(1);
        const spawns = n.spawns + r.actions.filter((a) => a.type === 'commandAgent' && (a.params as { command: string }).command === 'spawn').length;
        expect(spawns).toBeLessThanOrEqual(1);
        for (const a of r.actions.filter((x) => x.type === 'commandAgent')) expect((a.params as { node: unknown }).node).toBe('n1');
        queue.push({ data: r.data, finals, spawns });
      }
    }
    expect(explored).toBeGreaterThan(8);
  });
});

// ---- FsmProc driven by FsmAgentProc (spec §6.2 inputs are §6.3 outputs) ----------------------

const SPAWN: SpawnCommand = {
  taskId: 't1', file: '/bin/app', args: [], cwd: '/', env: {}, taskSize: 1, restarted: false, endpoints: [{ vpid: 3, node: 'n1' }],
};

function reportEvent(r: AgentProcReport): FsmProcEvent {
  switch (r.kind) {
    case 'spawnSucceeded': return { type: 'agent.spawnSucceeded', pid: r.pid };
    case 'spawnFailed': return { type: 'agent.spawnFailed', reason: r.reason };
    case 'terminatedNormally': return { type: 'agent.terminatedNormally', exitCode: r.exitCode };
    case 'terminatedAbnormally': return { type: 'agent.terminatedAbnormally', exitCode: r.exitCode, signal: r.signal, reason: r.reason };
  }
}

/** A manager FsmProc and its Agent's FsmAgentProc, wired without a network: manager commands
 *  become cm.* events, Agent reports become agent.* events; `script` feeds FsmTask commands
 *  (task.*) and OS events (os.*, clock.tick). */
function pair(script: Array<FsmProcEvent | FsmAgentProcEvent>) {
  let proc = initialStep(fsmProc, INPUT).data;
  let agent = initialStep(fsmAgentProc, { vpid: 3, connectTimeoutTicks: 2 }).data;
  const reports: AgentProcReport[] = [];
  const toProc = (e: FsmProcEvent): void => {
    const r = step(fsmProc, proc, e);
    proc = r.data;
    for (const a of r.actions) {
      if (a.type !== 'commandAgent') continue;
      const c = (a.params as { command: 'spawn' | 'terminate' }).command;
      toAgent(c === 'spawn' ? { type: 'cm.spawn', command: SPAWN } : { type: 'cm.terminate' });
    }
  };
  const toAgent = (e: FsmAgentProcEvent): void => {
    const r = step(fsmAgentProc, agent, e);
    agent = r.data;
    for (const a of r.actions) {
      if (a.type !== 'report') continue;
      reports.push(a.params as AgentProcReport);
      toProc(reportEvent(a.params as AgentProcReport));
    }
  };
  for (const e of script) {
    if (e.type.startsWith('os.') || e.type.startsWith('clock.')) toAgent(e as FsmAgentProcEvent);
    else toProc(e as FsmProcEvent);
  }
  return { proc: proc.value, agent: agent.value, reports: reports.map((r) => r.kind), procContext: proc.context };
}

describe('FsmProc with FsmAgentProc (spec §6.2 × §6.3)', () => {
  const exit = (code: number | null, signal: string | null = null) => ({ type: 'os.exited' as const, code, signal });
  const spawned = { type: 'os.spawned' as const, pid: 4242 };

  it('normal run: spawn, connect, clean disconnect, exit 0 → Terminated-normally', () => {
    const r = pair([ev.allocated, ev.spawn, spawned, { type: 'os.connected' }, { type: 'os.disconnected' }, exit(0)]);
    expect(r).toMatchObject({ proc: 'terminatedNormally', agent: 'dead', reports: ['spawnSucceeded', 'terminatedNormally'] });
  });

  it('a crash (SIGKILL, no disconnect) → Terminated-abnormally with the signal', () => {
    const r = pair([ev.allocated, ev.spawn, spawned, { type: 'os.connected' }, exit(null, 'SIGKILL')]);
    expect(r).toMatchObject({ proc: 'terminatedAbnormally', reports: ['spawnSucceeded', 'terminatedAbnormally'] });
    expect(r.procContext).toMatchObject({ signal: 'SIGKILL', reason: 'killed by SIGKILL', pid: 4242 });
  });

  it('a missing executable → Spawn-failed with the OS error', () => {
    const r = pair([ev.allocated, ev.spawn, { type: 'os.forkFailed', error: 'spawn failed: ENOENT /no/such/file' }]);
    expect(r).toMatchObject({ proc: 'spawnFailed', agent: 'dead', reports: ['spawnFailed'] });
    expect(r.procContext).toMatchObject({ reason: 'spawn failed: ENOENT /no/such/file' });
  });

  it('no connection within the timeout → killed, then Spawn-failed', () => {
    const r = pair([ev.allocated, ev.spawn, spawned, { type: 'clock.tick' }, { type: 'clock.tick' }, exit(null, 'SIGKILL')]);
    expect(r).toMatchObject({ proc: 'spawnFailed', agent: 'dead', reports: ['spawnFailed'] });
    expect(r.procContext).toMatchObject({ reason: `never linked: no connection to its agent within 2 ticks: ${LINK_FIX}` });
  });

  it('terminated while spawning (FsmTask Start-TO) → Spawn-failed once the process is gone', () => {
    const r = pair([ev.allocated, ev.spawn, spawned, ev.terminate, exit(null, 'SIGKILL')]);
    expect(r).toMatchObject({ proc: 'spawnFailed', agent: 'dead', reports: ['spawnFailed'] });
  });

  it('terminated while running, process ends cleanly on SIGTERM → Terminated-normally', () => {
    const r = pair([ev.allocated, ev.spawn, spawned, { type: 'os.connected' }, ev.terminate, { type: 'os.disconnected' }, exit(0)]);
    expect(r).toMatchObject({ proc: 'terminatedNormally', agent: 'dead', reports: ['spawnSucceeded', 'terminatedNormally'] });
  });
});
