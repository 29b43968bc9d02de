// `trine logs` on a cluster of several hosts (PROTOCOL §7.1): every task process's output lives in
// the bundle of the host that ran it, and the operator — in a namespace of its own, with the
// operator bundle alone (test/hosts/cluster.ts) — reads it from that host's agent over the
// network, with the same prefixes, filters and --follow as on one host. Only an operator may read:
// an agent's key forging the request gets nothing, and the target agent logs the refusal. A host
// that does not answer is named on stderr while the rest prints, and the command exits 1. Needs
// root and network namespaces; skipped, with the reason, without.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClusterView, TaskView } from '../../src/core/status.ts';
import { HostsCluster, REPO } from '../hosts/cluster.ts';
import { testBedSupported } from '../hosts/testbed.ts';
import { waitFor } from './helpers.ts';

const supported = testBedSupported();
if (!supported.ok) console.warn(`hosts logs e2e skipped: ${supported.why}`);
const READER = join(REPO, 'test/fixtures/logs-reader.ts');

const view = (c: HostsCluster): Promise<ClusterView> => c.view();

/** waitFor (test/e2e/helpers.ts), polling every half second by default: each probe runs a CLI. */
const until = <T>(what: string, ms: number, probe: () => Promise<T | undefined>, pollMs = 500): Promise<T> => waitFor(what, ms, probe, pollMs);

async function finished(c: HostsCluster, id: string): Promise<TaskView> {
  return until(`${id} finished`, 60_000, async () => {
    const t = (await view(c)).tasks.find((x) => x.id === id);
    return t?.outcome !== null && t?.outcome !== undefined ? t : undefined;
  });
}

async function submit(c: HostsCluster, script: string): Promise<string> {
  const r = await c.op(['submit', '-n', '4', '--', '/bin/sh', '-c', script]);
  expect(r.code, r.stderr).toBe(0);
  return r.stdout.trim();
}

/** What test/fixtures/logs-reader.ts got back for one `logs.read` signed by `id` (from `bundle`),
 *  sent from inside `host`'s namespace to `agent`. */
async function readAs(
  c: HostsCluster, host: string, bundle: string, id: string, agent: string, task: string, vpid: number,
): Promise<{ connected: boolean; replies: { ok: boolean; missing: boolean; bytes: string }[] }> {
  const args = ['--import', 'tsx', READER, bundle, id, agent, task, String(vpid), 'out', '3000'];
  const r = await c.bed.run(host, process.execPath, args, { cwd: REPO, timeoutMs: 60_000 });
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout.trim().split('\n').pop() as string) as never;
}

describe.skipIf(!supported.ok)('trine logs on a cluster of four hosts, from the operator host (network namespaces)', () => {
  let c: HostsCluster;
  /** A finished task that wrote `out V a`, `err V` and an unterminated `out V b` on every host. */
  let done: TaskView;

  beforeAll(async () => {
    c = await HostsCluster.start();
    const id = await submit(c, 'echo "out $TRINE_VPID a"; echo "err $TRINE_VPID" >&2; printf "out %s b" "$TRINE_VPID"');
    done = await finished(c, id);
  }, 210_000);
  afterAll(async () => {
    await c?.destroy();
  }, 60_000);

  it('prints every process\'s stdout and stderr, read from the agent of the host that ran it, with the local prefixes', async () => {
    const id = done.id;
    expect(done.outcome).toBe('normal');
    expect(done.procs.map((p) => p.node).sort()).toEqual(['n1', 'n2', 'n3', 'n4']); // one process per host
    // The output is on the hosts' disks, not in the operator's bundle.
    expect(existsSync(join(c.opBundle, 'logs', 'tasks', id))).toBe(false);
    const r = await c.op(['logs', id]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toBe('');
    const want = [0, 1, 2, 3].flatMap((v) => [`[${id}/${v}] out ${v} a`, `[${id}/${v}] out ${v} b`, `[${id}/${v} err] err ${v}`]);
    expect(r.stdout.split('\n').filter((l) => l !== '')).toEqual(want);
  });

  it('--vpid and --out / --err filter as on one host', async () => {
    const id = done.id;
    const err = await c.op(['logs', id, '--vpid', '2', '--err']);
    expect(err.code, err.stderr).toBe(0);
    expect(err.stdout).toBe(`[${id}/2 err] err 2\n`);
    const out = await c.op(['logs', id, '--vpid', '3', '--out']);
    expect(out.code, out.stderr).toBe(0);
    expect(out.stdout).toBe(`[${id}/3] out 3 a\n[${id}/3] out 3 b\n`);
    const none = await c.op(['logs', id, '--vpid', '4']);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain(`${id} has no process 4`);
  });

  it('--follow prints a running task\'s lines as they come, each exactly once and in order, and returns once it has ended', async () => {
    const id = await submit(c, 'i=0; while [ $i -lt 10 ]; do echo "tick $TRINE_VPID $i"; i=$((i+1)); /bin/sleep 0.2; done');
    const startedMs = Date.now();
    const r = await c.op(['logs', id, '--follow'], 90_000);
    const tookMs = Date.now() - startedMs;
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.split('\n').filter((l) => l !== '');
    for (const v of [0, 1, 2, 3]) {
      expect(lines.filter((l) => l.startsWith(`[${id}/${v}] `)), `process ${v}`).toEqual(Array.from({ length: 10 }, (_, i) => `[${id}/${v}] tick ${v} ${i}`));
    }
    expect(lines).toHaveLength(40);
    const t = (await view(c)).tasks.find((x) => x.id === id);
    expect(t?.outcome, 'the command returned after the task ended').toBe('normal');
    console.log(`hosts logs: --follow of a 2 s task returned after ${tookMs} ms`);
  }, 120_000);

  it('only an operator may read: an agent\'s key forging the request gets nothing, and the target agent logs the refusal', async () => {
    const id = done.id;
    const vpidOnN1 = done.procs.find((p) => p.node === 'n1')?.vpid as number;
    // The control: the operator's key, from the operator host, reads n1's file.
    const op = await readAs(c, 'ops', c.opBundle, 'op', 'a1', id, vpidOnN1);
    expect(op.connected).toBe(true);
    expect(op.replies).toEqual([expect.objectContaining({ ok: true, missing: false, bytes: `out ${vpidOnN1} a\nout ${vpidOnN1} b` })]);
    // a4's key, from n4's own bundle, asking a1 for the same.
    const forged = await readAs(c, 'n4', c.bundle('n4'), 'a4', 'a1', id, vpidOnN1);
    expect(forged.connected, 'a4 reached a1 and sent its request').toBe(true);
    expect(forged.replies).toEqual([]);
    const refused = c.logEvents('n1', 'a1').filter((e) => e['event'] === 'logs.read.refused');
    expect(refused.map((e) => [e['from'], e['code']])).toContainEqual(['a4', 'NOT_A_MEMBER']);
    // And a path outside logs/tasks/ never decodes: no answer, even to the operator.
    const escape = await readAs(c, 'ops', c.opBundle, 'op', 'a1', '../../keys', 0);
    expect(escape.connected).toBe(true);
    expect(escape.replies).toEqual([]);
  }, 60_000);

  it('a host that does not answer is named once with its process; the others still print; exit 1 with what to do', async () => {
    const id = done.id;
    const lost = done.procs.find((p) => p.node === 'n4')?.vpid as number;
    await c.bed.cut('n4');
    try {
      const r = await c.op(['logs', id]);
      expect(r.code).toBe(1);
      const warnings = r.stderr.split('\n').filter((l) => l.includes('did not answer'));
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toContain('node n4 (agent a4)');
      expect(warnings[0]).toContain(`${id}/${lost}`);
      expect(r.stderr).toContain(`the output of ${id}/${lost} (n4) could not be read`);
      expect(r.stderr).toContain(`trine logs ${id}`);
      const want = [0, 1, 2, 3].filter((v) => v !== lost)
        .flatMap((v) => [`[${id}/${v}] out ${v} a`, `[${id}/${v}] out ${v} b`, `[${id}/${v} err] err ${v}`]);
      expect(r.stdout.split('\n').filter((l) => l !== '')).toEqual(want);
    } finally {
      await c.bed.restore('n4');
    }
  }, 60_000);
});
