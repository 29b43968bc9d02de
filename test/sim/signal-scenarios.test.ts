// Ghidrah signals in the simulator (spec §4; §9.2 A1–A7, A9–A11; §9.1 items 53–71): the real
// replica and agent cores, the real agent process tables, linked processes scripted through the
// agent's socket interface (src/sim/tasks.ts SimApp). Each test asserts what the task's
// processes observe — the broadcasts they receive, in order — then the group and task
// invariants.
import { describe, expect, it } from 'vitest';
import { finalizeApp } from '../../src/core/agent-procs-app.ts';
import { GSIG, GSIG_BROADCAST, GSIG_CM } from '../../src/core/signals.ts';
import type { TaskView } from '../../src/core/status.ts';
import { realCores } from '../../src/sim/cores.ts';
import { TaskSim, type SimApp } from '../../src/sim/tasks.ts';
import type { WorldOptions } from '../../src/sim/world.ts';

const APP_SIG = 100;

/** A cluster of 4 nodes (or `agents`) running one linked task of `size` processes, all
 *  connected and holding their mapping. */
function linkedTask(size = 4, opts: { seed?: number; agents?: number; args?: string[]; wrapCore?: WorldOptions['wrapCore'] } = {}) {
  const s = new TaskSim({ seed: opts.seed ?? 1, agents: opts.agents ?? 4, cores: realCores, trace: true, ...(opts.wrapCore === undefined ? {} : { wrapCore: opts.wrapCore }) });
  s.world.start();
  s.world.runUntil(50);
  s.submit({ name: 'app', size, file: 'sim-linked', args: opts.args ?? [] });
  s.world.runUntil(200);
  const apps = Array.from({ length: size }, (_, v) => s.app('t1', v));
  for (const a of apps) expect(a.mapping, `t1/${a.vpid} has its mapping`).not.toBeNull();
  return { s, apps };
}

const task = (s: TaskSim, r = 'r2'): TaskView => s.views().get(r)?.tasks.find((t) => t.id === 't1') as TaskView;
/** The broadcasts a process received since `from`, as `NAME(arg)` or `src:signum(arg)`. */
const NAMES = new Map<number, string>(Object.entries(GSIG).map(([k, v]) => [v, k]));
function seen(a: SimApp, from = 0): string[] {
  return a.received.slice(from).filter((x) => x.dest === GSIG_BROADCAST).map((x) =>
    x.src === GSIG_CM ? `${NAMES.get(x.signum) ?? x.signum}(${x.arg})` : `${x.src}:${x.signum}(${x.arg})`);
}
const mark = (apps: SimApp[]) => apps.map((a) => a.received.length);

function finish(s: TaskSim): void {
  s.finish(false);
  s.world.checker.finish({ livenessExpected: false, digests: s.world.digests() });
  expect(s.world.checker.violations).toEqual([]);
}

/** Every process sends SETQUORUM(q) and the reply reaches all. */
function setQuorum(s: TaskSim, apps: SimApp[], q: number): void {
  const m = mark(apps);
  for (const a of apps) s.appSend(a, GSIG.REQ_SETQUORUM, GSIG_CM, q);
  s.world.runUntil(s.now + 30);
  apps.forEach((a, i) => expect(seen(a, m[i])).toEqual([`REP_QUORUMSET(${q})`]));
}

describe('Ghidrah signals in the simulator (spec §4)', () => {
  it('the mapping lists every member with its node and endpoint; quorum starts at the task size (spec §7, §4.5)', () => {
    const { s, apps } = linkedTask(4);
    const m = apps[2]?.mapping;
    expect(m).toMatchObject({ task: 't1', vpid: 2, size: 4, restarted: false, recovered: false, quorum: 4 });
    expect(m?.members.map((x) => x.vpid)).toEqual([0, 1, 2, 3]);
    for (const x of m?.members ?? []) expect(x.endpoint).toMatch(/^sim-n\d:\d+$/);
    finish(s);
  });

  it('a point-to-point signal reaches only its destination, with the sender as source (spec §4.1)', () => {
    const { s, apps } = linkedTask(3);
    const [a0, a1, a2] = apps as [SimApp, SimApp, SimApp];
    s.appSend(a0, APP_SIG, 2, 42);
    s.world.runUntil(s.now + 20);
    expect(a2.received.map((x) => [x.signum, x.src, x.dest, x.arg])).toEqual([[APP_SIG, 0, 2, 42]]);
    expect(a0.received).toEqual([]);
    expect(a1.received).toEqual([]);
    finish(s);
  });

  it('A3: two broadcast requests in one epoch: exactly the first is broadcast, to all, its sender included', () => {
    const { s, apps } = linkedTask(4);
    const [x, y] = apps as [SimApp, SimApp];
    s.appSend(x, APP_SIG, GSIG_BROADCAST, 1);
    s.appSend(y, APP_SIG + 1, GSIG_BROADCAST, 2);
    s.world.runUntil(s.now + 30);
    const first = seen(apps[0] as SimApp);
    expect(first).toHaveLength(1);
    expect(['0:100(1)', '1:101(2)']).toContain(first[0]);
    for (const a of apps) expect(seen(a)).toEqual(first);
    expect(task(s).signals).toMatchObject({ broadcasts: 1, dropped: 1 });
    finish(s);
  });

  it('atomic broadcast: many senders, every process receives the same broadcasts in the same order (spec §4.1 (b))', () => {
    const { s, apps } = linkedTask(4, { seed: 7 });
    // Each process re-broadcasts on every broadcast it receives, until 40 have gone out.
    for (const a of apps) {
      a.onSignal = (app, sig) => {
        if (sig.dest === GSIG_BROADCAST && app.received.length < 40) s.appSend(app, APP_SIG, GSIG_BROADCAST, app.vpid);
      };
    }
    for (const a of apps) s.appSend(a, APP_SIG, GSIG_BROADCAST, a.vpid);
    s.world.runUntil(s.now + 1000);
    const order = seen(apps[0] as SimApp);
    expect(order.length).toBeGreaterThanOrEqual(40);
    for (const a of apps) expect(seen(a)).toEqual(order);
    // Epochs strictly increase along the order every process saw.
    const epochs = (apps[0] as SimApp).received.map((x) => x.epoch);
    expect(epochs).toEqual([...epochs].sort((a, b) => a - b));
    expect(new Set(epochs).size).toBe(epochs.length);
    finish(s);
  });

  it('A9: SETQUORUM(3) is answered REP_QUORUMSET(3); later a group request succeeds with 3 matching', () => {
    const { s, apps } = linkedTask(4);
    setQuorum(s, apps, 3);
    const m = mark(apps);
    for (const a of apps.slice(0, 3)) s.appSend(a, GSIG.REQ_SYNC, GSIG_CM, 9);
    s.world.runUntil(s.now + 30);
    apps.forEach((a, i) => expect(seen(a, m[i])).toEqual(['REP_SYNC(9)']));
    expect(task(s).quorum).toBe(3);
    finish(s);
  });

  it('A1: quorum 3, f asks SYNC(t) while x, y, z ask SYNC(u): u is performed and its reply reaches all 4, f included', () => {
    const { s, apps } = linkedTask(4);
    setQuorum(s, apps, 3);
    const [x, y, z, f] = apps as [SimApp, SimApp, SimApp, SimApp];
    const m = mark(apps);
    s.appSend(f, GSIG.REQ_SYNC, GSIG_CM, 666);
    for (const a of [x, y, z]) s.appSend(a, GSIG.REQ_SYNC, GSIG_CM, 1);
    s.world.runUntil(s.now + 30);
    apps.forEach((a, i) => expect(seen(a, m[i])).toEqual(['REP_SYNC(1)']));
    finish(s);
  });

  it('A1 (kill): quorum 3, f asks KILL(x) while x, y, z ask KILL(f): f is killed and NTF_DIED(f) reaches the survivors', () => {
    const { s, apps } = linkedTask(4);
    setQuorum(s, apps, 3);
    const [x, y, z, f] = apps as [SimApp, SimApp, SimApp, SimApp];
    const m = mark(apps);
    s.appSend(f, GSIG.REQ_KILL, GSIG_CM, x.vpid);
    for (const a of [x, y, z]) s.appSend(a, GSIG.REQ_KILL, GSIG_CM, f.vpid);
    s.world.runUntil(s.now + 50);
    [x, y, z].forEach((a, i) => expect(seen(a, m[i])).toEqual([`NTF_DIED(${f.vpid})`]));
    expect(f.alive).toBe(false);
    expect(task(s).procs.find((p) => p.vpid === f.vpid)?.state).toBe('terminatedAbnormally');
    expect(task(s).state).toBe('running');
    finish(s);
  });

  it('A5: a KILL with no error meanwhile is answered by NTF_DIED(x) alone, no ACK', () => {
    const { s, apps } = linkedTask(4);
    const m = mark(apps);
    for (const a of apps) s.appSend(a, GSIG.REQ_KILL, GSIG_CM, 2);
    s.world.runUntil(s.now + 50);
    [0, 1, 3].forEach((v) => expect(seen(apps[v] as SimApp, m[v])).toEqual(['NTF_DIED(2)']));
    finish(s);
  });

  it('A4: a crash during KILL(x): ACK_KILL(x), then NTF_DIED(f), then NTF_DIED(x); nobody sends a group request meanwhile', () => {
    // x ignores SIGTERM, so the kill lasts until the agent's SIGKILL grace.
    const { s, apps } = linkedTask(4, { args: ['stubborn'] });
    setQuorum(s, apps, 3);
    const [a0, a1, x, f] = apps as [SimApp, SimApp, SimApp, SimApp];
    const m = mark(apps);
    for (const a of [a0, a1, f]) s.appSend(a, GSIG.REQ_KILL, GSIG_CM, x.vpid);
    s.world.runUntil(s.now + 60);
    expect(task(s).state).toBe('killing');
    const node = [...s.nodes.values()].find((n) => n.agent === f.agent);
    node?.os.crash(f.pid);
    s.world.runUntil(s.now + 1000);
    [a0, a1].forEach((a, i) => expect(seen(a, m[i])).toEqual([`REP_ACK_KILL(${x.vpid})`, `NTF_DIED(${f.vpid})`, `NTF_DIED(${x.vpid})`]));
    expect(task(s).state).toBe('running');
    finish(s);
  });

  it('A6: 3 of 4 send non-matching requests (quorum 3): ERR_DISAGREE as soon as a quorum is impossible, before the timeout', () => {
    const { s, apps } = linkedTask(4);
    setQuorum(s, apps, 3);
    const m = mark(apps);
    const at = s.now;
    apps.slice(0, 3).forEach((a, i) => s.appSend(a, GSIG.REQ_SYNC, GSIG_CM, i));
    s.world.runUntil(at + 60);
    apps.forEach((a, i) => expect(seen(a, m[i])).toEqual(['ERR_DISAGREE(0)']));
    const got = (apps[3] as SimApp).received.at(-1)?.atMs ?? Infinity;
    expect(got - at).toBeLessThan(60); // the timeout is 1000 ms
    finish(s);
  });

  it('A7: only 2 of 4 send a matching request (quorum 3): ERR_DISAGREE when the timeout from the first request expires', () => {
    const { s, apps } = linkedTask(4);
    setQuorum(s, apps, 3);
    const m = mark(apps);
    const at = s.now;
    for (const a of apps.slice(0, 2)) s.appSend(a, GSIG.REQ_SYNC, GSIG_CM, 5);
    s.world.runUntil(at + 800);
    apps.forEach((a, i) => expect(seen(a, m[i])).toEqual([]));
    s.world.runUntil(at + 1300);
    apps.forEach((a, i) => expect(seen(a, m[i])).toEqual(['ERR_DISAGREE(0)']));
    const got = (apps[0] as SimApp).received.at(-1)?.atMs ?? 0;
    expect(got - at).toBeGreaterThanOrEqual(1000);
    finish(s);
  });

  it('A2: a manager broadcast drops a collecting group request; stale-epoch copies are dropped; the retry in the new epoch is accepted', () => {
    const { s, apps } = linkedTask(5);
    setQuorum(s, apps, 3);
    const [x, y, z, , w] = apps as [SimApp, SimApp, SimApp, SimApp, SimApp];
    const old = x.epoch;
    const m = mark(apps);
    s.appSend(x, GSIG.REQ_SYNC, GSIG_CM, 1);
    s.world.runUntil(s.now + 10);
    // The manager's own broadcast b: w crashes, NTF_DIED(w) moves everyone to epoch i+1.
    const node = [...s.nodes.values()].find((n) => n.agent === w.agent);
    node?.os.crash(w.pid);
    s.world.runUntil(s.now + 20);
    expect(seen(x, m[0])).toEqual([`NTF_DIED(${w.vpid})`]);
    // y and z still ask in epoch i: stale, dropped; no service runs.
    s.appSend(y, GSIG.REQ_SYNC, GSIG_CM, 1, old);
    s.appSend(z, GSIG.REQ_SYNC, GSIG_CM, 1, old);
    s.world.runUntil(s.now + 30);
    for (const [i, a] of [x, y, z].entries()) expect(seen(a, m[i])).toEqual([`NTF_DIED(${w.vpid})`]);
    // In epoch i+1, x, y and z ask v: accepted.
    for (const a of [x, y, z]) s.appSend(a, GSIG.REQ_SYNC, GSIG_CM, 2);
    s.world.runUntil(s.now + 30);
    for (const [i, a] of [x, y, z].entries()) expect(seen(a, m[i])).toEqual([`NTF_DIED(${w.vpid})`, 'REP_SYNC(2)']);
    finish(s);
  });

  it('issue 15: the t.group-request check can fail: agents that stamp the current epoch on stale requests get SYNC performed on one current request, and are caught', () => {
    // The lie: each agent rewrites the epoch of every signal request to `current` (when set).
    let current: number | null = null;
    const { s, apps } = linkedTask(4, {
      seed: 11,
      wrapCore: (id, core) => (!id.startsWith('a') ? core : {
        ...core,
        step: (i) => core.step(current !== null && i.type === 'request' && i.request.type === 'sig.request' ? { ...i, request: { ...i.request, epoch: current } } : i),
      }),
    });
    setQuorum(s, apps, 3);
    const [x, y, z] = apps as [SimApp, SimApp, SimApp];
    const stale = x.epoch - 2; // an epoch before the quorum was set
    current = x.epoch;
    const m = mark(apps);
    s.appSend(x, GSIG.REQ_SYNC, GSIG_CM, 1);
    s.appSend(y, GSIG.REQ_SYNC, GSIG_CM, 1, stale);
    s.appSend(z, GSIG.REQ_SYNC, GSIG_CM, 1, stale);
    s.world.runUntil(s.now + 30);
    expect(seen(x, m[0])).toEqual(['REP_SYNC(1)']); // what the lying agents made the group do
    s.finish(false);
    const caught = s.world.checker.violations.filter((v) => v.invariant === 't.group-request');
    expect(caught).toHaveLength(1);
    expect(caught[0]).toMatchObject({ seed: 11 });
    expect(caught[0]?.message).toBe(`t1 (era 0): REP_SYNC(1) of epoch ${current + 2} was acted on with 1 matching request(s) of epoch ${current} (VPIDs 0), but the quorum was 3 and 4 member(s) surely counted`);
  });

  it('issue 15: t.group-request holds when every process asks in the current epoch, and a reply no one asked for is caught', () => {
    const { s, apps } = linkedTask(4, { seed: 12 });
    setQuorum(s, apps, 3);
    const m = mark(apps);
    for (const a of apps.slice(0, 3)) s.appSend(a, GSIG.REQ_SYNC, GSIG_CM, 7);
    s.world.runUntil(s.now + 30);
    expect(seen(apps[3] as SimApp, m[3])).toEqual(['REP_SYNC(7)']);
    finish(s);
    expect(s.stats.groupReplies).toBe(2); // REP_QUORUMSET(3), REP_SYNC(7)
    // The same run, with one request forgotten: the reply answers too few.
    s.sentRequests.splice(s.sentRequests.findIndex((r) => r.signum === GSIG.REQ_SYNC), 1);
    s.world.checker.violations.length = 0;
    s.finish(false);
    expect(s.world.checker.violations.map((v) => v.invariant)).toEqual(['t.group-request']);
  });

  it('A10: a crashed process: NTF_DIED(vpid) exactly once reaches every survivor', () => {
    const { s, apps } = linkedTask(4);
    const m = mark(apps);
    const v = apps[1] as SimApp;
    [...s.nodes.values()].find((n) => n.agent === v.agent)?.os.crash(v.pid);
    s.world.runUntil(s.now + 50);
    [0, 2, 3].forEach((i) => expect(seen(apps[i] as SimApp, m[i])).toEqual(['NTF_DIED(1)']));
    finish(s);
  });

  it('SPAWN: ACK-free REP_SPAWNED(new VPID) with its node and endpoint; the new process gets a recovered mapping (spec §4.3, §5.5)', () => {
    const { s, apps } = linkedTask(3, { agents: 4 });
    const v = apps[1] as SimApp;
    [...s.nodes.values()].find((n) => n.agent === v.agent)?.os.crash(v.pid);
    s.world.runUntil(s.now + 50);
    const survivors = [apps[0], apps[2]] as SimApp[];
    const m = mark(survivors);
    for (const a of survivors) s.appSend(a, GSIG.REQ_SPAWN, GSIG_CM, 0);
    s.world.runUntil(s.now + 100);
    survivors.forEach((a, i) => expect(seen(a, m[i])).toEqual(['REP_SPAWNED(3)']));
    const rep = (apps[0] as SimApp).received.at(-1);
    expect(rep?.node).toMatch(/^n\d$/);
    expect(rep?.data).toMatch(/^sim-n\d:\d+$/);
    const fresh = s.app('t1', 3);
    expect(fresh.mapping).toMatchObject({ vpid: 3, recovered: true, size: 3 });
    expect(fresh.mapping?.members.map((x) => x.vpid)).toEqual([0, 2, 3]);
    expect(seen(fresh)).toEqual(['REP_SPAWNED(3)']);
    expect(fresh.epoch).toBe((apps[0] as SimApp).epoch);
    finish(s);
  });

  it('A11: a node lost: NTF_DIED for each of its processes reaches the survivors', () => {
    const { s, apps } = linkedTask(4);
    const m = mark(apps);
    const v = apps[3] as SimApp;
    s.powerOff(v.agent);
    s.world.runUntil(s.now + 1500);
    [0, 1, 2].forEach((i) => expect(seen(apps[i] as SimApp, m[i])).toContain('NTF_DIED(3)'));
  });

  it('A13: from the last request of the quorum to the reply at every process, in simulated time: a few group hops', () => {
    // The simulator's links take 0.3 ms plus jitter (mean 0.2 ms); a reply needs the request
    // ordered (agent → primary → backups) and the copies voted at every agent: a handful of
    // hops. The real figures, with processes and signatures, are in docs/PERFORMANCE.md §5.
    const { s, apps } = linkedTask(4, { agents: 5 });
    setQuorum(s, apps, 3);
    const lastToAll = (send: () => void, signum: number): number => {
      const m = mark(apps);
      const at = s.now;
      send();
      s.world.runUntil(at + 200);
      const got = apps.flatMap((a, i) => (a.alive ? [a.received.slice(m[i]).find((r) => r.signum === signum)?.atMs ?? Infinity] : []));
      return Math.max(...got) - at;
    };
    const bcast = lastToAll(() => s.appSend(apps[0] as SimApp, APP_SIG, GSIG_BROADCAST, 1), APP_SIG);
    const sync = lastToAll(() => apps.forEach((a) => s.appSend(a, GSIG.REQ_SYNC, GSIG_CM, 3)), GSIG.REP_SYNC);
    const kill = lastToAll(() => apps.slice(0, 3).forEach((a) => s.appSend(a, GSIG.REQ_KILL, GSIG_CM, 3)), GSIG.NTF_DIED);
    const live = apps.filter((a) => a.alive);
    const spawn = lastToAll(() => live.forEach((a) => s.appSend(a, GSIG.REQ_SPAWN, GSIG_CM, 0)), GSIG.REP_SPAWNED);
    for (const [what, ms] of Object.entries({ bcast, sync, kill, spawn })) {
      expect(ms, what).toBeGreaterThan(0);
      expect(ms, what).toBeLessThan(30);
    }
    // KILL and SPAWN add the agent's kill or spawn and the process's report to SYNC's path.
    expect(kill).toBeGreaterThan(sync);
    expect(spawn).toBeGreaterThan(sync);
    finish(s);
  });

  it('a signal handed to the agent survives its sender crashing in the same moment (spec §4.1 (c))', () => {
    const { s, apps } = linkedTask(4);
    const [a0, a1] = apps as [SimApp, SimApp];
    const m = mark(apps);
    s.appSend(a0, APP_SIG, a1.vpid, 42);
    s.appSend(a0, APP_SIG + 1, GSIG_BROADCAST, 7);
    [...s.nodes.values()].find((n) => n.agent === a0.agent)?.os.crash(a0.pid);
    s.world.runUntil(s.now + 100);
    expect(a1.received.slice(m[1]).some((x) => x.signum === APP_SIG && x.arg === 42)).toBe(true);
    expect(seen(a1, m[1])).toEqual(['0:101(7)', 'NTF_DIED(0)']);
    finish(s);
  });

  it('after an agent restart its linked process is killed and announced, so group requests work again (PROTOCOL §9.4)', () => {
    const { s, apps } = linkedTask(4);
    setQuorum(s, apps, 3);
    const z = apps[3] as SimApp;
    const m = mark(apps);
    s.agentDeath(z.agent, 20);
    s.world.runUntil(s.now + 500);
    expect([...s.nodes.values()].find((n) => n.agent === z.agent)?.os.alive(z.pid)).toBe(false);
    [0, 1, 2].forEach((i) => expect(seen(apps[i] as SimApp, m[i])).toEqual(['NTF_DIED(3)']));
    const m2 = mark(apps);
    for (const a of apps.slice(0, 3)) s.appSend(a, GSIG.REQ_SYNC, GSIG_CM, 1);
    s.world.runUntil(s.now + 50);
    [0, 1, 2].forEach((i) => expect(seen(apps[i] as SimApp, m2[i])).toEqual(['REP_SYNC(1)']));
    finish(s);
  });

  it('a member that exits normally no longer counts: the requests already in meet the lower quorum', () => {
    const { s, apps } = linkedTask(3);
    const [a0, a1, a2] = apps as [SimApp, SimApp, SimApp];
    const m = mark(apps);
    s.appSend(a0, GSIG.REQ_SYNC, GSIG_CM, 1);
    s.appSend(a1, GSIG.REQ_SYNC, GSIG_CM, 1);
    s.world.runUntil(s.now + 20);
    // a2 finalizes and exits 0: a normal end, no broadcast of its own.
    const n2 = [...s.nodes.values()].find((n) => n.agent === a2.agent);
    if (n2?.procs != null) finalizeApp(n2.procs, 't1', 2);
    n2?.os.finish(a2.pid, 0);
    s.world.runUntil(s.now + 50);
    [0, 1].forEach((i) => expect(seen(apps[i] as SimApp, m[i])).toEqual(['REP_SYNC(1)']));
  });

  it('bad input: unknown signal numbers, non-members, stale epochs and a second request per epoch have no effect', () => {
    const { s, apps } = linkedTask(3);
    const [a0, a1] = apps as [SimApp, SimApp];
    const before = task(s).signals;
    s.appSend(a0, 5, GSIG_BROADCAST, 0); // a manager signal number as a broadcast
    s.appSend(a0, APP_SIG, GSIG_CM, 0); // an application number as a group request
    s.appSend(a0, APP_SIG, 9, 0); // no VPID 9
    s.appSend(a1, APP_SIG, GSIG_BROADCAST, 0, a1.epoch + 5); // a future epoch
    s.world.runUntil(s.now + 30);
    for (const a of apps) expect(a.received).toEqual([]);
    expect(task(s).signals.dropped - before.dropped).toBe(4);
    expect(task(s).epoch).toBe(a0.epoch);
    finish(s);
  });

  it('rule 71: a broadcast request landing amid a collecting group request counts as a non-matching request and cannot drop it', () => {
    const { s, apps } = linkedTask(4);
    setQuorum(s, apps, 3);
    const [x, y, z, f] = apps as [SimApp, SimApp, SimApp, SimApp];
    // The worst interleaving, ten epochs in a row: x's request arrives, then f's broadcast
    // request, then y's and z's. Without the rule, f's broadcast would win every epoch.
    let synced = false;
    for (let round = 0; round < 10 && !synced; round++) {
      s.appSend(x, GSIG.REQ_SYNC, GSIG_CM, 1);
      s.world.runUntil(s.now + 5);
      s.appSend(f, APP_SIG, GSIG_BROADCAST, 0);
      s.world.runUntil(s.now + 5);
      s.appSend(y, GSIG.REQ_SYNC, GSIG_CM, 1);
      s.appSend(z, GSIG.REQ_SYNC, GSIG_CM, 1);
      s.world.runUntil(s.now + 20);
      synced = x.received.some((r) => r.signum === GSIG.REP_SYNC);
    }
    expect(synced).toBe(true);
    expect(seen(f).filter((b) => b.startsWith('3:'))).toEqual([]);
    finish(s);
  });

  it('rule 71: a process flooding broadcast requests cannot starve a quorum of group requests (seeds 1–20)', () => {
    const epochsTaken: number[] = [];
    for (let seed = 1; seed <= 20; seed++) {
      const { s, apps } = linkedTask(4, { seed });
      setQuorum(s, apps, 3);
      const [x, y, z, f] = apps as [SimApp, SimApp, SimApp, SimApp];
      const start = f.epoch;
      // f re-sends a broadcast request the moment it sees any broadcast, with the new epoch.
      let synced = false;
      f.onSignal = (app, sig) => {
        if (sig.dest === GSIG_BROADCAST && !synced) s.appSend(app, APP_SIG, GSIG_BROADCAST, 0);
      };
      // x, y, z want SYNC(1); each re-asks after every broadcast that is not its reply.
      for (const a of [x, y, z]) {
        a.onSignal = (app, sig) => {
          if (sig.dest !== GSIG_BROADCAST) return;
          if (sig.src === GSIG_CM && sig.signum === GSIG.REP_SYNC) synced = true;
          else if (!synced) s.appSend(app, GSIG.REQ_SYNC, GSIG_CM, 1);
        };
      }
      s.appSend(f, APP_SIG, GSIG_BROADCAST, 0);
      for (const a of [x, y, z]) s.appSend(a, GSIG.REQ_SYNC, GSIG_CM, 1);
      s.world.runUntil(s.now + 1000);
      expect(synced, `seed ${seed}`).toBe(true);
      epochsTaken.push(x.received.findIndex((r) => r.signum === GSIG.REP_SYNC) + 1);
      f.onSignal = null;
      expect(x.epoch).toBeGreaterThan(start);
      finish(s);
    }
    // The flood delays the quorum by a few epochs at most.
    expect(Math.max(...epochsTaken)).toBeLessThan(20);
  });
});
