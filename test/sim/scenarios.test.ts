// Spec §9.2 scenarios A14–A19 on the real cores in the simulator: one named test each,
// asserting what an agent or a replica could observe (frames on the wire, deliveries,
// suspicions), with every invariant of src/sim/invariants.ts checked along the way.
import { describe, expect, it } from 'vitest';
import type { ProcessId } from '../../src/core/ports.ts';
import type { Item } from '../../src/core/wire/messages.ts';
import type { ByzantineBehaviour } from '../../src/faults/byzantine.ts';
import { realCores } from '../../src/sim/cores.ts';
import { World } from '../../src/sim/world.ts';

/** Requests start once every handshake is done (no faults: a few ms). */
const START_MS = 100;

function cluster(opts: { agents?: number; byzantine?: [ProcessId, ByzantineBehaviour[]][] } = {}): World {
  const w = new World({ seed: 0, agents: opts.agents ?? 1, cores: realCores, trace: true, byzantine: new Map(opts.byzantine ?? []) });
  w.start();
  return w;
}

/** `n` echo requests of one reply each, 5 ms apart, so GSSN k is the k-th and travels alone. */
function echoes(w: World, agent: ProcessId, n: number, fromMs = START_MS): void {
  for (let i = 1; i <= n; i++) {
    w.scheduler.at(fromMs + 5 * (i - 1), () => w.request(agent, { type: 'echo', tag: `e${i}`, fanout: 'self', count: 1, data: new Uint8Array([i]) }));
  }
}

const gcOf = (i: Item) => (i.type === 'grp' && i.body.type === 'gc' ? i.body.gc : null);
const carriesGssn = (g: number) => (items: readonly Item[]) => items.some((i) => gcOf(i)?.gssn === g);

/** Frames `from` emitted to `to` whose items satisfy `pred`, with their times. */
function emitted(w: World, from: ProcessId, to: ProcessId, pred: (items: readonly Item[]) => boolean): number[] {
  return w.trace.flatMap((t) => (t.type === 'out' && t.from === from && t.to === to && pred(t.items) ? [t.atMs] : []));
}

/** Frames `at` accepted from `from` whose items satisfy `pred`, with their times. */
function accepted(w: World, at: ProcessId, from: ProcessId, pred: (items: readonly Item[]) => boolean): number[] {
  return w.trace.flatMap((t) => (t.type === 'accepted' && t.at === at && t.frame.from === from && pred(t.frame.items) ? [t.atMs] : []));
}

function deliveredGssns(w: World, agent: ProcessId): number[] {
  return w.effects((e, at) => at === agent && e.type === 'deliver.command').map((e) => (e.effect.type === 'deliver.command' ? e.effect.gssn : -1));
}

function suspects(w: World, reason: string): { at: ProcessId; atMs: number; target: ProcessId | null }[] {
  return w.effects((e) => e.type === 'suspect' && e.reason === reason).map((e) => ({ at: e.at, atMs: e.atMs, target: e.effect.type === 'suspect' ? e.effect.target : null }));
}

/** Condemnations the group executed (PROTOCOL §10.3), once each, with their accusers. */
function condemnations(w: World): { target: ProcessId; by: ProcessId[] }[] {
  const seen = new Map<string, { target: ProcessId; by: ProcessId[] }>();
  for (const e of w.effects((x) => x.type === 'deliver.input' && x.input.type === 'replica.condemn')) {
    if (e.effect.type !== 'deliver.input' || e.effect.input.type !== 'replica.condemn') continue;
    const ev = e.effect.input.evidence.map((a) => a.accusation);
    const target = ev[0]?.target ?? '';
    seen.set(`${e.effect.rsn}`, { target, by: ev.map((a) => a.from).sort() });
  }
  return [...seen.values()];
}

/** The last `replicas` command an agent delivered (PROTOCOL §10.7). */
function groupOf(w: World, agent: ProcessId): { view: number; primary: ProcessId; replicas: ProcessId[] } | null {
  const cmds = w.effects((e, at) => at === agent && e.type === 'deliver.command' && e.command.type === 'replicas');
  const last = cmds.at(-1)?.effect;
  return last?.type === 'deliver.command' && last.command.type === 'replicas' ? { view: last.command.view, primary: last.command.primary, replicas: last.command.replicas } : null;
}

const range = (a: number, b: number) => Array.from({ length: b - a + 1 }, (_, i) => a + i);

describe('spec §9.2 scenarios in the simulator', () => {
  it('A14 a dropped replica copy of G10: the agent delivers on 2 matches, withholds the group ack until all 3 arrive, the lossy replica retransmits and its stream continues with G11', () => {
    const w = cluster();
    let dropped = false;
    w.network.addRule((f) => {
      if (dropped || f.from !== 'r3' || f.to !== 'a1' || !carriesGssn(10)(f.items)) return 'pass';
      dropped = true;
      return 'drop';
    });
    echoes(w, 'a1', 12);
    w.runUntil(START_MS + 500);

    expect(dropped).toBe(true);
    const delivered = deliveredGssns(w, 'a1');
    expect(delivered).toEqual(range(1, 12)); // each exactly once, in order
    const g10At = w.effects((e, at) => at === 'a1' && e.type === 'deliver.command' && e.gssn === 10)[0]?.atMs as number;
    // r3's copy of G10 came only later, from a retransmission.
    const r3Sends = emitted(w, 'r3', 'a1', carriesGssn(10));
    expect(r3Sends.length).toBeGreaterThanOrEqual(2);
    const r3CopyAt = accepted(w, 'a1', 'r3', carriesGssn(10))[0] as number;
    expect(r3CopyAt).toBeGreaterThan(g10At);
    // No group ack covering G10 left the agent before r3's copy arrived (flaw 1 fix).
    const acks = w.trace.flatMap((t) => (t.type === 'out' && t.from === 'a1' ? t.items.flatMap((i) => (i.type === 'gack' ? [{ atMs: t.atMs, ack: i.ack }] : [])) : []));
    expect(acks.filter((a) => a.ack >= 10 && a.atMs < r3CopyAt)).toEqual([]);
    expect(acks.some((a) => a.ack >= 10)).toBe(true);
    // r3's stream was not broken: its G11 and G12 were admitted, and the agent's complete mark
    // reached 12, which needs every replica's copy of every GSSN.
    expect(accepted(w, 'a1', 'r3', carriesGssn(11)).length).toBeGreaterThan(0);
    expect(Math.max(...acks.map((a) => a.ack))).toBe(12);
    expect(suspects(w, 'error.report')).toEqual([]);
    w.checker.finish({ livenessExpected: true, digests: w.digests() });
    expect(w.checker.violations).toEqual([]);
  });

  it('A15 a dropped plain PTP message is retransmitted and delivered; the group ack does not cover it', () => {
    const w = cluster();
    const isNotice = (items: readonly Item[]) => items.some((i) => i.type === 'ptp' && i.body?.type === 'notice');
    let dropped = false;
    w.network.addRule((f) => {
      if (dropped || f.from !== 'r3' || f.to !== 'a1' || !isNotice(f.items)) return 'pass';
      dropped = true;
      return 'drop';
    });
    w.scheduler.at(START_MS, () => w.notice('r3', 'a1', 'b2 says hello'));
    echoes(w, 'a1', 1, START_MS + 1); // then G1 is sent, delivered and group-acked
    w.runUntil(START_MS + 300);

    expect(dropped).toBe(true);
    const notices = w.effects((e, at) => at === 'a1' && e.type === 'deliver.notice');
    expect(notices.map((n) => n.effect)).toEqual([{ type: 'deliver.notice', from: 'r3', text: 'b2 says hello' }]);
    // The group ack of G1 reached r3 before the notice was retransmitted: it did not release it.
    const gackAt = accepted(w, 'r3', 'a1', (items) => items.some((i) => i.type === 'gack' && i.ack >= 1))[0] as number;
    const noticeSends = emitted(w, 'r3', 'a1', isNotice);
    expect(noticeSends.length).toBeGreaterThanOrEqual(2);
    expect(noticeSends.some((t) => t > gackAt)).toBe(true);
    expect(deliveredGssns(w, 'a1')).toEqual([1]);
    w.checker.finish({ livenessExpected: true, digests: w.digests() });
    expect(w.checker.violations).toEqual([]);
  });

  it('A16 one replica sends different content: the agent delivers the 2 matching and reports an error (an error.report request reaches the replicas, which raise suspect \'error.report\')', () => {
    const w = cluster({ byzantine: [['r3', [{ type: 'gc.alter', fromGssn: 5, toGssn: 5, agents: ['a1'], variant: 1 }]]] });
    echoes(w, 'a1', 8);
    w.runUntil(START_MS + 500);

    // Delivered once, in order, with the content of r1 and r2 (the checker compares it).
    expect(deliveredGssns(w, 'a1')).toEqual(range(1, 8));
    const reports = w.effects((e) => e.type === 'deliver.request' && e.request.type === 'error.report');
    for (const r of ['r1', 'r2', 'r3']) {
      const mine = reports.filter((x) => x.at === r).map((x) => (x.effect.type === 'deliver.request' ? x.effect.request : null));
      expect(mine).toContainEqual(expect.objectContaining({ type: 'error.report', gssn: 5, kind: 'mismatch', suspects: ['r3'] }));
    }
    const raised = suspects(w, 'error.report');
    expect(new Set(raised.map((s) => s.at))).toEqual(new Set(['r1', 'r2', 'r3']));
    expect(raised.every((s) => s.target === 'r3')).toBe(true);
    w.checker.finish({ livenessExpected: true, digests: w.digests() });
    expect(w.checker.violations).toEqual([]);
  });

  it('A17 three mutually different copies: the agent terminates itself', () => {
    const w = cluster({
      byzantine: [
        ['r2', [{ type: 'gc.alter', fromGssn: 5, toGssn: 5, agents: ['a1'], variant: 1 }]],
        ['r3', [{ type: 'gc.alter', fromGssn: 5, toGssn: 5, agents: ['a1'], variant: 2 }]],
      ],
    });
    echoes(w, 'a1', 8);
    w.runUntil(START_MS + 500);

    const terminations = w.effects((e, at) => at === 'a1' && e.type === 'terminate');
    expect(terminations).toHaveLength(1);
    expect(deliveredGssns(w, 'a1')).toEqual([1, 2, 3, 4]); // never G5, nothing after
    expect(w.isUp('a1')).toBe(false);
    // Safety held throughout (two faulty replicas are outside f = 1, so no liveness).
    w.checker.finish({ livenessExpected: false, digests: w.digests() });
    expect(w.checker.violations).toEqual([]);
  });

  it('A18 the primary silently drops an agent message: after 3 retransmissions the agent sends it to both backups, they forward it and raise suspect \'primary.progress\'; the primary is condemned and the request ordered by its successor', () => {
    // CSN 1 is the agent's node.join; CSN 2 is the echo the primary ignores, direct or relayed.
    const w = cluster({ byzantine: [['r1', [{ type: 'cg.drop', client: 'a1', csns: [2], relayed: true }]]] });
    echoes(w, 'a1', 1);
    w.runUntil(START_MS + 1500);

    const isCsn2 = (items: readonly Item[]) => items.some((i) => i.type === 'grp' && i.body.type === 'cg' && i.body.signed.cg.csn === 2);
    const toPrimary = emitted(w, 'a1', 'r1', isCsn2);
    const firstFallback = Math.min(...emitted(w, 'a1', 'r2', isCsn2), ...emitted(w, 'a1', 'r3', isCsn2));
    expect(toPrimary.filter((t) => t < firstFallback)).toHaveLength(4); // the send and 3 retransmissions
    for (const b of ['r2', 'r3']) {
      expect(emitted(w, 'a1', b, isCsn2).length).toBeGreaterThan(0);
      const forwards = emitted(w, b, 'r1', (items) => items.some((i) => i.type === 'ptp' && i.body?.type === 'wrapper' && i.body.rsn === 0 && i.body.signed.cg.csn === 2));
      expect(forwards.length).toBeGreaterThan(0);
    }
    const raised = suspects(w, 'primary.progress');
    expect(new Set(raised.map((s) => s.at))).toEqual(new Set(['r2', 'r3']));
    expect(raised.every((s) => s.target === 'r1' && s.atMs > firstFallback)).toBe(true);
    // PROTOCOL §10.5: both backups accuse r1; r2, its successor, orders the condemnation and then
    // the echo the agent handed over (the agent learns the new primary from two copies).
    expect(condemnations(w)).toEqual([{ target: 'r1', by: ['r2', 'r3'] }]);
    // A replacement, r4, joined: the only node (n1) is the condemned one's, tried last (§10.6).
    expect(groupOf(w, 'a1')).toEqual({ view: 2, primary: 'r2', replicas: ['r2', 'r3', 'r4'] });
    expect(w.effects((e, at) => at === 'a1' && e.type === 'deliver.command' && e.command.type === 'echo.reply')).toHaveLength(1);
    w.checker.finish({ livenessExpected: true, digests: w.digests() });
    expect(w.checker.violations).toEqual([]);
  });

  it('A19 the primary skips an RSN: the backup raises suspect \'rsn.gap\', the primary is condemned and every echo still delivered', () => {
    const w = cluster({ byzantine: [['r1', [{ type: 'rsn.skip', atRsn: 3 }]]] });
    echoes(w, 'a1', 3); // RSN 1 is the node.join, RSN 2 and 3 the first two echoes
    w.runUntil(START_MS + 1000);

    const raised = suspects(w, 'rsn.gap');
    expect(new Set(raised.map((s) => s.at))).toEqual(new Set(['r2', 'r3']));
    expect(raised.every((s) => s.target === 'r1')).toBe(true);
    // The backups delivered up to RSN 2 and nothing from the skipped sequence; RSN 3 is the
    // condemnation their successor ordered, and the echoes the agent resent come after it.
    for (const b of ['r2', 'r3']) {
      const rsns = w.effects((e, at) => at === b && (e.type === 'deliver.request' || e.type === 'deliver.input')).map((e) => ('rsn' in e.effect ? e.effect.rsn : -1));
      expect(rsns.slice(0, 3)).toEqual([1, 2, 3]);
    }
    expect(condemnations(w)).toEqual([{ target: 'r1', by: ['r2', 'r3'] }]);
    expect(w.effects((e, at) => at === 'a1' && e.type === 'deliver.command' && e.command.type === 'echo.reply')).toHaveLength(3);
    w.checker.finish({ livenessExpected: true, digests: w.digests() });
    expect(w.checker.violations).toEqual([]);
  });
});
