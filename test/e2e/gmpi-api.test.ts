// The G-MPI API on a real local cluster (spec §5.2–§5.4; §9.2 A26, A27, A29): one linked task of
// four processes (test/fixtures/apps/gmpi-api-app.ts) runs its phases in order and logs what it
// observes; each test below reads one phase. Handlers interrupt a blocked receive without
// unblocking it; critical sections queue signals and exitCs delivers them before returning; the
// task timer stops while the process is stopped and the wall timer does not; misuse is refused
// with typed errors and nothing sent; the alert flag, raised by an application broadcast,
// settles every kind of blocked call with ERR_ALERT and is visible to a loop that never yields.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GmpiCluster } from './gmpi-cluster.ts';

const APP = 'test/fixtures/apps/gmpi-api-app.ts';
const RANKS = [0, 1, 2, 3];
let cluster: GmpiCluster;
let id = '';

beforeAll(async () => {
  cluster = await GmpiCluster.up('trine-gmpi-api-');
  id = await cluster.start(APP, 4);
}, 120_000);

afterAll(async () => {
  if (id !== '' && cluster !== undefined) {
    const failed = RANKS.some((v) => cluster.lines(id, v).some((l) => l.startsWith('FAILED')) || !cluster.lines(id, v).includes('done'));
    if (failed || process.env.GMPI_DUMP) console.log(`${await cluster.describe(id)}\n${cluster.dump(id, RANKS)}`);
  }
  await cluster?.down();
}, 60_000);

/** A phase's line from `vpid`; the process's own FAILED line fails the test at once. */
async function line(vpid: number, re: RegExp, ms = 20_000): Promise<string> {
  const hit = await cluster.line(id, vpid, new RegExp(`${re.source}|^FAILED`), ms);
  expect(hit.startsWith('FAILED'), hit).toBe(false);
  return hit;
}

/** `key=value` pairs of a log line. */
const fields = (l: string): Record<string, string> => Object.fromEntries([...l.matchAll(/(\w+)=(\S*)/g)].map((m) => [m[1], m[2]]));

describe('the G-MPI API in a linked task on a 4-node cluster', () => {
  it('init: every process is in a world of 4', async () => {
    // The task's start (four node processes loading TypeScript) is slow on a loaded machine.
    for (const v of RANKS) expect(await line(v, /^init /, 80_000)).toBe(`init SUCCESS rank=${v}`);
  }, 90_000);

  it('A26: a signal arriving while recv is blocked runs its handler and the recv stays blocked until the message comes', async () => {
    const handler = fields(await line(1, /^A26 handler /));
    expect(handler).toEqual({ src: '0', arg: '42', recvPending: 'true', alert: 'false' });
    const recv = fields(await line(1, /^A26 recv /));
    expect(recv.data).toBe('hello');
    expect(recv.source).toBe('0');
    expect(recv.handlerFirst).toBe('true');
    // Rank 0 sent the message 200 ms after it heard from the handler.
    expect(Number(recv.blockedAfterHandlerMs)).toBeGreaterThanOrEqual(150);
  });

  it('A27: signals arriving inside enterCs/exitCs are queued and delivered, in order, before exitCs returns', async () => {
    // The section never yielded: nothing was delivered until exitCs, then all four in order.
    expect(await line(3, /^A27 sync /)).toBe('A27 sync before=0 after=1,2,3,0');
    // The section yielded while the signals arrived: queued, then delivered by exitCs.
    expect(await line(3, /^A27 async /)).toBe('A27 async queued=2 before=0 after=11,12');
  });

  it('A29: stopped for 500 ms, the wall timer fires on schedule and the task timer about 500 ms later', async () => {
    const f = fields(await line(3, /^A29 /));
    const [wall, task, stopped] = [Number(f.wall), Number(f.task), Number(f.stopped)];
    console.log(`A29: wall alarm at ${wall} ms, task alarm at ${task} ms (both set to 600 ms); stopped for ${stopped} ms`);
    expect(stopped).toBeGreaterThanOrEqual(400);
    expect(wall).toBeGreaterThanOrEqual(590);
    expect(wall).toBeLessThan(900);
    // Task time did not advance while stopped: the task alarm is late by about the stop.
    expect(task - wall).toBeGreaterThanOrEqual(stopped - 150);
    expect(task - wall).toBeLessThan(stopped + 700);
    expect(f.dismissedFired).toBe('false');
    expect(f.local).toBe('true');
  });

  it('bad input: typed errors and nothing sent; a message over maxMessageBytes is TOO_LARGE at the sender, not truncated', async () => {
    expect(await line(0, /^bad rank99=/)).toBe('bad rank99=GmpiError:BAD_RANK rankNegative=GmpiError:BAD_RANK killRank99=GmpiError:BAD_RANK');
    expect(await line(0, /^bad groupAsBroadcast=/)).toBe('bad groupAsBroadcast=LinkError:BAD_SIGNAL appToCm=LinkError:BAD_SIGNAL');
    expect(await line(0, /^bad first=/)).toBe('bad first=ok second=LinkError:REQUEST_OUTSTANDING group=LinkError:REQUEST_OUTSTANDING outcome=own-broadcast');
    expect(await line(0, /^bad timerNegative=/)).toBe('bad timerNegative=GmpiError:BAD_ARGUMENT timerArg=GmpiError:BAD_ARGUMENT');
    expect(await line(0, /^bad tooLarge=/)).toBe('bad tooLarge=GmpiError:TOO_LARGE tooLargeValue=GmpiError:TOO_LARGE');
    // The first message rank 1 received on that tag is the one of exactly maxMessageBytes.
    expect(await line(1, /^bad received /)).toBe(`bad received bytes=${64 * 1024} allSevens=true`);
    // Only the accepted broadcast reached anyone; no refused signal or request went out.
    for (const v of RANKS) expect(await line(v, /^bad seen /)).toBe('bad seen bad=0 first=1 second=0 sync=0');
  });

  it('alert during every blocking call: a broadcast with alertOn settles each with ERR_ALERT; after alertClear calls work again', async () => {
    const collectives = ['barrier', 'bcast', 'reduce', 'allreduce', 'gather', 'scatter', 'allgather'];
    // What was blocked before the alert (a gather's non-root sends and returns).
    const blocked = (await Promise.all(RANKS.map((v) => line(v, /^alert blocked=/)))).map((l) => fields(l).blocked?.split(',') ?? []);
    expect(blocked[0]).toEqual(['recv', ...collectives, 'send']);
    expect(blocked[1]).toEqual(['recv', ...collectives.filter((c) => c !== 'gather')]);
    expect(blocked[2]).toEqual(['recv', ...collectives.filter((c) => c !== 'gather')]);
    expect(blocked[3]).toEqual(['recv']);
    expect(await line(1, /^alert broadcast /)).toBe('alert broadcast own-broadcast');
    for (const v of RANKS) {
      const settled = fields((await line(v, /^alert settled /)).slice('alert settled '.length));
      for (const name of blocked[v] ?? []) expect(settled[name], `rank ${v} ${name}`).toBe('GmpiError:ERR_ALERT');
      if (v === 1 || v === 2) expect(settled.gather).toBe('done');
      expect(await line(v, /^alert check=/)).toBe('alert check=true invalid=false sendWhileRaised=GmpiError:ERR_ALERT');
      expect(await line(v, /^alert cleared /)).toBe(`alert cleared check=false ring=${(v + 3) % 4}`);
      expect(await line(v, /^alert recover=/)).toMatch(/^alert recover=SUCCESS world=\d+ size=4$/);
      expect(await line(v, /^alert allreduce=/)).toBe('alert allreduce=10');
    }
    // The send that blocked under backpressure was refused to its caller, but its bytes had
    // left: every flood message arrived whole.
    const flood = fields(await line(3, /^alert flood /));
    expect(flood.received).toBe(flood.sent);
    expect(flood.whole).toBe('true');
    expect(Number(fields(await line(0, /^alert blocked=/)).floodSent)).toBeGreaterThan(1);
  });

  it('the alert flag raised by a broadcast is seen by a synchronous loop in every process', async () => {
    const sentAt = Number(fields(await line(0, /^busy sent /)).at);
    const latencies: number[] = [];
    for (const v of RANKS) {
      const f = fields(await line(v, /^busy seen=/));
      expect(f.seen).toBe('true');
      latencies.push(Number(f.at) - sentAt);
    }
    console.log(`alert flag: seen by each rank's busy loop ${latencies.map((l) => `${l} ms`).join(', ')} after the broadcast was sent`);
    for (const l of latencies) expect(l).toBeLessThan(1000);
    for (const v of RANKS) await line(v, /^done$/);
  });
});
