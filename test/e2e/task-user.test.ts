// Tasks cannot touch Trine's secrets (issue 13 item 6; FAULT-MODEL "Tasks and Trine's secrets")
// on a real local cluster started with TRINE_TASK_USER=nobody: a linked G-MPI task of four
// processes runs as nobody, reaches its agents' abstract sockets and gets its task key from them,
// forms its authenticated mesh and computes; it cannot list the cluster dir, read a key or signal
// an agent, and finds no secret in its environment. Needs root (skipped, saying so, otherwise).
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadCluster } from '../../src/io/cluster-dir.ts';
import { lookupUser } from '../../src/io/spawner.ts';
import { GmpiCluster } from './gmpi-cluster.ts';

const APP = 'test/fixtures/apps/task-user-app.ts';
const RANKS = [0, 1, 2, 3];
const IS_ROOT = typeof process.getuid === 'function' && process.getuid() === 0;
const NOBODY = IS_ROOT ? lookupUser('nobody') : null;
const RUN = NOBODY !== null;
if (!RUN) process.stdout.write('task-user.test.ts: skipped: starting tasks as another user needs root and a user "nobody"\n');

let cluster: GmpiCluster;
let id = '';

beforeAll(async () => {
  if (!RUN) return;
  process.env.TRINE_TASK_USER = 'nobody';
  try {
    cluster = await GmpiCluster.up('trine-task-user-');
  } finally {
    delete process.env.TRINE_TASK_USER;
  }
  id = await cluster.start(APP, 4, { TASK_USER_DIR: cluster.dir });
}, 180_000);

afterAll(async () => {
  if (id !== '' && cluster !== undefined && RANKS.some((v) => !cluster.lines(id, v).some((l) => l.startsWith('sum')))) {
    console.log(`${await cluster.describe(id)}\n${cluster.dump(id, RANKS)}`);
  }
  await cluster?.down();
}, 60_000);

describe.skipIf(!RUN)('a linked task on a cluster whose tasks run as nobody', () => {
  it('the cluster records the task user, and its dir, logs/, run/ and keys/ are 0700', () => {
    expect(loadCluster(cluster.dir).config.taskUser).toBe('nobody');
    for (const sub of ['', 'logs', 'run', 'keys']) expect(statSync(join(cluster.dir, sub)).mode & 0o777, sub).toBe(0o700);
  });

  it('every process runs as nobody and joins the G-MPI world through its agent\'s socket', async () => {
    const lines = await cluster.lineFromEach(id, RANKS, /^init /, 80_000);
    expect(lines).toEqual(RANKS.map((r) => `init SUCCESS rank=${r} uid=${NOBODY?.uid}`));
  }, 90_000);

  it('none can list the cluster dir, read a key or signal an agent; its environment holds no key', async () => {
    const lines = await cluster.lineFromEach(id, RANKS, /^reach /);
    for (const l of lines) {
      expect(l).toBe('reach dir=EACCES key=EACCES kill=EPERM env=TRINE_AGENT_SOCKET,TRINE_ENDPOINTS,TRINE_OWNER,TRINE_RANK,TRINE_RESTARTED,TRINE_SIZE,TRINE_TASK,TRINE_TOKEN,TRINE_VPID');
    }
  });

  it('the mesh, authenticated under the task key, carries an allreduce, and the task ends normally', async () => {
    expect(await cluster.lineFromEach(id, RANKS, /^sum /)).toEqual(RANKS.map(() => 'sum 6'));
    for (let i = 0; i < 100; i++) {
      const t = await cluster.task(id);
      if (t.outcome !== null) {
        expect(t.outcome).toBe('normal');
        return;
      }
      await new Promise((r) => setTimeout(r, 200));
    }
    throw new Error(`task ${id} did not end`);
  }, 60_000);

  it('the task key is in no view the operator sees', async () => {
    const ps = JSON.stringify(await cluster.task(id));
    expect(ps).not.toMatch(/key/i);
  });
});
