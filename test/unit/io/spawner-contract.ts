// The shared contract every Spawner passes (STYLE.md 3): what a caller — FsmAgentProc's driver —
// observes, whatever runs the processes. Run against the real one over node:child_process
// (test/integration/spawner-contract.test.ts) and the simulator's twin (test/sim/sim-spawner.test.ts).
// Not a test file itself; a *.test.ts calls spawnerContract with a rig per test.
//
// What the contract does NOT cover, because only one implementation can express it (each has its
// own tests for it): log files, cwd, environment, the task user and process groups (real only,
// test/integration/spawner.test.ts); a SIGTERM-ignoring program, agent death and power-off
// (simulator only). The pid spawnProcess returns is not compared across implementations: the real
// one returns it (fork is synchronous), the simulated fork happens later and returns null; the
// contract asserts only that a returned pid is the one os.spawned reports.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { SpawnSpec, Spawner, SpawnerEvent } from '../../../src/core/ports.ts';

export type Program = Pick<SpawnSpec, 'file' | 'args'>;

export type SpawnerRig = {
  spawner: Spawner;
  /** A program that exits by itself, soon, with `code`. */
  exits(code: number): Program;
  /** A program that runs until a signal ends it (it does not ignore SIGTERM). */
  runs(): Program;
  /** A program that does not exist. */
  missing(): Program;
  /** The rest of a spec (vpid, task, cwd, env, logDir). */
  spec(program: Program, vpid: number): SpawnSpec;
  /** Lets the world run (wall clock or simulated clock) until `done()`; throws if it never does. */
  until(done: () => boolean): Promise<void>;
  /** Lets everything already under way happen, so a late or duplicate event would show. */
  settle(): Promise<void>;
  /** Ends whatever still runs and releases the rig. */
  close(): Promise<void>;
};

type Run = { events: SpawnerEvent[]; returned: number | null; syncEvents: number };

export function spawnerContract(name: string, make: () => SpawnerRig): void {
  describe(`Spawner contract: ${name}`, () => {
    let rig: SpawnerRig;
    beforeEach(() => {
      rig = make();
    });
    afterEach(async () => {
      await rig.close();
    });

    const start = (program: Program, vpid = 0): Run => {
      const run: Run = { events: [], returned: null, syncEvents: 0 };
      run.returned = rig.spawner.spawnProcess(rig.spec(program, vpid), (e) => run.events.push(e));
      run.syncEvents = run.events.length;
      return run;
    };
    const ended = (run: Run): boolean => run.events.some((e) => e.type !== 'os.spawned');
    const pidOf = (run: Run): number => {
      const first = run.events[0];
      if (first?.type !== 'os.spawned') throw new Error(`first event is ${JSON.stringify(first)}`);
      return first.pid;
    };

    for (const code of [0, 3]) {
      it(`a process that exits with ${code}: os.spawned with a pid, then exactly one os.exited { code: ${code}, signal: null }`, async () => {
        const run = start(rig.exits(code));
        await rig.until(() => ended(run));
        await rig.settle();
        const pid = pidOf(run);
        expect(Number.isSafeInteger(pid) && pid > 0).toBe(true);
        if (run.returned !== null) expect(run.returned).toBe(pid);
        expect(run.events).toEqual([{ type: 'os.spawned', pid }, { type: 'os.exited', code, signal: null }]);
      });
    }

    it('never calls back from within spawnProcess (the FSM driver is mid-step when it calls)', async () => {
      const runs = [start(rig.exits(0), 0), start(rig.missing(), 1)];
      for (const run of runs) expect(run.syncEvents).toBe(0);
      await rig.until(() => runs.every(ended));
    });

    for (const signal of ['SIGTERM', 'SIGKILL'] as const) {
      it(`killProcess(pid, ${signal}) ends a running process: exactly one os.exited { code: null, signal: ${signal} }`, async () => {
        const run = start(rig.runs());
        await rig.until(() => run.events.length > 0);
        const pid = pidOf(run);
        expect(ended(run)).toBe(false);
        rig.spawner.killProcess(pid, signal);
        await rig.until(() => ended(run));
        await rig.settle();
        expect(run.events).toEqual([{ type: 'os.spawned', pid }, { type: 'os.exited', code: null, signal }]);
      });
    }

    it('a missing program: exactly one os.forkFailed "spawn failed: ENOENT …", never os.spawned', async () => {
      const run = start(rig.missing());
      await rig.until(() => ended(run));
      await rig.settle();
      expect(run.returned).toBe(null);
      expect(run.events).toHaveLength(1);
      const only = run.events[0];
      expect(only?.type).toBe('os.forkFailed');
      if (only?.type === 'os.forkFailed') expect(only.error).toMatch(/^spawn failed: ENOENT /);
    });

    it('killing a process that has already exited does nothing: no throw, no event', async () => {
      const run = start(rig.exits(0));
      await rig.until(() => ended(run));
      const before = run.events.length;
      expect(() => rig.spawner.killProcess(pidOf(run), 'SIGKILL')).not.toThrow();
      await rig.settle();
      expect(run.events).toHaveLength(before);
    });

    it('two processes get two pids, and each is told only about its own', async () => {
      const a = start(rig.runs(), 0);
      const b = start(rig.exits(5), 1);
      await rig.until(() => a.events.length > 0 && ended(b));
      expect(pidOf(a)).not.toBe(pidOf(b));
      expect(ended(a)).toBe(false);
      rig.spawner.killProcess(pidOf(a), 'SIGKILL');
      await rig.until(() => ended(a));
      await rig.settle();
      expect(a.events).toEqual([{ type: 'os.spawned', pid: pidOf(a) }, { type: 'os.exited', code: null, signal: 'SIGKILL' }]);
      expect(b.events).toEqual([{ type: 'os.spawned', pid: pidOf(b) }, { type: 'os.exited', code: 5, signal: null }]);
    });
  });
}
