// `trine inject` on live local clusters (issue 5 item 5; docs/OPERATIONS.md §7), as an operator
// runs it:
//   - a cluster started without --allow-inject: `trine inject` is refused (exit 1, "restart it
//     with `trine up --allow-inject`"), and an `inject` frame sent to a replica anyway reaches its
//     core (no hook is installed), which drops it unanswered;
//   - a cluster started with it: hang + resume of a task process (state T in /proc, then not),
//     kill-agent (the keeper starts a new agent, which joins with a new incarnation), drop + heal
//     of a link (the watchdog stops hearing r2, then hears it again), a daemon that does not
//     answer in time, bad arguments, and kill-replica (the pid is gone; how the group reacts is
//     tested elsewhere);
//   - `trine down` then leaves no process that mentions the test dir.
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { alive, processesMentioning, trine, waitFor } from './helpers.ts';
import { killAll } from '../integration/helpers.ts';
import type { StatusDocument } from '../../cli/status-report.ts';
import { OperatorClient } from '../../cli/status-client.ts';
import type { ClusterView, NodeView } from '../../src/core/status.ts';
import { loadCluster } from '../../src/io/cluster-dir.ts';

/** Liveness deadlines: generous, for a loaded 2-core host running two e2e files at once. */
const SOON_MS = 15_000;

let root = '';
let plain = '';
let dir = '';
let upInject = '';

const recordedPid = (d: string, file: string): number | null => {
  try {
    const n = Number(readFileSync(join(d, 'run', file), 'utf8').trim());
    return Number.isSafeInteger(n) && n > 1 ? n : null;
  } catch {
    return null;
  }
};

/** Field 3 of /proc/<pid>/stat: R, S, T (stopped), Z, … */
function procState(pid: number): string {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
}

async function status(d: string): Promise<StatusDocument> {
  const r = await trine(['status', '--json', '--dir', d]);
  return JSON.parse(r.stdout) as StatusDocument;
}

async function view(): Promise<ClusterView> {
  const r = await trine(['ps', '--json', '--dir', dir]);
  expect(r.code).toBe(0);
  return JSON.parse(r.stdout) as ClusterView;
}

async function nodeOf(node: string): Promise<NodeView> {
  const r = await trine(['nodes', '--json', '--dir', dir]);
  expect(r.code).toBe(0);
  const n = (JSON.parse(r.stdout) as { nodes: NodeView[] }).nodes.find((x) => x.node === node);
  if (n === undefined) throw new Error(`no node ${node}`);
  return n;
}

const processesOfTestDir = (): number[] => processesMentioning(root);

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'trine-inject-'));
  plain = join(root, 'plain');
  dir = join(root, 'inject');
  // Both clusters at once: the file stays short (a `trine up` is mostly waiting).
  const [a, b] = await Promise.all([
    trine(['up', '--nodes', '3', '--dir', plain], 90_000),
    trine(['up', '--nodes', '3', '--allow-inject', '--dir', dir], 90_000),
  ]);
  for (const up of [a, b]) if (up.code !== 0) throw new Error(`trine up failed: ${up.stderr}`);
  upInject = b.stdout;
}, 120_000);

afterAll(async () => {
  for (const d of [plain, dir]) if (existsSync(join(d, 'run'))) await trine(['down', '--dir', d]);
  killAll(processesOfTestDir());
  rmSync(root, { recursive: true, force: true });
}, 60_000);

describe('trine inject', () => {
  it('a cluster started without --allow-inject refuses it, and its replicas drop inject frames unanswered', async () => {
    expect('allowInject' in (JSON.parse(readFileSync(join(plain, 'cluster.json'), 'utf8')) as object)).toBe(false);
    const r2 = recordedPid(plain, 'r2.pid') as number;
    const refused = await trine(['inject', 'kill-replica', 'r2', '--dir', plain]);
    expect(refused.code).toBe(1);
    expect(refused.stdout).toBe('');
    expect(refused.stderr).toBe(
      `trine: the cluster in ${plain} was started without --allow-inject, so it accepts no injected faults: ` +
        `restart it with \`trine down --dir ${plain}\` and \`trine up --allow-inject --dir ${plain}\`\n`,
    );
    expect(alive(r2)).toBe(true);

    // Past the CLI's check, the daemon has no hook: the item reaches its core, which drops it
    // (a fresh cluster has dropped nothing before).
    const drops = async () => Object.values((await status(plain)).replicas.find((r) => r.id === 'r2')?.drops ?? {}).reduce((a, b) => a + b, 0);
    const before = await drops();
    const client = await OperatorClient.open(loadCluster(plain));
    try {
      expect(await client.inject('r2', 'drop', ['r2', 'r3'], 1_000)).toBeNull();
    } finally {
      await client.close();
    }
    expect(await drops()).toBeGreaterThan(before);

    const down = await trine(['down', '--dir', plain]);
    expect(down.code).toBe(0);
    const [notRunning, noCluster] = await Promise.all([
      trine(['inject', 'kill-replica', 'r2', '--dir', plain]),
      trine(['inject', 'kill-replica', 'r2', '--dir', join(root, 'nothing')]),
    ]);
    expect(notRunning.code).toBe(1);
    expect(notRunning.stderr).toBe(`trine: no cluster is running in ${plain}: start one with \`trine up --allow-inject --dir ${plain}\`\n`);
    expect(noCluster.code).toBe(2);
    expect(noCluster.stderr).toMatch(/^trine: no cluster at .*nothing: run `trine up/);
  });

  it('trine up --allow-inject records it in cluster.json', () => {
    expect(upInject).toContain('fault injection allowed');
    expect((JSON.parse(readFileSync(join(dir, 'cluster.json'), 'utf8')) as { allowInject?: boolean }).allowInject).toBe(true);
  });

  it('hang and resume a task process: SIGSTOP (state T), then SIGCONT', async () => {
    const s = await trine(['submit', '--dir', dir, '--', 'sleep', '300']);
    expect(s.code).toBe(0);
    const task = s.stdout.trim();
    const pid = await waitFor(`${task} running`, SOON_MS, async () => {
      const p = (await view()).tasks.find((t) => t.id === task)?.procs[0];
      return p?.state === 'running' && p.pid !== null ? p.pid : undefined;
    });
    // Only the cluster's own processes: pid 1 is refused.
    const [hang, other] = await Promise.all([trine(['inject', 'hang', String(pid), '--dir', dir]), trine(['inject', 'hang', '1', '--dir', dir])]);
    expect(other.code).toBe(2);
    expect(other.stderr).toBe(
      `trine: pid 1 is not a process of the cluster in ${dir}: inject hang acts only on its daemons (pids in run/*.pid, run/*.supervised-pid, run/*.agent-pid) ` +
        'and the task processes its agents run (`trine ps`)\n',
    );
    expect(hang.stderr).toBe('');
    expect(hang.code).toBe(0);
    expect(hang.stdout).toBe(`hung task process ${task}/0 (pid ${pid}) with SIGSTOP: resume it with \`trine inject resume ${pid}\`\n`);
    expect(procState(pid)).toBe('T');
    const resume = await trine(['inject', 'resume', `${task}/0`, '--dir', dir]);
    expect(resume.code).toBe(0);
    expect(resume.stdout).toBe(`resumed task process ${task}/0 (pid ${pid}) with SIGCONT\n`);
    expect(procState(pid)).not.toBe('T');
  });

  it('kill-agent: the agent is SIGKILLed and its keeper starts a new one, which joins with a new incarnation', async () => {
    const before = await nodeOf('n2');
    const agent = recordedPid(dir, 'a2.agent-pid') as number;
    const keeper = recordedPid(dir, 'a2.pid') as number;
    expect(alive(agent)).toBe(true);
    const r = await trine(['inject', 'kill-agent', 'n2', '--dir', dir]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`killed n2's agent a2 (pid ${agent}) with SIGKILL; its keeper (pid ${keeper}) replaces it\n`);
    expect(alive(agent)).toBe(false);
    const next = await waitFor('a new a2 agent', SOON_MS, () => {
      const pid = recordedPid(dir, 'a2.agent-pid');
      return pid !== null && pid !== agent && alive(pid) ? pid : undefined;
    });
    const rejoined = await waitFor('n2 up with a new incarnation', SOON_MS, async () => {
      const n = await nodeOf('n2');
      return n.state === 'up' && n.inc > before.inc ? n : undefined;
    });
    expect(rejoined.agent).toBe('a2');
    if (!alive(keeper)) {
      // On a loaded host the group may declare n2 failed before the new agent has joined; the
      // watchdog then resets the node, keeper included (PROTOCOL §8.4), and n2 comes back just
      // the same. Only that may have ended the keeper.
      expect(readFileSync(join(dir, 'logs', 'scc.log'), 'utf8')).toMatch(/"event":"reset\.start","node":"n2"/);
    } else {
      expect(alive(next)).toBe(true);
    }
  });

  it('drop r2 scc: the watchdog stops hearing r2; heal: it hears it again', async () => {
    const drop = await trine(['inject', 'drop', 'r2', 'scc', '--dir', dir]);
    expect(drop.stderr).toBe('');
    expect(drop.code).toBe(0);
    expect(drop.stdout).toBe('r2 → scc: frames dropped at r2, as it sends them to scc, until `trine inject heal r2 scc`\n');
    await waitFor('scc hearing r2 as not healthy', SOON_MS, async () => {
      const doc = await status(dir);
      const r2 = doc.watchdog.replicas.find((r) => r.id === 'r2');
      return r2 !== undefined && r2.health !== 'healthy' ? r2 : undefined;
    });
    const heal = await trine(['inject', 'heal', 'r2', 'scc', '--dir', dir]);
    expect(heal.code).toBe(0);
    expect(heal.stdout).toBe('r2 → scc healed at r2 (was: drop)\n');
    await waitFor('scc hearing r2 as healthy again', SOON_MS, async () => {
      const doc = await status(dir);
      return doc.watchdog.replicas.find((r) => r.id === 'r2')?.health === 'healthy' ? true : undefined;
    });
  });

  it('a daemon that does not answer in time, a byzantine mode that does not exist, and bad arguments are reported with what to do', async () => {
    // The watchdog hung: it cannot answer. (A replica hung this long would be condemned as silent
    // and replaced, PROTOCOL §10.2; the watchdog is trusted and never is.) `heal` of a link
    // without a fault changes nothing once the watchdog reads it.
    expect((await trine(['inject', 'hang', 'scc', '--dir', dir])).code).toBe(0);
    try {
      const r = await trine(['inject', 'heal', 'scc', 'r2', '--timeout', '500', '--dir', dir]);
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(
        'trine: scc did not answer inject heal within 500 ms: it may be hung or overloaded (see `trine status`), ' +
          'or running since before cluster.json allowed injection (restart the cluster with `trine up --allow-inject`)\n',
      );
    } finally {
      expect((await trine(['inject', 'resume', 'scc', '--dir', dir])).code).toBe(0);
    }
    const [stub, unknown, noReplica] = await Promise.all([
      trine(['inject', 'byzantine-replica', 'r1', 'explode', '--dir', dir]),
      trine(['inject', 'explode', 'r1', '--dir', dir]),
      trine(['inject', 'kill-replica', 'r99', '--dir', dir]),
    ]);
    expect(stub.code).toBe(1);
    expect(stub.stderr).toMatch(/^trine: r1 refused inject byzantine-replica: unknown byzantine mode explode: use one of equivocate, wrong-command, skip-rsn, silent-heartbeating, drop-agent-messages\n$/);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/^trine: unknown inject mode "explode": use one of kill-replica R, kill-agent N, kill-node N, hang PID, resume PID, /);
    expect(noReplica.code).toBe(2);
    expect(noReplica.stderr).toBe('trine: inject kill-replica: "r99" is not a replica of this cluster: use one of r1, r2, r3, r4, r5, r6, r7, r8, r9\n');
  });

  it('kill-replica: the replica process is SIGKILLed and gone', async () => {
    const pid = recordedPid(dir, 'r3.pid') as number;
    expect(alive(pid)).toBe(true);
    const r = await trine(['inject', 'kill-replica', 'r3', '--dir', dir]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`killed replica r3 (pid ${pid}) with SIGKILL\n`);
    expect(alive(pid)).toBe(false);
    const again = await trine(['inject', 'kill-replica', 'r3', '--dir', dir]);
    expect(again.code).toBe(1);
    expect(again.stderr).toBe('trine: replica r3 is not running (no live process in run/r3.pid): nothing to kill; see `trine status`\n');
  });

  it('trine down leaves no process that mentions the test dir', async () => {
    const r = await trine(['down', '--dir', dir]);
    expect(r.code).toBe(0);
    expect(processesOfTestDir()).toEqual([]);
  });
});
