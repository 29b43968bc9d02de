// Replica recovery on a real local cluster (docs/PROTOCOL.md §10.3–§10.6; spec §2.1, A24), as an
// operator sees it through the CLI: one `trine up --nodes 4`, a plain task of two processes, then
//   - a backup's daemon killed with SIGKILL: the group condemns it (`silent`), an agent starts a
//     spare id, and `trine status` soon shows three serving replicas in a higher view, the spare
//     among them and the killed one retired;
//   - the primary's daemon killed with SIGKILL: the same, with a new primary;
//   - the task runs on throughout, `trine ps`, `logs`, `submit` and `kill` keep working (they ask
//     whichever replica daemons run, spares included), the agents' logs record `replica.started`,
//     and `trine status` exits 0 with a healthy group;
//   - every agent then killed with SIGKILL: each new incarnation learns the group from two
//     replicas (PROTOCOL §10.7), and a task that fills every slot runs.
// The time from each kill to the first healthy three-replica status is printed, with the
// replicas' own journal times (STYLE.md 17: timing is printed, the bound is a liveness deadline).
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StatusDocument } from '../../cli/status-report.ts';
import type { ClusterView, TaskView } from '../../src/core/status.ts';
import { clusterStatus, livePid, processesMentioning, trine, waitFor } from './helpers.ts';

/** Kill → three serving replicas again: condemnation takes ≈ 0.6 s (a missed heartbeat check and
 *  the 400 ms diagnosis timeout), the spare's daemon ≈ 1 s to load and get the state. */
const RECOVERY_MS = 10_000;
/** Other liveness deadlines: generous, for a loaded host running other e2e files at once. */
const SOON_MS = 15_000;
const INITIAL = ['r1', 'r2', 'r3'];

let root = '';
let dir = '';

/** `trine status --json`: the document even when the exit code is 1 (a member not answering). */
const status = () => clusterStatus(dir);

async function view(): Promise<ClusterView & { rsn: number; agreedBy: string[] }> {
  const r = await trine(['ps', '--json', '--dir', dir]);
  expect(r.code).toBe(0);
  return JSON.parse(r.stdout) as ClusterView & { rsn: number; agreedBy: string[] };
}

/** The live process in run/<id>.<file> (`pid`; an agent under its keeper: `agent-pid`). */
const pidOf = (id: string, file = 'pid'): number => livePid(dir, id, file);

const processesOfTestDir = (): number[] => processesMentioning(root);

/** The agents' `replica.started` log events (src/daemon/agent.ts): which spare, started where. */
function replicaStarts(): { agent: string; replica: string }[] {
  const logs = join(dir, 'logs');
  const out: { agent: string; replica: string }[] = [];
  for (const f of readdirSync(logs).filter((x) => /^a[0-9]+\.log$/.test(x))) {
    for (const line of readFileSync(join(logs, f), 'utf8').split('\n')) {
      const m = /"event":"replica\.started","replica":"([a-z0-9-]+)"/.exec(line);
      if (m !== null) out.push({ agent: f.slice(0, -4), replica: m[1] as string });
    }
  }
  return out;
}

/** The groups agent `agent`'s incarnations learnt from the replicas (`agent.group.learnt`). */
function learnt(agent: string): { view: number; primary: string; replicas: string[] }[] {
  return readFileSync(join(dir, 'logs', `${agent}.log`), 'utf8').split('\n').flatMap((line) => {
    if (!line.includes('"event":"agent.group.learnt"')) return [];
    const e = JSON.parse(line) as { view: number; primary: string; replicas: string[] };
    return [{ view: e.view, primary: e.primary, replicas: e.replicas }];
  });
}

/** A healthy group of three serving replicas in a view above `above`, without `killed`, which
 *  status lists as retired. */
function recovered(doc: StatusDocument, killed: string, above: number): boolean {
  return doc.healthy && doc.group.basis === 'agreed' && (doc.group.view ?? -1) > above &&
    doc.group.members.length === 3 && !doc.group.members.includes(killed) &&
    doc.replicas.every((r) => r.answered && r.phase === 'serving' && r.view === doc.group.view) &&
    doc.retired.some((r) => r.id === killed);
}

/** Kill `victim` with SIGKILL and poll `trine status` until the group has recovered. Returns
 *  the recovered document, the time it took, and what each poll on the way showed. */
async function killAndRecover(victim: string, before: StatusDocument): Promise<{ doc: StatusDocument; ms: number; killedAtMs: number; seen: string[] }> {
  const pid = pidOf(victim);
  const killedAtMs = Date.now();
  process.kill(pid, 'SIGKILL');
  const seen: string[] = [];
  const doc = await waitFor(`a healthy three-replica group without ${victim}`, RECOVERY_MS, async () => {
    const s = await status();
    const g = s.doc.group;
    seen.push(`  +${Date.parse(s.doc.at) - killedAtMs} ms: view ${g.view ?? '?'} ${g.members.join(',')} (${g.basis}), exit ${s.code}; ` +
      `${s.doc.problems.length === 0 ? 'no problems' : s.doc.problems.join('; ')}`);
    return recovered(s.doc, victim, before.group.view ?? -1) ? s.doc : undefined;
  });
  return { doc, ms: Date.now() - killedAtMs, killedAtMs, seen };
}

/** "replica r3 condemned …" and "replica r4 joined …" in the group's journal, relative to the kill. */
async function journalTimes(victim: string, spare: string, killedAtMs: number): Promise<string> {
  const events = (await view()).events;
  const condemned = events.find((e) => e.text.startsWith(`replica ${victim} condemned`));
  const joined = events.find((e) => e.text.startsWith(`replica ${spare} joined`));
  const rel = (e: { atMs: number } | undefined) => (e === undefined ? '?' : `${e.atMs - killedAtMs} ms`);
  return `condemned at +${rel(condemned)}, ${spare} joined at +${rel(joined)}`;
}

describe('replica recovery: kill -9 a backup, then the primary', () => {
  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'trine-recovery-'));
    dir = join(root, '.trine');
    const up = await trine(['up', '--nodes', '4', '--dir', dir]);
    expect(up.stderr).toBe('');
    expect(up.code).toBe(0);
  });

  afterAll(async () => {
    try {
      if (dir !== '' && existsSync(dir)) await trine(['down', '--dir', dir]);
    } finally {
      // Anything `down` could not find (a spare started after its pid files were read).
      for (const pid of processesOfTestDir()) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // gone already
        }
      }
      if (root !== '') rmSync(root, { recursive: true, force: true });
    }
  });

  it('the group replaces both with spares; the task runs on, the CLI follows the group, and restarted agents learn it', { timeout: 120_000 }, async () => {
    const submit = await trine(['submit', '-n', '2', '--dir', dir, '--', '/bin/sh', '-c', 'echo started; exec /bin/sleep 600']);
    expect(submit.stderr).toBe('');
    expect(submit.code).toBe(0);
    const task = submit.stdout.trim();
    const running = (t: TaskView | undefined) => t?.state === 'running' && t.procs.every((p) => p.state === 'running' && p.pid !== null);
    const started = await waitFor(`${task} running`, SOON_MS, async () => {
      const t = (await view()).tasks.find((x) => x.id === task);
      return running(t) ? t : undefined;
    });

    const initial = (await status()).doc;
    expect(initial.healthy).toBe(true);
    expect(initial.group).toMatchObject({ view: 0, members: INITIAL, primary: 'r1', basis: 'agreed' });
    expect(initial.retired).toEqual([]);

    // A backup.
    const backup = initial.group.members.filter((r) => r !== initial.group.primary).at(-1) as string;
    const first = await killAndRecover(backup, initial);
    const spare1 = first.doc.group.members.find((r) => !INITIAL.includes(r)) as string;
    expect(spare1).toBeDefined();
    expect(first.doc.group.primary).toBe(initial.group.primary);
    expect(first.doc.retired.find((r) => r.id === backup)).toMatchObject({ how: 'condemned', reason: 'silent' });
    expect(first.doc.retired.find((r) => r.id === backup)?.by).toHaveLength(2);
    console.log(`kill -9 backup ${backup} → healthy group ${first.doc.group.members.join(',')} (view ${first.doc.group.view}) seen by trine status after ${first.ms} ms; ` +
      `journal: ${await journalTimes(backup, spare1, first.killedAtMs)}\n${first.seen.join('\n')}`);

    // The primary.
    const primary = first.doc.group.primary as string;
    const second = await killAndRecover(primary, first.doc);
    const spare2 = second.doc.group.members.find((r) => !INITIAL.includes(r) && r !== spare1) as string;
    expect(spare2).toBeDefined();
    expect(second.doc.group.primary).not.toBe(primary);
    expect(second.doc.primary).toBe(second.doc.group.primary);
    expect(second.doc.retired.map((r) => r.id).sort()).toEqual([backup, primary].sort());
    expect(second.doc.condemnations.map((c) => c.target)).toEqual(expect.arrayContaining([backup, primary]));
    console.log(`kill -9 primary ${primary} → healthy group ${second.doc.group.members.join(',')} (view ${second.doc.group.view}, primary ${second.doc.group.primary}) ` +
      `seen by trine status after ${second.ms} ms; journal: ${await journalTimes(primary, spare2, second.killedAtMs)}\n${second.seen.join('\n')}`);

    // The task ran on, with the same processes.
    const after = (await view()).tasks.find((x) => x.id === task);
    expect(running(after)).toBe(true);
    expect(after?.procs.map((p) => p.pid)).toEqual(started.procs.map((p) => p.pid));
    // The agents started the two spares.
    expect(replicaStarts().map((s) => s.replica).sort()).toEqual([spare1, spare2].sort());

    // The operator's table: exit 0, the new group, the retired ids with why.
    const table = await trine(['status', '--dir', dir]);
    console.log(table.stdout);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/: healthy/);
    expect(table.stdout).toContain(`group: view ${second.doc.group.view}, primary ${second.doc.group.primary}, members ${second.doc.group.members.join(', ')}`);
    expect(table.stdout).toMatch(new RegExp(`retired: .*${backup} \\(condemned: silent, by r[0-9]+,r[0-9]+\\)`));
    expect(table.stdout).toMatch(new RegExp(`retired: .*${primary} \\(condemned: silent, by r[0-9]+,r[0-9]+\\)`));

    // The task commands go to the new group: logs, a new submit, a kill.
    const logs = await trine(['logs', task, '--dir', dir]);
    expect(logs.code).toBe(0);
    expect(logs.stdout.split('\n').filter((l) => l.endsWith('started')).sort()).toEqual([`[${task}/0] started`, `[${task}/1] started`]);
    const more = await trine(['submit', '--wait', '--dir', dir, '--', '/bin/true']);
    expect(more.stderr).toBe('');
    expect(more.code).toBe(0);
    const kill = await trine(['kill', task, '--dir', dir]);
    expect(kill.stderr).toBe('');
    expect(kill.stdout).toBe(`${task} killed\n`);

    // Every agent process killed now (not its keeper): the keeper starts a new incarnation, which
    // begins from cluster.json's group, of which only one replica is still a member, so on its own
    // it could never see two matching copies. It asks the replicas for the group on its own
    // connections (PROTOCOL §10.7) and acts on the group's commands again: a task that fills
    // every slot of every node runs. (On a loaded host a node may even be declared failed before
    // its keeper's standby takes over; it is reset, its agent starts again and learns the group
    // the same way.)
    const agents = ['a1', 'a2', 'a3', 'a4'];
    const before = new Map(agents.map((a) => [a, { pid: pidOf(a, 'agent-pid'), learnt: learnt(a).length }]));
    for (const { pid } of before.values()) process.kill(pid, 'SIGKILL');
    await waitFor('four new agent incarnations that learnt the group', SOON_MS, async () =>
      (agents.every((a) => {
        try {
          return pidOf(a, 'agent-pid') !== before.get(a)?.pid && learnt(a).length > (before.get(a)?.learnt ?? 0);
        } catch {
          return false;
        }
      }) ? true : undefined));
    await waitFor('four nodes up with every slot free', SOON_MS, async () => {
      const nodes = (await view()).nodes;
      return nodes.length === 4 && nodes.every((n) => n.state === 'up' && n.used === 0) ? true : undefined;
    });
    const full = await trine(['submit', '--wait', '-n', '16', '--dir', dir, '--', '/bin/true']);
    // On failure, the group's journal says what ended which process (a node declared failed?).
    const journal = full.stderr === '' ? '' : (await view()).events.slice(-40).map((e) => e.text).join('\n');
    expect(full.stderr, journal).toBe('');
    expect(full.code).toBe(0);
  });
});
