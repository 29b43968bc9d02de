// The real Spawner (src/io/spawner.ts) with real processes (issue 3 item 2): it reports the
// os.* events FsmAgentProc consumes — os.spawned then exactly one os.exited with the exit code
// or signal, or exactly one os.forkFailed for a spawn that never ran — applies cwd, the explicit
// environment and args, appends stdout/stderr to per-process log files, and kills a whole process
// group; as root, it starts tasks as the unprivileged task user, who can read no 0600 file of
// root's and signal no root process (issue 13 item 6). Every test kills every process group it
// started (afterEach). No wall-clock threshold:
// tests wait for events, with the file's generous timeout.
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { classifyExit } from '../../fsm/fsm-agent-proc.ts';
import type { SpawnSpec, SpawnerEvent } from '../../src/core/ports.ts';
import { ChildProcessSpawner, lookupUser, processLogPaths } from '../../src/io/spawner.ts';

const NODE = process.execPath;
const WAIT = { timeout: 30_000, interval: 10 };

let dir: string;
let spawner: ChildProcessSpawner;
/** Every pid reported by os.spawned, so afterEach can kill its group. */
const started: number[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'trine-spawner-'));
  spawner = new ChildProcessSpawner();
});

afterEach(async () => {
  for (const pid of started.splice(0)) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // ESRCH: the group is already gone
    }
  }
  await vi.waitFor(() => expect(spawner.trackedCount).toBe(0), WAIT);
  rmSync(dir, { recursive: true, force: true });
});

function spec(over: Partial<SpawnSpec> & Pick<SpawnSpec, 'file' | 'args'>): SpawnSpec {
  return { vpid: 0, taskId: 't1', cwd: dir, env: {}, logDir: join(dir, 'logs'), ...over };
}

/** Starts a process; `events` collects everything reported, `ended` resolves on the terminal one. */
function start(s: SpawnSpec): { events: SpawnerEvent[]; ended: Promise<SpawnerEvent> } {
  const events: SpawnerEvent[] = [];
  let resolve: (e: SpawnerEvent) => void = () => {};
  const ended = new Promise<SpawnerEvent>((r) => (resolve = r));
  spawner.spawnProcess(s, (event) => {
    events.push(event);
    if (event.type === 'os.spawned') started.push(event.pid);
    else resolve(event);
  });
  return { events, ended };
}

const nodeScript = (script: string, over: Partial<SpawnSpec> = {}): SpawnSpec => spec({ file: NODE, args: ['-e', script], ...over });

/** Lets every already-queued OS event and callback run, so a late duplicate would show. */
async function settle(): Promise<void> {
  // A second process's exit is a barrier: by then the first one's handle has long closed.
  const barrier = start(spec({ file: '/bin/sh', args: ['-c', 'exit 0'], vpid: 999 }));
  await barrier.ended;
  await new Promise((r) => setImmediate(r));
}

/** The terminal events in `events`: there must be exactly one. */
const terminals = (events: SpawnerEvent[]) => events.filter((e) => e.type !== 'os.spawned');

function pidOf(events: SpawnerEvent[]): number {
  const first = events[0];
  if (first?.type !== 'os.spawned') throw new Error(`first event is ${JSON.stringify(first)}`);
  return first.pid;
}

function isGone(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

describe('Spawner: exits', () => {
  it('exit 0 → os.spawned {pid} then exactly one os.exited {code 0, signal null}', async () => {
    const p = start(nodeScript('process.exit(0)'));
    expect(p.events).toEqual([]); // never reported synchronously
    expect(await p.ended).toEqual({ type: 'os.exited', code: 0, signal: null });
    await settle();
    expect(p.events).toEqual([
      { type: 'os.spawned', pid: expect.any(Number) },
      { type: 'os.exited', code: 0, signal: null },
    ]);
    expect(spawner.trackedCount).toBe(0);
  });

  it('exit 3 → os.exited {code 3}; FsmAgentProc classifies it abnormal', async () => {
    const p = start(nodeScript('process.exit(3)'));
    const end = await p.ended;
    expect(end).toEqual({ type: 'os.exited', code: 3, signal: null });
    await settle();
    expect(p.events.map((e) => e.type)).toEqual(['os.spawned', 'os.exited']);
    if (end.type === 'os.exited') expect(classifyExit(true, end)).toEqual({ result: 'terminatedAbnormally', reason: 'exited with code 3' });
  });

  it('kill -9 of the process → os.exited {code null, signal SIGKILL}', async () => {
    const p = start(nodeScript('setInterval(() => {}, 1e9)'));
    await vi.waitFor(() => expect(p.events.length).toBeGreaterThan(0), WAIT);
    process.kill(pidOf(p.events), 'SIGKILL');
    const end = await p.ended;
    expect(end).toEqual({ type: 'os.exited', code: null, signal: 'SIGKILL' });
    await settle();
    expect(terminals(p.events)).toHaveLength(1);
    if (end.type === 'os.exited') expect(classifyExit(true, end).reason).toBe('killed by SIGKILL');
  });
});

describe('Spawner: killProcess', () => {
  it('SIGTERM reaches the whole process group, grandchild included', async () => {
    // The leader starts a grandchild in its group and prints its pid. On SIGTERM it does NOT
    // forward the signal: it only waits for the grandchild to die (it can only die of the
    // group's SIGTERM), reaps it, then exits with code 7 — so its own exit says "I got SIGTERM
    // and saw my grandchild die of it". (Re-raising SIGTERM on itself raced with Node removing
    // its signal watcher under load: it sometimes exited 0.) Reaping matters: this container's
    // PID 1 does not reap orphans, and a zombie still answers kill(pid, 0).
    const leader = `
      const { spawn } = require('node:child_process');
      const gc = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1e9)'], { stdio: 'ignore' });
      const done = () => process.exit(7);
      // Keeps the loop alive: when the grandchild dies of the group's SIGTERM first, the leader
      // would otherwise run out of handles and exit 0 before its own SIGTERM handler runs.
      setInterval(() => {}, 1e9);
      process.on('SIGTERM', () => { if (gc.exitCode !== null || gc.signalCode !== null) done(); else gc.on('exit', done); });
      gc.on('spawn', () => console.log(gc.pid));
    `;
    const s = nodeScript(leader, { taskId: 'group', vpid: 1 });
    const p = start(s);
    const out = processLogPaths(s.logDir, s.taskId, s.vpid).out;
    const grandchild = await vi.waitFor(() => {
      const pid = Number.parseInt(readFileSync(out, 'utf8'), 10);
      expect(pid).toBeGreaterThan(1);
      return pid;
    }, WAIT);
    expect(isGone(grandchild)).toBe(false);

    spawner.killProcess(pidOf(p.events), 'SIGTERM');
    expect(await p.ended).toEqual({ type: 'os.exited', code: 7, signal: null });
    await vi.waitFor(() => expect(isGone(grandchild)).toBe(true), WAIT);
    await settle();
    expect(terminals(p.events)).toHaveLength(1);
  });

  it('SIGKILL kills a process that ignores SIGTERM', async () => {
    const p = start(nodeScript(`process.on('SIGTERM', () => {}); console.log('ready'); setInterval(() => {}, 1e9)`));
    const s = processLogPaths(join(dir, 'logs'), 't1', 0);
    await vi.waitFor(() => expect(readFileSync(s.out, 'utf8')).toContain('ready'), WAIT);
    spawner.killProcess(pidOf(p.events), 'SIGTERM');
    spawner.killProcess(pidOf(p.events), 'SIGKILL');
    expect(await p.ended).toEqual({ type: 'os.exited', code: null, signal: 'SIGKILL' });
  });

  it('killing a group that is already gone is ignored (ESRCH); pid ≤ 1 is refused', async () => {
    const p = start(nodeScript('process.exit(0)'));
    await p.ended;
    expect(() => spawner.killProcess(pidOf(p.events), 'SIGKILL')).not.toThrow();
    expect(() => spawner.killProcess(1, 'SIGKILL')).toThrow(/invalid pid/);
    expect(() => spawner.killProcess(0, 'SIGKILL')).toThrow(/invalid pid/);
  });
});

describe('Spawner: output, cwd, env, args', () => {
  it('stdout and stderr are appended to <logDir>/<taskId>/<vpid>.out and .err', async () => {
    const s = nodeScript(`console.log('to-out ' + process.argv[1]); console.error('to-err')`, { taskId: 'task-7', vpid: 3 });
    s.args.push('first');
    await start(s).ended;
    const second = { ...s, args: [...s.args.slice(0, -1), 'second'] };
    await start(second).ended;
    const paths = processLogPaths(s.logDir, 'task-7', 3);
    expect(paths.out).toBe(join(dir, 'logs', 'task-7', '3.out'));
    expect(readFileSync(paths.out, 'utf8')).toBe('to-out first\nto-out second\n');
    expect(readFileSync(paths.err, 'utf8')).toBe('to-err\nto-err\n');
  });

  it('applies cwd and args, and an env of exactly spec.env plus the agent PATH', async () => {
    const work = mkdtempSync(join(dir, 'work-'));
    const s = spec({
      file: NODE,
      args: ['-e', 'console.log(JSON.stringify({ cwd: process.cwd(), env: process.env, argv: process.argv.slice(1) }))', 'a b', ''],
      cwd: work,
      env: { TRINE_TEST_VAR: 'x y', EMPTY: '' },
    });
    expect(await start(s).ended).toMatchObject({ type: 'os.exited', code: 0 });
    const seen = JSON.parse(readFileSync(processLogPaths(s.logDir, 't1', 0).out, 'utf8')) as {
      cwd: string;
      env: Record<string, string>;
      argv: string[];
    };
    expect(seen.cwd).toBe(work);
    expect(seen.argv).toEqual(['a b', '']);
    expect(seen.env).toEqual({ PATH: process.env['PATH'], TRINE_TEST_VAR: 'x y', EMPTY: '' });
  });

  it('a PATH in spec.env overrides the agent PATH and is used to find a bare command', async () => {
    const bin = mkdtempSync(join(dir, 'bin-'));
    writeFileSync(join(bin, 'hello-trine'), '#!/bin/sh\necho "hello $PATH"\n');
    chmodSync(join(bin, 'hello-trine'), 0o755);
    const s = spec({ file: 'hello-trine', args: [], env: { PATH: `${bin}:/usr/bin:/bin` } });
    expect(await start(s).ended).toMatchObject({ type: 'os.exited', code: 0 });
    expect(readFileSync(processLogPaths(s.logDir, 't1', 0).out, 'utf8')).toBe(`hello ${bin}:/usr/bin:/bin\n`);
  });
});

describe('Spawner: spawn failures → exactly one os.forkFailed, never os.exited', () => {
  async function expectForkFailed(s: SpawnSpec, pattern: RegExp): Promise<void> {
    const p = start(s);
    expect(p.events).toEqual([]);
    const end = await p.ended;
    await settle();
    expect(p.events).toEqual([end]);
    expect(end.type).toBe('os.forkFailed');
    if (end.type === 'os.forkFailed') expect(end.error).toMatch(pattern);
    expect(spawner.trackedCount).toBe(0);
  }

  it('a missing executable → ENOENT naming it', async () => {
    await expectForkFailed(spec({ file: '/no/such/file', args: [] }), /^spawn failed: ENOENT \/no\/such\/file\b/);
  });

  it('a bare command not on PATH → ENOENT', async () => {
    await expectForkFailed(spec({ file: 'no-such-command-trine', args: [] }), /^spawn failed: ENOENT no-such-command-trine\b/);
  });

  it('a file that is not executable → EACCES', async () => {
    const file = join(dir, 'not-executable.sh');
    writeFileSync(file, '#!/bin/sh\nexit 0\n');
    chmodSync(file, 0o644);
    await expectForkFailed(spec({ file, args: [] }), /^spawn failed: EACCES /);
  });

  it('a missing cwd → ENOENT naming the cwd, not the executable', async () => {
    await expectForkFailed(spec({ file: '/bin/sh', args: ['-c', 'exit 0'], cwd: join(dir, 'no-dir') }), /^spawn failed: ENOENT cwd .*no-dir/);
  });

  it('a cwd that is a file → ENOTDIR; a relative cwd → EINVAL', async () => {
    const file = join(dir, 'plain');
    writeFileSync(file, '');
    await expectForkFailed(spec({ file: '/bin/sh', args: [], cwd: file }), /^spawn failed: ENOTDIR cwd /);
    await expectForkFailed(spec({ file: '/bin/sh', args: [], cwd: 'relative/dir' }), /^spawn failed: EINVAL cwd /);
  });

  it('a task id that is not one path segment, a bad env key or a NUL in args → EINVAL', async () => {
    await expectForkFailed(spec({ file: '/bin/sh', args: [], taskId: '../escape' }), /^spawn failed: EINVAL task id/);
    await expectForkFailed(spec({ file: '/bin/sh', args: [], env: { 'A=B': 'x' } }), /^spawn failed: EINVAL environment/);
    await expectForkFailed(spec({ file: '/bin/sh', args: ['a\0b'] }), /^spawn failed: EINVAL an argument/);
  });

  it('an unusable log dir → forkFailed, and the process is not started', async () => {
    const blocker = join(dir, 'blocker');
    writeFileSync(blocker, '');
    await expectForkFailed(spec({ file: '/bin/sh', args: ['-c', 'exit 0'], logDir: blocker }), /^spawn failed: ENOTDIR cannot open log files/);
  });
});

describe('Spawner: many at once', () => {
  it('20 concurrent processes each report os.spawned then exactly one terminal event', async () => {
    const runs = Array.from({ length: 20 }, (_, i) =>
      start(i % 4 === 3 ? spec({ file: join(dir, 'missing'), args: [], vpid: i }) : nodeScript(`process.exit(${i % 4})`, { vpid: i })),
    );
    await Promise.all(runs.map((r) => r.ended));
    await settle();
    runs.forEach((r, i) => {
      if (i % 4 === 3) {
        expect(r.events.map((e) => e.type)).toEqual(['os.forkFailed']);
      } else {
        expect(r.events.map((e) => e.type)).toEqual(['os.spawned', 'os.exited']);
        expect(r.events[1]).toEqual({ type: 'os.exited', code: i % 4, signal: null });
      }
    });
    expect(spawner.trackedCount).toBe(0);
  });
});

// ---- the task user (issue 13 item 6; FAULT-MODEL "Tasks and Trine's secrets") ---------------------

const IS_ROOT = typeof process.getuid === 'function' && process.getuid() === 0;
const NOBODY = IS_ROOT ? lookupUser('nobody') : null;
if (!IS_ROOT) process.stdout.write('spawner.test.ts: the task-user tests are skipped: they need root (to start a task as another user)\n');
else if (NOBODY === null) process.stdout.write('spawner.test.ts: the task-user tests are skipped: this host has no user "nobody"\n');

describe.skipIf(!IS_ROOT || NOBODY === null)('Spawner: tasks run as the unprivileged task user', () => {
  /** Starts `s` with a spawner of its own for task user `user`; resolves on the terminal event. */
  function startAs(user: string, s: SpawnSpec): Promise<{ events: SpawnerEvent[]; end: SpawnerEvent }> {
    const own = new ChildProcessSpawner({ taskUser: user });
    const events: SpawnerEvent[] = [];
    return new Promise((resolve) => {
      own.spawnProcess(s, (event) => {
        events.push(event);
        if (event.type === 'os.spawned') started.push(event.pid);
        else resolve({ events, end: event });
      });
    });
  }

  it('runs as nobody: its uid, no group of ours; it cannot read a 0600 root file nor signal a root process; its output lands in .out', async () => {
    const work = mkdtempSync(join(dir, 'work-'));
    chmodSync(work, 0o755); // the task user must be able to enter its cwd
    const secret = join(work, 'op.json');
    writeFileSync(secret, '{"seed":"a fake private key"}\n', { mode: 0o600 });
    const script = `
      const fs = require('node:fs');
      const status = fs.readFileSync('/proc/self/status', 'utf8');
      const line = (k) => (status.split('\\n').find((l) => l.startsWith(k + ':')) ?? '').split(/\\s+/).slice(1).filter(Boolean);
      const attempt = (f) => { try { f(); return 'allowed'; } catch (e) { return e.code; } };
      console.log(JSON.stringify({
        uid: line('Uid'), gid: line('Gid'), groups: line('Groups'), capEff: line('CapEff')[0],
        read: attempt(() => fs.readFileSync(${JSON.stringify(secret)})),
        kill: attempt(() => process.kill(${process.pid}, 0)),
        cwd: process.cwd(),
      }));`;
    const s = nodeScript(script, { cwd: work });
    const { events, end } = await startAs('nobody', s);
    expect(events[0]?.type).toBe('os.spawned');
    expect(end).toMatchObject({ type: 'os.exited', code: 0 });
    const seen = JSON.parse(readFileSync(processLogPaths(s.logDir, 't1', 0).out, 'utf8')) as Record<string, unknown>;
    const uid = String(NOBODY?.uid);
    const gid = String(NOBODY?.gid);
    expect(seen).toEqual({
      uid: [uid, uid, uid, uid], gid: [gid, gid, gid, gid], groups: [], capEff: '0000000000000000',
      read: 'EACCES', kill: 'EPERM', cwd: work,
    });
    // The agent (root) made the log files; the task only wrote to the fds it was handed.
    expect(statSync(processLogPaths(s.logDir, 't1', 0).out).uid).toBe(0);
  });

  it('an unknown task user fails the spawn with TASK_USER_UNKNOWN; nothing runs', async () => {
    const { events, end } = await startAs('no-such-user-trine', nodeScript('process.exit(0)'));
    expect(events).toEqual([end]);
    expect(end.type === 'os.forkFailed' ? end.error : '').toMatch(/^spawn failed: TASK_USER_UNKNOWN the task user no-such-user-trine does not exist/);
  });

  it('a cwd the task user may not enter fails with EACCES naming the user (the spawn would enter it as root)', async () => {
    const closed = mkdtempSync(join(dir, 'closed-'));
    chmodSync(closed, 0o700);
    const { end } = await startAs('nobody', nodeScript('process.exit(0)', { cwd: closed }));
    expect(end.type === 'os.forkFailed' ? end.error : '').toMatch(/^spawn failed: EACCES cwd .*closed-.* task user nobody may not enter it/);
  });

  it('a task user that is the agent\'s own runs without switching', async () => {
    const s = nodeScript('console.log(process.getuid())');
    expect((await startAs('root', s)).end).toMatchObject({ type: 'os.exited', code: 0 });
    expect(readFileSync(processLogPaths(s.logDir, 't1', 0).out, 'utf8')).toBe('0\n');
  });

  it('an agent that is not root cannot start tasks as another user: TASK_USER_DENIED, nothing runs', async () => {
    // A spawner in a process of its own running as nobody, asked to start a task as root.
    const probe = join(dir, 'probe');
    mkdirSync(probe, { mode: 0o755 });
    const script = `
      import { ChildProcessSpawner } from ${JSON.stringify(new URL('../../src/io/spawner.ts', import.meta.url).href)};
      new ChildProcessSpawner({ taskUser: 'root' }).spawnProcess(
        { taskId: 't1', vpid: 0, file: '/bin/true', args: [], cwd: '/', env: {}, logDir: ${JSON.stringify(join(probe, 'logs'))} },
        (e) => console.log(JSON.stringify(e)));`;
    writeFileSync(join(probe, 'denied.mts'), script);
    chmodSync(dir, 0o755); // so nobody can read the probe script
    const repo = fileURLToPath(new URL('../..', import.meta.url)); // tsx resolves from here
    const s = spec({ file: NODE, args: ['--import', 'tsx', join(probe, 'denied.mts')], cwd: repo });
    const { end } = await startAs('nobody', s);
    const out = readFileSync(processLogPaths(s.logDir, 't1', 0).out, 'utf8');
    expect(end, readFileSync(processLogPaths(s.logDir, 't1', 0).err, 'utf8')).toMatchObject({ type: 'os.exited', code: 0 });
    const event = JSON.parse(out.trim()) as SpawnerEvent;
    expect(event.type).toBe('os.forkFailed');
    expect(event.type === 'os.forkFailed' ? event.error : '').toMatch(/^spawn failed: TASK_USER_DENIED the agent runs as uid \d+, not root, so it cannot start tasks as root/);
  });
});
