// The real Spawner (src/io/spawner.ts) passes the shared Spawner contract with real processes:
// /bin/sh one-liners, so it stays fast. Every process group a test started is killed afterwards.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, vi } from 'vitest';
import type { Spawner } from '../../src/core/ports.ts';
import { ChildProcessSpawner } from '../../src/io/spawner.ts';
import { spawnerContract, type SpawnerRig } from '../unit/io/spawner-contract.ts';

const WAIT = { timeout: 30_000, interval: 5 };

spawnerContract('node:child_process', (): SpawnerRig => {
  const dir = mkdtempSync(join(tmpdir(), 'trine-spawner-contract-'));
  const real = new ChildProcessSpawner();
  /** Every pid os.spawned reported, so close() can kill its group. */
  const started: number[] = [];
  const spawner: Spawner = {
    spawnProcess: (spec, on) => real.spawnProcess(spec, (e) => {
      if (e.type === 'os.spawned') started.push(e.pid);
      on(e);
    }),
    killProcess: (pid, signal) => real.killProcess(pid, signal),
  };
  const until = async (done: () => boolean): Promise<void> => {
    await vi.waitFor(() => expect(done()).toBe(true), WAIT);
  };
  return {
    spawner,
    exits: (code) => ({ file: '/bin/sh', args: ['-c', `exit ${code}`] }),
    runs: () => ({ file: '/bin/sh', args: ['-c', 'exec sleep 60'] }),
    missing: () => ({ file: join(dir, 'no-such-program'), args: [] }),
    spec: (program, vpid) => ({ ...program, vpid, taskId: 't1', cwd: dir, env: {}, logDir: join(dir, 'logs') }),
    until,
    settle: async () => {
      // A further process's exit is a barrier: by then any earlier handle has long closed.
      let done = false;
      real.spawnProcess({ file: '/bin/sh', args: ['-c', 'exit 0'], vpid: 999, taskId: 'barrier', cwd: dir, env: {}, logDir: join(dir, 'logs') }, (e) => {
        if (e.type === 'os.spawned') started.push(e.pid);
        else done = true;
      });
      await until(() => done);
      await new Promise((r) => setImmediate(r));
    },
    close: async () => {
      for (const pid of started.splice(0)) {
        try {
          process.kill(-pid, 'SIGKILL');
        } catch {
          // ESRCH: the group is already gone
        }
      }
      await until(() => real.trackedCount === 0);
      rmSync(dir, { recursive: true, force: true });
    },
  };
});
