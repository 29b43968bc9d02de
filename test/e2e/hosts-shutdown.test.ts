// `trine shutdown` on a cluster of several hosts (PROTOCOL §10.11): the operator, in a namespace
// of its own with the operator bundle alone (test/hosts/cluster.ts), stops the whole cluster. The
// group kills the running task, every node stops its task processes and exits, the watchdog
// stands down without resetting anything, and every daemon exits with EXIT_SHUTDOWN (4), which
// neither the keeper nor the systemd units written by `trine init` restart. What is checked is
// what an operator or a peer sees: the command's output, the exit codes of the `trine node run` /
// `trine scc run` processes the harness started (what systemd would see), the hosts' namespaces
// left empty, the daemons' logs and the bundles' units. Needs root and network namespaces;
// skipped, with the reason, without.
import { execFileSync, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exitOf, HostsCluster } from '../hosts/cluster.ts';
import { testBedSupported } from '../hosts/testbed.ts';
import { alive, waitFor } from './helpers.ts';

const supported = testBedSupported();
if (!supported.ok) console.warn(`hosts shutdown e2e skipped: ${supported.why}`);

/** EXIT_SHUTDOWN (src/core/constants.ts), spelled out: it is the contract with systemd. */
const EXIT_SHUTDOWN = 4;
/** How long the daemons may take to exit once `trine shutdown` returned: `node run` waits up to
 *  7 s for its replicas (cli/node-run.ts NODE_SHUTDOWN_WAIT_MS), and the command returns as soon
 *  as nobody answers. */
const EXIT_WAIT_MS = 15_000;

/** waitFor (test/e2e/helpers.ts), polling every half second: each probe runs a CLI. */
const until = <T>(what: string, ms: number, probe: () => Promise<T | undefined>): Promise<T> => waitFor(what, ms, probe, 500);


/** The pids inside a namespace, as the kernel lists them (daemons that left our process groups
 *  and task processes included). */
function pidsIn(ns: string): number[] {
  const out = execFileSync('ip', ['netns', 'pids', ns], { encoding: 'utf8', env: { ...process.env, PATH: `${process.env['PATH'] ?? ''}:/usr/sbin:/sbin` } });
  return out.split('\n').map((l) => Number(l.trim())).filter((p) => Number.isSafeInteger(p) && p > 0);
}

/** `pid`'s command line, for a failure message. */
function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim();
  } catch {
    return '(gone)';
  }
}

/** Reset-related events (the watchdog's and the replicas'), the driver's start-up line aside. */
const isReset = (e: Record<string, unknown>): boolean =>
  typeof e['event'] === 'string' && /^(reset\.|node\.reset|cluster\.reset)/.test(e['event']) && e['event'] !== 'reset.driver';

describe.skipIf(!supported.ok)('trine shutdown on a cluster of four hosts, from the operator host (network namespaces)', () => {
  let c: HostsCluster | undefined;

  beforeAll(async () => {
    c = await HostsCluster.start();
  }, 150_000);
  afterAll(async () => {
    // Every daemon should be gone by now: destroy() then only removes empty namespaces.
    await c?.destroy();
  }, 60_000);

  it('stops every host\'s daemons and the watchdog with exit code 4, kills the running task, resets nothing and leaves no process behind (PROTOCOL §10.11)', async () => {
    const cl = c as HostsCluster;
    const config = JSON.parse(readFileSync(join(cl.opBundle, 'cluster.json'), 'utf8')) as {
      cluster: string;
      membership: { replicas: string[]; scc: string; agents: { id: string; node: string }[] };
      processes: { id: string; node: string | null }[];
    };
    const agentOf = new Map(config.membership.agents.map((a) => [a.node, a.id]));
    const replicaHost = new Map(config.membership.replicas.map((r) => [r, config.processes.find((p) => p.id === r)?.node as string]));
    expect([...agentOf.keys()].sort()).toEqual(cl.nodes);

    // 1. A task of four long-running processes, one on every host.
    const submit = await cl.op(['submit', '-n', '4', '--name', 'sleepers', '--', '/bin/sh', '-c', 'echo up; exec sleep 600']);
    expect(submit.code, submit.stderr).toBe(0);
    const id = submit.stdout.trim();
    const running = await until('a running task', 30_000, async () => {
      const t = (await cl.view()).tasks.find((x) => x.id === id);
      return t?.state === 'running' && t.procs.every((p) => p.pid !== null) ? t : undefined;
    });
    expect(running.procs.map((p) => p.node).sort()).toEqual(cl.nodes);
    const taskPids = running.procs.map((p) => p.pid as number);
    await until('every process to have started its sleep', 10_000, async () =>
      (running.procs.every((p) => {
        const f = join(cl.bundle(p.node as string), 'logs', 'tasks', id, `${p.vpid}.out`);
        return existsSync(f) && readFileSync(f, 'utf8').includes('up');
      }) ? true : undefined));
    for (const pid of taskPids) expect(alive(pid), `task process ${pid} runs`).toBe(true);

    // 2. The operator shuts the cluster down.
    const startedAt = Date.now();
    const r = await cl.op(['shutdown'], 60_000);
    const tookMs = Date.now() - startedAt;
    expect(r.code, `stdout: ${r.stdout}\nstderr: ${r.stderr}\n${cl.tails()}`).toBe(0);
    const [first, second] = r.stdout.trim().split('\n');
    expect(first).toMatch(new RegExp(`^cluster ${config.cluster}: cluster shutting down: .* told to stop; killed .*\\(ordered at RSN \\d+\\)$`));
    const told = /shutting down: (.*) told to stop/.exec(first as string)?.[1]?.split(', ').sort();
    expect(told, 'every node is told to stop').toEqual(cl.nodes);
    expect(/killed (.*) \(ordered/.exec(first as string)?.[1]?.split(', ')).toEqual([id]);
    expect(second).toMatch(/^stopped: no replica and no watchdog answers \(\d+\.\d s\); /);

    // 3. Every `trine node run` and the `trine scc run` the harness started exited with 4 (what
    //    systemd sees, and does not restart on), each started once.
    const hosts = [...cl.nodes, 'wd'];
    const exits = Object.fromEntries(await Promise.all(hosts.map(async (h) => {
      const started = cl.daemonsOf(h);
      expect(started, `${h} was started once by the harness`).toHaveLength(1);
      return [h, await exitOf(started[0] as ChildProcess, EXIT_WAIT_MS)] as const;
    })));
    const exitedBy = Date.now() - startedAt;
    expect(exits, cl.tails()).toEqual(Object.fromEntries(hosts.map((h) => [h, EXIT_SHUTDOWN])));
    for (const n of cl.nodes) {
      expect(readFileSync(cl.bootLog(n), 'utf8'), `${n}'s node run`).toContain(`node ${n}: stopped for the shutdown (exit ${EXIT_SHUTDOWN}`);
      expect(existsSync(join(cl.bundle(n), 'run', `${agentOf.get(n)}.shutdown`)), `${n}'s shutdown marker`).toBe(true);
    }

    // No process of the cluster is left in any namespace: no daemon, no standby, no task process.
    for (const [name, host] of cl.bed.hosts) {
      const left = pidsIn(host.ns);
      expect(left.map((p) => `${p} ${cmdline(p)}`), `processes left in ${name}'s namespace`).toEqual([]);
    }
    for (const pid of taskPids) expect(alive(pid), `task process ${pid} is gone`).toBe(false);

    // The keepers: the agent exited for the shutdown, the keeper with it, and nothing started
    // again (one keeper start, no agent restart, nothing after the exit).
    for (const n of cl.nodes) {
      const agent = agentOf.get(n) as string;
      const keeper = cl.logEvents(n, `${agent}-keeper`);
      const exitsLogged = keeper.filter((e) => e['event'] === 'exit');
      expect(exitsLogged.map((e) => e['code']), `${agent}-keeper exit`).toEqual([EXIT_SHUTDOWN]);
      const exitAt = keeper.indexOf(exitsLogged[0] as Record<string, unknown>);
      expect(keeper.filter((e) => e['event'] === 'start'), `${agent}-keeper started once`).toHaveLength(1);
      expect(keeper.slice(exitAt + 1).map((e) => e['event']), `${agent}-keeper logged nothing after its exit`).toEqual([]);
      expect(keeper.filter((e) => e['event'] === 'agent.restart'), `${agent} not restarted`).toEqual([]);
      const agentLog = cl.logEvents(n, agent);
      expect(agentLog.filter((e) => e['event'] === 'start'), `${agent} started once (no standby promoted after the shutdown)`).toHaveLength(1);
      expect(agentLog.some((e) => e['event'] === 'node.shutdown'), `${agent} took node.shutdown`).toBe(true);
      expect(agentLog.filter((e) => e['event'] === 'exit').map((e) => e['code']), `${agent} exit`).toEqual([EXIT_SHUTDOWN]);
    }
    // The replicas ordered the shutdown, exited with 4, and asked for no node reset.
    for (const [replica, host] of replicaHost) {
      const events = cl.logEvents(host, replica);
      const orderedAt = events.findIndex((e) => e['event'] === 'shutdown.ordered');
      expect(orderedAt, `${replica} ordered the shutdown`).toBeGreaterThanOrEqual(0);
      expect(events.filter((e) => e['event'] === 'exit').map((e) => e['code']), `${replica} exit`).toEqual([EXIT_SHUTDOWN]);
      expect(events.slice(orderedAt).filter(isReset), `${replica} asked for no reset after the shutdown`).toEqual([]);
    }

    // 4. The watchdog stood down: a `shutdown` event, no reset of a node or of the cluster
    //    after it, and exit code 4.
    const scc = cl.logEvents('wd', config.membership.scc);
    const shutdownAt = scc.findIndex((e) => e['event'] === 'shutdown');
    expect(shutdownAt, 'the watchdog logged the shutdown').toBeGreaterThanOrEqual(0);
    expect((scc[shutdownAt]?.['by'] as string[] | undefined)?.length).toBeGreaterThanOrEqual(2);
    expect(scc.slice(shutdownAt).filter(isReset), 'the watchdog reset nothing after the shutdown').toEqual([]);
    expect(scc.filter(isReset), 'nor before it: the cluster had no fault').toEqual([]);
    expect(scc.filter((e) => e['event'] === 'exit').map((e) => e['code'])).toEqual([EXIT_SHUTDOWN]);

    // 5. The units `trine init` wrote into the bundles keep systemd from restarting on exit 4.
    for (const n of cl.nodes) {
      const unit = readFileSync(join(cl.bundle(n), 'trine-node.service'), 'utf8');
      expect(unit, `${n}'s unit`).toMatch(/^Restart=always$/m);
      expect(unit, `${n}'s unit`).toMatch(new RegExp(`^RestartPreventExitStatus=${EXIT_SHUTDOWN}$`, 'm'));
    }
    const sccUnit = readFileSync(join(cl.bundle('wd'), 'trine-scc.service'), 'utf8');
    expect(sccUnit).toMatch(new RegExp(`^RestartPreventExitStatus=${EXIT_SHUTDOWN}$`, 'm'));

    console.log(`hosts shutdown: \`trine shutdown\` returned after ${tookMs} ms; every daemon had exited ${exitedBy} ms after it began\n${r.stdout.trim()}`);
  }, 90_000);
});
