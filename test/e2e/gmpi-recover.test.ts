// G-MPI crash recovery on a real local cluster (spec §5.2, §5.4, §5.5; §9.2 A25 and A28): linked
// tasks of test/fixtures/apps/gmpi-recover-app.ts, one process killed with `kill -9` while
// every process is blocked in a receive. The receive fails with ERR_ALERT; the survivors see
// G_MPI_SIG_LOCAL_CONNECTION with the dead rank; they have the manager spawn a replacement and
// call recoverComm, whose barrier the new process joins from init (RECOVERED); allreduce over
// the new world gives the right answer. In A28 a second crash lands while the others wait for
// REP_SYNC: every caller (the spawned process's init included) gets ERR_ALERT, and the loop
// succeeds the next time. With a quorum below the membership, a survivor that calls
// recoverComm late builds the same communicator as the others.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GmpiCluster } from './gmpi-cluster.ts';

const APP = 'test/fixtures/apps/gmpi-recover-app.ts';
let cluster: GmpiCluster;
const taskPids: number[] = [];

beforeAll(async () => {
  cluster = await GmpiCluster.up('trine-gmpi-recover-');
}, 120_000);

afterAll(async () => {
  await cluster?.down(taskPids);
}, 60_000);

/** Wait until all of `vpids` block in their receive, then kill -9 `victim`. */
async function killWhenBlocked(id: string, vpids: readonly number[], victim: number): Promise<void> {
  await cluster.lineFromEach(id, vpids, /^blocked-in-recv$/, 80_000);
  const t = await cluster.task(id);
  for (const p of t.procs) if (p.pid !== null) taskPids.push(p.pid);
  const pid = t.procs.find((p) => p.vpid === victim)?.pid;
  expect(pid).toBeGreaterThan(1);
  process.kill(pid as number, 'SIGKILL');
}

describe('G-MPI recovery on a 4-node cluster', () => {
  it('A25: recv blocked when a peer is killed returns ERR_ALERT; SPAWN + recoverComm; the new process gets RECOVERED; allreduce over the new world', async () => {
    // vpid 1 calls recoverComm late: with quorum 3 the barrier may complete without it.
    const id = await cluster.start(APP, 4, { GMPI_QUORUM: '3', GMPI_LATE: '1' });
    const all = [0, 1, 2, 3];
    const survivors = [0, 1, 2];
    try {
      await killWhenBlocked(id, all, 3);
      // The quorum was set to n-1 first (spec §4.5: one fault tolerated).
      for (const v of all) expect(cluster.lines(id, v)).toContain('setquorum own-reply quorum=3');
      // The receive from any source, blocked when vpid 3 died, fails with ERR_ALERT once the
      // crash notification invalidates the communicator (spec §5.2).
      for (const line of await cluster.lineFromEach(id, survivors, /^recv rejected /)) {
        expect(line).toMatch(/^recv rejected ERR_ALERT cause=ABORTED invalid=true$/);
      }
      // LOCAL_CONNECTION names the dead peer's rank, as a local signal (spec §5.4 Table 4.3).
      await cluster.lineFromEach(id, survivors, /^local-connection rank=3 local=true$/);
      for (const v of survivors) expect(cluster.lines(id, v)).toContain('ntf-died rank=3 src=cm all=true');
      // The survivors' spawn request is performed and the survivors' recoverComm succeeds.
      for (const line of await cluster.lineFromEach(id, survivors, /^spawn /)) expect(line).toBe('spawn own-reply members=0,1,2,4');
      for (const v of survivors) {
        expect(await cluster.line(id, v, /^recover attempt=/)).toBe(`recover attempt=1 SUCCESS size=4 rank=${v}`);
      }
      const lateLog = cluster.lines(id, 1);
      const adopted = lateLog.indexOf('rep-sync') < lateLog.indexOf('recover-start attempt=1');
      console.log(`A25: the late survivor ${adopted ? 'adopted the barrier the others completed without it' : 'took part in the barrier'}`);
      // The new process (VPID 4) was spawned into the running task: init returns RECOVERED,
      // and it has the last rank of a world the same size as before.
      expect(await cluster.line(id, 4, /^init /)).toBe('init RECOVERED rank=3 size=4 vpid=4');
      for (const v of [...survivors, 4]) {
        expect(await cluster.line(id, v, /^allreduce /)).toMatch(/^allreduce sum=10 size=4 rank=\d members=0,1,2,4$/);
      }
      if (process.env.GMPI_DUMP) console.log(cluster.dump(id, [0, 1, 2, 3, 4]));
    } catch (e) {
      console.error(`${await cluster.describe(id)}\n${cluster.dump(id, [0, 1, 2, 3, 4])}`);
      throw e;
    }
  }, 120_000);

  it('A28: a crash while waiting for REP_SYNC makes recoverComm (and the spawned process\'s init) return ERR_ALERT; the loop succeeds next time', async () => {
    const id = await cluster.start(APP, 4, { GMPI_STRAGGLER: '2' });
    const vs = [0, 1, 2, 3, 4, 5];
    try {
      await killWhenBlocked(id, [0, 1, 2, 3], 3);
      // Crash 1 (vpid 3): spawn vpid 4. vpid 2 then straggles and dies (crash 2) while 0, 1
      // and the new 4 wait for REP_SYNC: the default quorum is every live member.
      await cluster.lineFromEach(id, [0, 1, 2], /^spawn own-reply members=0,1,2,4$/);
      expect(await cluster.line(id, 2, /^straggling$/)).toBe('straggling');
      for (const v of [0, 1]) {
        const first = await cluster.line(id, v, /^recover attempt=1 /);
        expect(first).toBe('recover attempt=1 ERR_ALERT');
        // It was the crash notification that ended the wait (not a timeout's ERR_DISAGREE).
        const log = cluster.lines(id, v);
        const start = log.indexOf('recover-start attempt=1');
        expect(start).toBeGreaterThanOrEqual(0);
        expect(log.slice(start, log.indexOf(first))).toContain('ntf-died rank=2 src=cm all=true');
        expect(log.slice(0, log.indexOf(first))).not.toContain('err-disagree');
      }
      // The spawned process's init is part of that failed barrier: ERR_ALERT, then it loops.
      expect(await cluster.line(id, 4, /^init /)).toBe('init ERR_ALERT rank=3 size=4 vpid=4');
      // Next time round a replacement for vpid 2 is spawned (vpid 5) and recovery succeeds.
      for (const v of [0, 1]) expect(await cluster.line(id, v, /^recover attempt=2 /)).toMatch(/^recover attempt=2 SUCCESS size=4 rank=\d$/);
      expect(await cluster.line(id, 4, /^recover attempt=1 /)).toBe('recover attempt=1 SUCCESS size=4 rank=2');
      expect(await cluster.line(id, 5, /^init /)).toBe('init RECOVERED rank=3 size=4 vpid=5');
      for (const v of [0, 1, 4, 5]) expect(await cluster.line(id, v, /^allreduce /)).toMatch(/^allreduce sum=10 size=4 rank=\d members=0,1,4,5$/);
      expect(cluster.lines(id, 2)).not.toContain('recover-start attempt=1');
      if (process.env.GMPI_DUMP) console.log(cluster.dump(id, vs));
    } catch (e) {
      console.error(`${await cluster.describe(id)}\n${cluster.dump(id, vs)}`);
      throw e;
    }
  }, 120_000);
});
