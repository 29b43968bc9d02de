// A replica replaced on a host added at run time (PROTOCOL §10.6, §10.12; issue 13 item 5: "a
// cluster can replace replicas for as long as it has healthy nodes"). Three hosts, each running
// a replica and an agent, from a hosts file with `spares-per-host: 0`: no host `trine init` made
// holds a spare key, so this cluster could never replace a replica. The operator adds a fourth
// host with `trine node add --spares 1`; its bundle holds its agent's key and spare r4's, nobody
// else's, and the hosts that were there before hold neither. Then r2 is killed: the group
// condemns it and starts r4 on the added host. The other hosts learn r4's key at run time — each
// agent from two replicas' matching commands (and keeps it in its bundle's
// run/added-replicas.json), the watchdog from two replicas' `replica.keys`, the other replicas
// from the replicated state — so the operator's `trine status` shows a healthy group of three
// that the watchdog hears whole, and a task runs on every host. Then r4 itself is killed: with
// no fresh spare left, r4 starts again on the same host as a new incarnation. (On a loaded
// machine the backups may condemn the primary while the cluster starts; with no spare it cannot
// be healthy then, so the test waits for a converged group of two, and r4 heals it as soon as n4
// joins: that is the replacement on the added host, and r2 is not killed.) Needs root and
// network namespaces; skipped, with the reason, without.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HostsCluster, type StatusParts } from '../hosts/cluster.ts';
import { namespacesOf, testBedSupported } from '../hosts/testbed.ts';
import { alive, waitFor } from './helpers.ts';

const supported = testBedSupported();
if (!supported.ok) console.warn(`hosts added-spares e2e skipped: ${supported.why}`);

/** The host the hosts file does not name. */
const ADDED = 'n4';
/** How long a replacement may take here: condemnation within a second or two, a cold replica
 *  start and a state transfer, on a 2-core machine running every namespace host. */
const REPLACED_MS = 60_000;

/** The live pid of process `id` from a bundle's run/ directory, or null. */
function pidIn(bundle: string, id: string): number | null {
  const file = join(bundle, 'run', `${id}.pid`);
  if (!existsSync(file)) return null;
  const pid = Number(readFileSync(file, 'utf8').trim());
  return Number.isSafeInteger(pid) && pid > 0 && alive(pid) ? pid : null;
}

type Watchdog = { replicas: { id: string; health: string; member: boolean }[] };

/** A healthy, converged group of exactly `members` (in any order), as the operator sees it. */
const groupOf = (cl: HostsCluster, members: string[], what: string): Promise<StatusParts & { watchdog: Watchdog }> =>
  waitFor(what, REPLACED_MS, async () => {
    const st = await cl.status();
    if (st === null || !st.healthy || !st.converged) return undefined;
    const ids = st.replicas.map((r) => r.id).sort();
    return JSON.stringify(ids) === JSON.stringify([...members].sort()) ? (st as StatusParts & { watchdog: Watchdog }) : undefined;
  }, 500);

describe.skipIf(!supported.ok)('a replica replaced on a host added at run time (network namespaces)', () => {
  let c: HostsCluster | undefined;
  let tag = '';

  beforeAll(async () => {
    c = await HostsCluster.start({ agents: 3, sparesPerHost: 0, extraHosts: [ADDED], ready: (s) => s.converged && s.replicas.length >= 2 });
    tag = c.bed.tag;
  }, 150_000);
  afterAll(async () => {
    await c?.destroy();
    expect(await namespacesOf(tag), 'namespaces left by this test').toEqual([]);
  }, 60_000);

  it('PROTOCOL §10.12: the added host\'s spare replaces a killed replica, and starts again when it is killed in turn; every host learns its key at run time', { timeout: 300_000 }, async () => {
    const cl = c as HostsCluster;
    const address = cl.bed.host(ADDED).address;
    const started = await cl.status();
    const startMembers = (started?.replicas ?? []).map((r) => r.id);

    // 1. No host holds a spare key: the pool is the three initial replicas.
    for (const h of cl.nodes) expect(readdirSync(join(cl.bundle(h), 'keys')).sort(), h).toEqual([`a${h.slice(1)}.json`, `r${h.slice(1)}.json`]);

    // 2. Add n4 with one spare: r4, on the port below its agent's, its key in n4's bundle only.
    const add = await cl.nodeOp('add', ['--id', ADDED, '--address', address, '--spares', '1']);
    expect(add.code, `stdout: ${add.stdout}\nstderr: ${add.stderr}`).toBe(0);
    expect(add.stdout).toContain('node n4 added (agent a4 at ');
    expect(add.stdout).toContain('spare replica r4 on port 7400');
    expect(readdirSync(join(cl.bundle(ADDED), 'keys')).sort()).toEqual(['a4.json', 'r4.json']);
    for (const h of cl.nodes) expect(existsSync(join(cl.bundle(h), 'keys', 'r4.json')), `${h} holds no key of r4`).toBe(false);
    const bootedAt = Date.now();
    cl.boot(ADDED);

    // 3. r4 replaces a replica on n4, the only host holding a spare key: r2, killed now, or the
    //    one condemned while the cluster started, as soon as n4 joins.
    let replaced: string;
    if (startMembers.length === 2) {
      replaced = ['r1', 'r2', 'r3'].find((r) => !startMembers.includes(r)) as string;
      await groupOf(cl, [...startMembers, 'r4'], `r4 in a healthy group instead of ${replaced}`);
      console.log(`${replaced} was condemned while the cluster started → r4 serving on ${ADDED} ${Date.now() - bootedAt} ms after n4 booted`);
    } else {
      await waitFor(`${ADDED} up`, 60_000, async () => {
        const r = await cl.op(['nodes', '--json', '--timeout', '2000']);
        return r.code === 0 && (JSON.parse(r.stdout) as { nodes: { node: string; state: string }[] }).nodes.some((x) => x.node === ADDED && x.state === 'up') ? true : undefined;
      }, 500);
      replaced = 'r2';
      const r2 = pidIn(cl.bundle('n2'), 'r2');
      expect(r2, 'r2 runs on n2').not.toBeNull();
      const killedAt = Date.now();
      process.kill(r2 as number, 'SIGKILL');
      await groupOf(cl, ['r1', 'r3', 'r4'], 'r4 in a healthy group instead of r2');
      console.log(`r2 killed → r4 serving on ${ADDED}, group healthy after ${Date.now() - killedAt} ms`);
    }
    const st = await groupOf(cl, ['r1', 'r2', 'r3', 'r4'].filter((r) => r !== replaced), 'the group with r4');
    expect(pidIn(cl.bundle(ADDED), 'r4'), 'r4 runs on the added host').not.toBeNull();
    // The watchdog hears r4 (\`healthy\` says it hears every member).
    expect(st.watchdog.replicas.find((r) => r.id === 'r4')).toMatchObject({ member: true, health: 'healthy' });
    // The agents that were there before learnt r4 from two replicas and kept it on their disk.
    for (const h of cl.nodes) {
      const kept = JSON.parse(readFileSync(join(cl.bundle(h), 'run', 'added-replicas.json'), 'utf8')) as { replicas: { id: string; node: string; port: number }[] };
      expect(kept.replicas, h).toEqual([expect.objectContaining({ id: 'r4', node: ADDED, port: 7400 })]);
    }
    // The group still orders, and every agent takes its commands: a task on every host.
    const submit = await cl.op(['submit', '--wait', '-n', '4', '--', '/bin/true']);
    expect(submit.code, submit.stderr).toBe(0);

    // 4. Kill r4: no fresh spare is left, so r4 starts again on n4, a new incarnation.
    const first = pidIn(cl.bundle(ADDED), 'r4') as number;
    process.kill(first, 'SIGKILL');
    // Gone from the group, or already started again (a new pid in n4's run/: it may be back
    // before a poll sees it gone, and waiting for a gap that was missed took REPLACED_MS).
    await waitFor('r4 gone from the group, or started again', REPLACED_MS, async () => {
      const now = pidIn(cl.bundle(ADDED), 'r4');
      if (now !== null && now !== first) return true;
      const s = await cl.status();
      return s !== null && !s.replicas.some((r) => r.id === 'r4') ? true : undefined;
    }, 250);
    await groupOf(cl, ['r1', 'r2', 'r3', 'r4'].filter((r) => r !== replaced), 'r4 back in a healthy group');
    const again = pidIn(cl.bundle(ADDED), 'r4');
    expect(again, 'r4 runs again on the added host').not.toBeNull();
    expect(again).not.toBe(first);
    const ps = await cl.op(['ps', '--json']);
    const events = (JSON.parse(ps.stdout) as { events: { text: string }[] }).events.map((e) => e.text);
    expect(events).toContain(`replica r4 to start on ${ADDED}`);
    expect(events).toContain(`replica r4 to start on ${ADDED} (a new incarnation of a retired spare id)`);
  });
});
