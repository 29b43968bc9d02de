// Membership changes at run time on a cluster of several hosts (PROTOCOL §10.12, docs/OPERATIONS.md
// §8.7): the operator, in a namespace of its own with the operator bundle alone
// (test/hosts/cluster.ts), adds a fifth host that the hosts file never named — it has an address
// on the bridge and nothing else — with `trine node add`, copies nothing (the namespaces share a
// disk) and boots it from the bundle the command wrote. The new node joins and takes its share of
// a task spread over every host; `trine logs` reads its output from the new agent. Then `trine node
// remove` drains it: without --kill it waits for the task and says so; with --kill the task is
// killed, the node's `trine node run` exits 4 and the node leaves the group's node list, after
// which a task that needed n5's slots waits, and a task spread over the hosts runs on the
// other hosts only. Then the changes survive a cluster reset (PROTOCOL §10.9, §10.12): a sixth
// host is added and n4 removed, two replica hosts are cut off, and the watchdog power-cycles n1,
// n2, n3 and the added n6 but neither removed node; the restarted group, which started from the
// hosts' cluster.json, learns both changes again from the journals the watchdog kept, and a task
// of one process per host runs on n1, n2, n3 and n6. Needs root and network namespaces; skipped,
// with the reason, without.
import type { ChildProcess } from 'node:child_process';
import { cpSync, existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClusterView, NodeView, TaskView } from '../../src/core/status.ts';
import { exitOf, HostsCluster, TRINE } from '../hosts/cluster.ts';
import { namespacesOf, testBedSupported } from '../hosts/testbed.ts';
import { alive, waitFor } from './helpers.ts';

const supported = testBedSupported();
if (!supported.ok) console.warn(`hosts nodes e2e skipped: ${supported.why}`);

/** EXIT_SHUTDOWN (src/core/constants.ts), spelled out: the contract with systemd. */
const EXIT_SHUTDOWN = 4;
/** Slots of every host in the harness's hosts file (test/hosts/cluster.ts), and of n5 (the
 *  `trine node add` default). */
const SLOTS = 4;
/** The added host: on the bed, not in the hosts file. */
const ADDED = 'n5';
/** The host added before the cluster reset, and the initial one removed before it. */
const KEPT = 'n6';
const DROPPED = 'n4';
/** A task's processes print this, then sleep until killed. */
const SLEEPER = ['/bin/sh', '-c', 'echo "up"; exec sleep 600'];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** waitFor (test/e2e/helpers.ts), polling every half second: each probe runs a CLI. */
const until = <T>(what: string, ms: number, probe: () => Promise<T | undefined>): Promise<T> => waitFor(what, ms, probe, 500);

/** The nodes two replicas agree on (`trine nodes --json`), or undefined if none came. */
async function nodes(c: HostsCluster): Promise<NodeView[] | undefined> {
  const r = await c.op(['nodes', '--json', '--timeout', '2000']);
  return r.code === 0 ? (JSON.parse(r.stdout) as { nodes: NodeView[] }).nodes : undefined;
}

async function task(c: HostsCluster, id: string): Promise<TaskView> {
  const t = (await c.view()).tasks.find((x) => x.id === id);
  if (t === undefined) throw new Error(`no task ${id}`);
  return t;
}

async function submit(c: HostsCluster, size: number, name: string): Promise<string> {
  const r = await c.op(['submit', '-n', String(size), '--name', name, '--', ...SLEEPER]);
  expect(r.code, r.stderr).toBe(0);
  return r.stdout.trim();
}

const runningTask = (c: HostsCluster, id: string): Promise<TaskView> =>
  until(`${id} running`, 60_000, async () => {
    const t = await task(c, id);
    return t.state === 'running' && t.procs.every((p) => p.pid !== null && p.state === 'running') ? t : undefined;
  });

/** The cluster.json of a bundle, the parts read here. */
type ConfigJson = {
  processes: { id: string; kind: string; node: string | null; listen: { host: string; port: number } | null; slots: number | null }[];
  membership: { agents: { id: string; node: string }[] };
  publicKeys: Record<string, string>;
  nodeAddresses: Record<string, string>;
};
const configOf = (dir: string) => JSON.parse(readFileSync(join(dir, 'cluster.json'), 'utf8')) as ConfigJson;

/** A node that hosts a member of the group cannot be removed (PROTOCOL §10.12). Under CI load a
 *  member replaced earlier in this file can land on `host` (CI saw r7 there): kill it, as an
 *  operator would stop it on the host, and wait for the group to replace it elsewhere. */
async function moveMembersOff(cl: HostsCluster, host: string): Promise<void> {
  const run = join(cl.bundle(host), 'run');
  const members = new Set(((await cl.status())?.replicas ?? []).map((r) => r.id));
  const here = (existsSync(run) ? readdirSync(run) : []).flatMap((f) => {
    const m = /^(r\d+)\.pid$/.exec(f);
    if (m === null || !members.has(m[1] as string)) return [];
    const pid = Number(readFileSync(join(run, f), 'utf8').trim());
    return Number.isSafeInteger(pid) && pid > 0 && alive(pid) ? [{ id: m[1] as string, pid }] : [];
  });
  for (const r of here) process.kill(r.pid, 'SIGKILL');
  if (here.length === 0) return;
  await waitFor(`${here.map((r) => r.id).join(', ')} replaced off ${host}`, 60_000, async () => {
    const st = await cl.status();
    return st !== null && st.healthy && st.converged && !st.replicas.some((r) => here.some((h) => h.id === r.id)) ? true : undefined;
  }, 500);
}

describe.skipIf(!supported.ok)('a node added to and removed from a running cluster of four hosts (network namespaces)', () => {
  let c: HostsCluster | undefined;
  let tag = '';

  beforeAll(async () => {
    c = await HostsCluster.start({ extraHosts: [ADDED, KEPT] });
    tag = c.bed.tag;
  }, 150_000);
  afterAll(async () => {
    await c?.destroy();
    // Every namespace of this bed is gone, the added host's included, whatever the test did.
    expect(await namespacesOf(tag), 'namespaces left by this test').toEqual([]);
  }, 60_000);

  it('a node added at run time takes tasks; a removed node stops receiving them (PROTOCOL §10.12)', async () => {
    const cl = c as HostsCluster;
    const address = cl.bed.host(ADDED).address;
    const others = cl.nodes;
    // A copy of the operator bundle as it is before the add, for a request the group must refuse.
    const stale = join(cl.root, 'ops-before-add');
    cpSync(cl.opBundle, stale, { recursive: true });

    // 1. `trine node add` from the operator's namespace: one line, the bundle beside the
    //    operator's, the operator's cluster.json lists the new agent.
    // No spare ids: a replacement replica on n5 would keep it from being removed below (a host
    // with spares runs one: test/e2e/hosts-added-spares.test.ts).
    const add = await cl.nodeOp('add', ['--id', ADDED, '--address', address, '--spares', '0']);
    expect(add.code, `stdout: ${add.stdout}\nstderr: ${add.stderr}`).toBe(0);
    const addLines = add.stdout.trim().split('\n');
    expect(addLines, add.stdout).toHaveLength(1);
    expect(addLines[0]).toContain(`bundle in ${cl.bundle(ADDED)}`);
    expect(addLines[0]).toContain(`start trine-node.service there`);
    const bundle = JSON.parse(readFileSync(join(cl.bundle(ADDED), 'bundle.json'), 'utf8')) as { host: string; address: string; roles: string[]; ids: string[] };
    expect(bundle).toMatchObject({ host: ADDED, address, roles: ['agent'], ids: ['a5'] });
    expect(readdirSync(join(cl.bundle(ADDED), 'keys')), 'the new host holds its agent\'s key only').toEqual(['a5.json']);
    const opsConfig = configOf(cl.opBundle);
    expect(opsConfig.processes.find((p) => p.id === 'a5')).toEqual({ id: 'a5', kind: 'agent', node: ADDED, listen: { host: address, port: 7403 }, slots: SLOTS });
    expect(configOf(cl.bundle(ADDED))).toEqual(opsConfig);
    const listed = await until(`${ADDED} in the node list`, 10_000, async () => (await nodes(cl))?.find((n) => n.node === ADDED));
    // Recorded by the group; its slots come with its agent's join.
    expect(listed, 'recorded by the group, its agent not joined yet').toMatchObject({ agent: 'a5', slots: 0, state: 'joining' });

    // The same host again, from the stale operator bundle (which does not know it): the group
    // refuses, one line, exit 1, and nothing is written.
    const again = await cl.bed.run('ops', process.execPath, [
      TRINE, 'node', 'add', '--dir', stale, '--id', ADDED, '--address', address, '--out', join(cl.root, 'refused'),
    ]);
    expect(again.code, `stdout: ${again.stdout}\nstderr: ${again.stderr}`).toBe(1);
    expect(again.stderr.trim().split('\n')).toHaveLength(1);
    expect(again.stderr).toMatch(new RegExp(`^trine: the group refused to add ${ADDED}: .*: nothing was written`));
    expect(existsSync(join(cl.root, 'refused')), 'no bundle dir for a refused add').toBe(false);
    expect(configOf(stale).processes.some((p) => p.id === 'a5')).toBe(false);

    // 2. Boot the new host from its bundle; its agent joins like any other.
    const run5 = cl.boot(ADDED);
    const up = await until(`${ADDED} up`, 60_000, async () => (await nodes(cl))?.find((n) => n.node === ADDED && n.state === 'up'));
    expect(up.slots).toBe(SLOTS);

    // 3. A task of one process per host: placement spreads each process to the node with the
    //    most free slots, so n5 takes one like every other. (One per host, not one per slot: 20
    //    processes spawning at once on this 2-core machine, with other namespace clusters
    //    running, stalled agents long enough to be probed, and once to be declared failed.)
    const size = others.length + 1;
    const fill = await submit(cl, size, 'fill');
    const running = await runningTask(cl, fill);
    expect([...new Set(running.procs.map((p) => p.node))].sort()).toEqual([...others, ADDED].sort());
    const onAdded = running.procs.filter((p) => p.node === ADDED);
    expect(onAdded, `one process on ${ADDED}`).toHaveLength(1);
    for (const p of onAdded) {
      const inNs = (await cl.bed.run(ADDED, '/bin/sh', ['-c', `readlink /proc/${p.pid}/ns/net`])).stdout.trim();
      const own = (await cl.bed.run(ADDED, 'readlink', ['/proc/self/ns/net'])).stdout.trim();
      expect(inNs, `${fill}/${p.vpid} runs in ${ADDED}'s namespace`).toBe(own);
    }
    // Its output, read by the operator from the new agent over the network (PROTOCOL §7.1).
    const vpid = (onAdded[0] as TaskView['procs'][number]).vpid;
    const logs = await until(`${fill}/${vpid}'s output`, 20_000, async () => {
      const r = await cl.op(['logs', fill, '--vpid', String(vpid)]);
      return r.code === 0 && r.stdout.includes(`[${fill}/${vpid}] up`) ? r : undefined;
    });
    expect(logs.stderr).toBe('');
    const addedPids = onAdded.map((p) => p.pid as number);

    // 4. Remove without --kill: the node drains, the task goes on, and the wait ends naming it.
    const drain = await cl.nodeOp('remove', [ADDED, '--timeout', '4000']);
    expect(drain.code, `stdout: ${drain.stdout}\nstderr: ${drain.stderr}`).toBe(1);
    expect(drain.stdout.trim().split('\n'), 'the group\'s answer').toHaveLength(1);
    expect(drain.stderr.trim().split('\n')).toHaveLength(1);
    expect(drain.stderr).toContain(`trine: ${ADDED} is still in the group's node list after 4 s (draining): ${fill} (1 process) still run there`);
    expect(drain.stderr).toContain(`\`trine node remove ${ADDED} --kill\``);
    expect((await nodes(cl))?.find((n) => n.node === ADDED)?.state).toBe('draining');
    expect((await task(cl, fill)).state).toBe('running');
    for (const pid of addedPids) expect(alive(pid), `${fill}'s process ${pid} on ${ADDED} still runs while draining`).toBe(true);

    // 5. Remove with --kill: the task is killed, the node's agent told to stop, and the node
    //    leaves the list; its `trine node run` exits 4 and nothing is left in its namespace.
    const removedAt = Date.now();
    const remove = await cl.nodeOp('remove', [ADDED, '--kill']);
    expect(remove.code, `stdout: ${remove.stdout}\nstderr: ${remove.stderr}\n${cl.tails()}`).toBe(0);
    const removeLines = remove.stdout.trim().split('\n');
    expect(removeLines).toHaveLength(2);
    expect(removeLines[1]).toMatch(new RegExp(`^${ADDED} removed: gone from the group's node list after \\d+\\.\\d s; `));
    expect((await nodes(cl))?.map((n) => n.node).sort()).toEqual(others);
    expect(await exitOf(run5 as ChildProcess, 20_000), `${ADDED}'s trine node run`).toBe(EXIT_SHUTDOWN);
    await until(`${ADDED}'s namespace empty`, 10_000, async () => ((await cl.pidsIn(ADDED)).length === 0 ? true : undefined));
    // The agent took node.shutdown and exited 4; its keeper gave up with 4, nothing restarted.
    const agentLog = cl.logEvents(ADDED, 'a5');
    expect(agentLog.some((e) => e['event'] === 'node.shutdown'), 'a5 took node.shutdown').toBe(true);
    expect(agentLog.filter((e) => e['event'] === 'exit').map((e) => e['code'])).toEqual([EXIT_SHUTDOWN]);
    const keeperLog = cl.logEvents(ADDED, 'a5-keeper');
    expect(keeperLog.filter((e) => e['event'] === 'exit').map((e) => e['code'])).toEqual([EXIT_SHUTDOWN]);
    expect(keeperLog.filter((e) => e['event'] === 'agent.restart'), 'a5 not restarted').toEqual([]);
    for (const pid of addedPids) expect(alive(pid), `${fill}'s process ${pid} is gone`).toBe(false);
    const killed = await until(`${fill} to end`, 30_000, async () => {
      const t = await task(cl, fill);
      return t.outcome !== null ? t : undefined;
    });
    expect(killed.outcome).toBe('abnormal');
    // The operator bundle forgot the node but keeps its agent's key, so a5 is never reused.
    const after = configOf(cl.opBundle);
    expect(after.processes.some((p) => p.node === ADDED)).toBe(false);
    expect(after.nodeAddresses[ADDED]).toBeUndefined();
    expect(after.publicKeys['a5']).toBe(opsConfig.publicKeys['a5']);
    console.log(`hosts nodes: removal with --kill took ${Date.now() - removedAt} ms\n${remove.stdout.trim()}`);

    // 6. A task of one more process than the other hosts' slots no longer fits: it waits, with
    //    nothing on the removed node (it would have fitted with n5's slots).
    const big = await submit(cl, SLOTS * others.length + 1, 'fill-again');
    const waiting = await until(`${big} to wait`, 20_000, async () => {
      const t = await task(cl, big);
      return t.waitReason !== null ? t : undefined;
    });
    await sleep(3_000);
    const still: ClusterView = await cl.view();
    const bigNow = still.tasks.find((t) => t.id === big) as TaskView;
    expect(bigNow.state, `${big} waits (${waiting.waitReason ?? ''})`).toBe(waiting.state);
    expect(bigNow.procs.filter((p) => p.node === ADDED)).toEqual([]);
    expect(bigNow.procs.every((p) => p.pid === null)).toBe(true);
    const kill = await cl.op(['kill', big]);
    expect(kill.code, kill.stderr).toBe(0);

    // A task of one process per remaining host runs, on them alone.
    const rest = await submit(cl, others.length, 'rest');
    const restRunning = await runningTask(cl, rest);
    expect([...new Set(restRunning.procs.map((p) => p.node))].sort()).toEqual(others);
    expect((await cl.op(['kill', rest])).code).toBe(0);
    // And the cluster is as healthy as it began: no node failed, no replica lost.
    expect((await cl.status())?.healthy, JSON.stringify(await cl.status())).toBe(true);
    console.log(`hosts nodes: ${addLines[0] ?? ''}`);
  }, 300_000);

  it('membership changes survive a cluster reset: the watchdog power-cycles the added node and not the removed ones, and the restarted group learns both changes from the journals it kept (PROTOCOL §10.9, §10.12)', async () => {
    const cl = c as HostsCluster;
    // 1. n6 added and booted; n4, a node of the hosts file, removed: its `trine node run` exits 4.
    const add = await cl.nodeOp('add', ['--id', KEPT, '--address', cl.bed.host(KEPT).address, '--spares', '0']);
    expect(add.code, `stdout: ${add.stdout}\nstderr: ${add.stderr}`).toBe(0);
    cl.boot(KEPT);
    await until(`${KEPT} up`, 60_000, async () => (await nodes(cl))?.find((n) => n.node === KEPT && n.state === 'up'));
    await moveMembersOff(cl, DROPPED);
    const dropped = cl.daemonsOf(DROPPED);
    const remove = await cl.nodeOp('remove', [DROPPED, '--kill']);
    expect(remove.code, `stdout: ${remove.stdout}\nstderr: ${remove.stderr}`).toBe(0);
    for (const run of dropped) expect(await exitOf(run, 20_000), `${DROPPED}'s trine node run`).toBe(EXIT_SHUTDOWN);
    const members = ['n1', 'n2', 'n3', KEPT];
    expect((await nodes(cl))?.map((n) => n.node).sort()).toEqual(members);
    // The replicas journal a change at once (and every 2 s): the watchdog holds both changes.
    await sleep(3_000);
    const kept = (await cl.status())?.watchdog?.journalsKept ?? [];
    expect(kept.length, JSON.stringify(kept)).toBeGreaterThanOrEqual(2);

    // 2. Two replica hosts cut off: no two replicas agree, so the watchdog resets the cluster.
    const resetAt = Date.now();
    await cl.bed.cut('n1');
    await cl.bed.cut('n2');
    const order = await until('the cluster reset\'s node list', 90_000, async () =>
      cl.logEvents('wd', 'scc').find((e) => e['event'] === 'reset.cluster.nodes'));
    await cl.bed.restore('n1');
    await cl.bed.restore('n2');
    expect(order['nodes'], 'power-cycled: the hosts file\'s nodes less n4, plus n6').toEqual(['n1', 'n2', 'n3', KEPT]);
    expect(order['added']).toEqual([KEPT]);
    expect(order['removed']).toEqual([DROPPED, ADDED]);

    // 3. The restarted group lists n6 up again and neither removed node.
    const after = await until('the restarted group with n6 up', 120_000, async () => {
      const list = await nodes(cl);
      return list !== undefined && list.map((n) => n.node).sort().join() === members.join() && list.every((n) => n.state === 'up') ? list : undefined;
    });
    console.log(`hosts nodes: ${after.map((n) => n.node).join(', ')} up ${Date.now() - resetAt} ms after the cut`);
    const restores = (await cl.status())?.watchdog?.restores ?? [];
    expect(restores.filter((r) => r.kind === 'restored').map((r) => [r.task, r.ok])).toEqual(expect.arrayContaining([
      [`node.add ${KEPT}`, true], [`node.remove ${DROPPED}`, true],
    ]));
    // Neither removed host was booted: nothing runs in its namespace.
    for (const host of [ADDED, DROPPED]) expect(await cl.pidsIn(host), `${host}'s namespace`).toEqual([]);

    // 4. A task of one process per member host runs on exactly those hosts.
    const spread = await submit(cl, members.length, 'after-reset');
    const running = await runningTask(cl, spread);
    expect(running.procs.map((p) => p.node).sort()).toEqual(members);
    expect((await cl.op(['kill', spread])).code).toBe(0);
  }, 360_000);
});
