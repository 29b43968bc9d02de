// `npm run demo:hosts`: the N-Queens demo (bin/demo.js) on a cluster of several hosts. Four node
// hosts, a watchdog host and an operator host are Linux network namespaces on a bridge
// (test/hosts/testbed.ts); each runs only from its own `trine init` bundle, and every operator
// command runs in the operator's namespace with the operator bundle alone (docs/OPERATIONS.md
// §9). Mid-run the demo cuts the network link of a node that runs a worker — a lost network, not
// a killed process: the node is declared failed, the manager process is notified, a replacement
// worker starts on another host, the watchdog power-cycles the node through the `command` reset
// driver, and the node rejoins once its link is back. The count must be 14,200. Needs root (it
// makes namespaces); without it, it says so and exits 1. Always removes what it made: on Ctrl-C
// (SIGINT) or SIGTERM too, saying so in one line, then it exits 130 (143 for SIGTERM).
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { HostsCluster, REPO } from '../../test/hosts/cluster.ts';
import { testBedSupported } from '../../test/hosts/testbed.ts';
import type { ClusterView } from '../../src/core/status.ts';
import { helpFromHeader } from '../common/help.ts';

helpFromHeader(import.meta.url);

const N = 12;
const EXPECTED = 14200;
/** Per work unit, so the run lasts long enough for the fault to land mid-computation. */
const PACE_MS = 300;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const supported = testBedSupported();
if (!supported.ok) {
  process.stderr.write(`demo:hosts: cannot make the test hosts: ${supported.why}. It needs root and network namespaces (ip netns); run \`sudo npm run demo:hosts\`, or \`npm run demo\` for the one-host demo\n`);
  process.exit(1);
}

let c: HostsCluster | null = null;
let failed = false;

// The test bed's own exit hook (test/hosts/testbed.ts) kills the hosts' processes and deletes
// their namespaces when the process exits, even while they are still being made (the hosts'
// daemons are in their namespaces, out of reach of the terminal's Ctrl-C). On a signal this says
// so, removes the bundles' directory and exits with the signal's code, which runs the hook.
// (`on`, not `once`: the hook re-raises a signal no other listener is left for, which would kill
// this process before its line.)
let interrupted = false;
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.on(sig, () => {
    if (interrupted) return;
    interrupted = true;
    process.stderr.write(`\ndemo:hosts interrupted (${sig}): removing the hosts\n`);
    if (c !== null) rmSync(c.root, { recursive: true, force: true });
    process.exit(sig === 'SIGINT' ? 130 : 143);
  });
}

async function op(title: string, args: string[], show = true): Promise<string> {
  if (show) process.stdout.write(`\n[ops]$ trine ${args.join(' ')}    # ${title}\n`);
  const r = await (c as HostsCluster).op(args);
  if (show) process.stdout.write(r.stdout);
  if (r.code !== 0) throw new Error(`trine ${args[0]} failed (exit ${r.code}): ${r.stderr.trim()}`);
  return r.stdout;
}

const view = async (): Promise<ClusterView> => JSON.parse(await op('', ['ps', '--json'], false)) as ClusterView;

/** Every line the task's processes printed, as {at, who, text}, from the hosts that ran them. */
function appLines(cluster: HostsCluster, id: string): { at: number; who: string; text: string }[] {
  const out: { at: number; who: string; text: string }[] = [];
  for (const host of cluster.nodes) {
    for (let vpid = 0; vpid < 16; vpid++) {
      const f = join(cluster.bundle(host), 'logs', 'tasks', id, `${vpid}.out`);
      if (!existsSync(f)) continue;
      for (const line of readFileSync(f, 'utf8').split('\n')) {
        const m = /^(\d+) (vpid=\d+ rank=-?\d+) (.*)$/.exec(line);
        if (m !== null) out.push({ at: Number(m[1]), who: `${m[2]}@${host}`, text: m[3] as string });
      }
    }
  }
  return out;
}

async function waitFor<T>(what: string, test: () => Promise<T | null | undefined> | T | null | undefined, timeoutMs: number): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const r = await test();
    if (r !== null && r !== undefined && r !== false) return r;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await sleep(200);
  }
}

try {
  process.stdout.write('# making hosts n1..n4, wd (watchdog) and ops (operator) as network namespaces; trine init; trine node run / scc run on each from its own bundle\n');
  const started = Date.now();
  c = await HostsCluster.start();
  const cluster = c;
  process.stdout.write(`cluster up and healthy in ${((Date.now() - started) / 1000).toFixed(1)} s: ${cluster.nodes.map((n) => `${n} ${cluster.bed.host(n).address}`).join(', ')}; watchdog ${cluster.bed.host('wd').address}; operator ${cluster.bed.host('ops').address}\n`);
  await op('the group as the operator sees it, over the network', ['status']);

  const app = ['--import', 'tsx', 'examples/nqueens/nqueens.ts', '--n', String(N), '--pace-ms', String(PACE_MS)];
  const submittedAt = Date.now();
  const id = (await op('N-Queens: a manager and 3 workers, one per host', ['submit', '--linked', '-n', '4', '--name', 'nqueens', '--cwd', REPO, '--', process.execPath, ...app])).trim();
  await waitFor('every process started and agreed on the quorum', () => appLines(cluster, id).filter((l) => /quorum/.test(l.text)).length >= 4, 90_000);
  await sleep(1500);

  const t = (await view()).tasks.find((x) => x.id === id);
  const victim = t?.procs.find((p) => p.vpid !== 0 && p.state === 'running' && p.node !== t.procs.find((q) => q.vpid === 0)?.node);
  if (victim === undefined || victim.node === null) throw new Error('no worker on a host of its own');
  const node = victim.node;
  process.stdout.write(`\n$ ip link set eth0 down   # in ${node}: cut the network of the host that runs worker ${id}/${victim.vpid}\n`);
  const cutAt = Date.now();
  await cluster.bed.cut(node);
  await waitFor('the manager to recover', () => appLines(cluster, id).some((l) => l.at > cutAt && /recoverComm: SUCCESS|spawned a replacement/.test(l.text)), 90_000);
  await waitFor(`the watchdog to reset ${node}`, () => cluster.logEvents('wd', 'scc').some((e) => e['event'] === 'reset.done' && e['node'] === node), 60_000);
  process.stdout.write(`\n$ ip link set eth0 up     # in ${node}: the network is back; the node, reset meanwhile, rejoins\n`);
  await cluster.bed.restore(node);

  const done = await waitFor('the task to finish', async () => {
    const v = await view();
    const x = v.tasks.find((y) => y.id === id);
    return x !== undefined && x.outcome !== null ? v : null;
  }, 180_000);
  process.stdout.write(`\n# timeline (ms after \`trine submit\`): the group's journal [group], the watchdog [scc] and the processes' own logs\n`);
  const KEEP = /started: RECOVERED|NTF_DIED|timeout waiting|diagnosis: kill|killed vpid|spawned a replacement|recoverComm: SUCCESS|RESULT/;
  const rows = [
    ...done.events.filter((e) => (e.task === id || e.text.startsWith(`node ${node}`)) && !/placed|starting|submitted/.test(e.text)).map((e) => ({ at: e.atMs, who: '[group]', text: e.text })),
    ...cluster.logEvents('wd', 'scc').filter((e) => e['event'] === 'reset.done' && e['node'] === node).map((e) => ({ at: Date.parse(String(e['time'])), who: '[scc]', text: `reset ${node} through the command driver (${String(e['durationMs'])} ms)` })),
    { at: cutAt, who: '[demo]', text: `link of ${node} cut` },
    ...appLines(cluster, id).filter((l) => KEEP.test(l.text)),
  ].sort((a, b) => a.at - b.at);
  for (const r of rows) process.stdout.write(`  +${String(Math.round(r.at - submittedAt)).padStart(6)} ms  ${r.who.padEnd(22)} ${r.text}\n`);
  await op('the task after the lost host', ['ps', id]);
  await waitFor(`${node} to rejoin`, async () => ((await view()).nodes.find((n) => n.node === node)?.state === 'up' ? true : null), 60_000);
  await op(`${node} rejoined after its reset`, ['nodes']);
  const result = appLines(cluster, id).find((l) => /^RESULT /.test(l.text));
  if (result === undefined) throw new Error('the manager printed no RESULT line');
  const count = Number(/solutions=(\d+)/.exec(result.text)?.[1]);
  process.stdout.write(`\nN-Queens n=${N} on ${cluster.nodes.length} hosts: ${count} solutions (expected ${EXPECTED}) after losing ${node}'s network: ${count === EXPECTED ? 'correct' : 'WRONG'}\n`);
  if (count !== EXPECTED) throw new Error(`wrong count ${count}`);
} catch (e) {
  failed = true;
  process.stderr.write(`\ndemo:hosts failed: ${(e as Error).message}\n${c?.tails() ?? ''}\n`);
} finally {
  process.stdout.write('\n# removing the hosts: every process, namespace and link the demo made\n');
  await c?.destroy();
}
process.stdout.write(failed ? 'demo:hosts FAILED\n' : 'demo:hosts OK\n');
process.exit(failed ? 1 : 0);
