// Replica behaviours a developer's slip would otherwise get past every test (issue 15, mutation
// testing of src/core/replica.ts): each row is what a peer or a user observes — requests
// ordered, suspicions raised, answers sent or not — and fails on a hand-planted slip of the
// behaviour it names (docs/PROTOCOL.md §5.5, §5.6, §5.7, §5.8, §7, §8.1, §10.5, §10.11).
import { describe, expect, it } from 'vitest';
import type { Challenge, Item, OperatorRequest, PtpPayload, SignedCG } from '../../../src/core/wire/messages.ts';
import { signAccusation, signCG } from '../../../src/core/wire/frame.ts';
import type { ProcessId } from '../../../src/core/ports.ts';
import { MAX_HOLDBACK_PER_AGENT } from '../../../src/core/constants.ts';
import { hmacSigner, makeCluster } from './harness.ts';

type Cluster = ReturnType<typeof makeCluster>;

const echo = (tag: string) => ({ type: 'echo' as const, tag, fanout: 'self' as const, count: 0, data: new Uint8Array([7]) });
const nonce = (n: number) => n.toString(16).padStart(32, '0');
const kill = (n: number): OperatorRequest => ({ type: 'task.kill', nonce: nonce(n), task: 't404' });

/** `from` (faulty, or a test standing in for a peer) sends `to` on lane 0 each of `bodies`, in
 *  order: notices rewritten before its link signs them (one filter for the whole batch). */
let injected = 0;
function injectAll(c: Cluster, from: ProcessId, to: ProcessId, bodies: PtpPayload[]): void {
  const byText = new Map<string, PtpPayload>();
  for (const b of bodies) byText.set(`slip-${++injected}`, b);
  c.filters.push((f, t, i): Item => {
    if (f !== from || t !== to || i.type !== 'ptp' || i.body?.type !== 'notice') return i;
    const body = byText.get(i.body.text);
    return body === undefined ? i : { ...i, body };
  });
  for (const text of byText.keys()) c.input(from, { type: 'notice', nowMs: c.now(), to, text });
}

/** a1's request `csn` of incarnation `inc`, as a1 signs it. */
const cgOf = (csn: number, tag: string, inc = 1): SignedCG =>
  signCG({ csn, gssnAck: 0, payload: echo(tag), client: 'a1', inc }, hmacSigner('a1'));
const forwarded = (signed: SignedCG): PtpPayload => ({ type: 'wrapper', rsn: 0, signed });
/** The tags of a1's echo requests r1 delivered, in RSN order. */
const orderedTags = (c: Cluster, prefix: string): string[] =>
  c.effects('deliver.request', 'r1').map((o) => o.effect.request).filter((r) => r.type === 'echo' && r.tag.startsWith(prefix)).map((r) => (r.type === 'echo' ? r.tag : ''));
const drops = (c: Cluster, k: number, code: string): number => (c.replicas[k]?.status(c.now()).drops as Record<string, number>)[code] ?? 0;

describe('the primary holds back requests ahead of a missing CSN, bounded (PROTOCOL §5.5)', () => {
  it(`§5.5: at most MAX_HOLDBACK_PER_AGENT (${MAX_HOLDBACK_PER_AGENT}) are held per agent: when the gap fills they follow in order, the one beyond the bound is not ordered`, () => {
    const c = makeCluster(1);
    c.run(200);
    const base = c.replicas[0]?.state().csnReceived.get('a1') ?? 0;
    // r2 forwards (as a backup does an agent's fallback) a1's requests from base+2 on, one more
    // than the primary may hold, then the missing base+1.
    const ahead = Array.from({ length: MAX_HOLDBACK_PER_AGENT + 1 }, (_, k) => forwarded(cgOf(base + 2 + k, `h${k}`)));
    injectAll(c, 'r2', 'r1', ahead);
    c.run(50);
    expect(orderedTags(c, 'h')).toEqual([]);
    injectAll(c, 'r2', 'r1', [forwarded(cgOf(base + 1, 'gap'))]);
    c.run(300);
    expect(orderedTags(c, 'gap')).toEqual(['gap']);
    expect(orderedTags(c, 'h')).toEqual(Array.from({ length: MAX_HOLDBACK_PER_AGENT }, (_, k) => `h${k}`));
    expect(c.replicas[0]?.state().csnReceived.get('a1')).toBe(base + 1 + MAX_HOLDBACK_PER_AGENT);
  }, 60_000);

  it('§5.5: a later held request does not push out an earlier one of the same incarnation: both follow when the gap fills', () => {
    const c = makeCluster(1);
    c.run(200);
    const base = c.replicas[0]?.state().csnReceived.get('a1') ?? 0;
    injectAll(c, 'r2', 'r1', [forwarded(cgOf(base + 3, 'h3')), forwarded(cgOf(base + 2, 'h2'))]);
    c.run(50);
    injectAll(c, 'r2', 'r1', [forwarded(cgOf(base + 1, 'h1'))]);
    c.run(300);
    expect(orderedTags(c, 'h')).toEqual(['h1', 'h2', 'h3']);
  });

  it('§5.5, §5.7: a newer incarnation\'s request drops the held ones of the older: they never take room from it (a full hold-back of incarnation 1 still leaves room for incarnation 2)', () => {
    const c = makeCluster(1);
    c.run(200);
    const base = c.replicas[0]?.state().csnReceived.get('a1') ?? 0;
    // Incarnation 1 fills the hold-back (its base+1 never comes: it died).
    injectAll(c, 'r2', 'r1', Array.from({ length: MAX_HOLDBACK_PER_AGENT }, (_, k) => forwarded(cgOf(base + 2 + k, `old${k}`, 1))));
    c.run(50);
    // Incarnation 2 starts at CSN 1; its CSN 2 and 3 come first.
    injectAll(c, 'r2', 'r1', [forwarded(cgOf(3, 'new3', 2)), forwarded(cgOf(2, 'new2', 2))]);
    c.run(50);
    injectAll(c, 'r2', 'r1', [forwarded(cgOf(1, 'new1', 2))]);
    c.run(300);
    expect(orderedTags(c, 'new')).toEqual(['new1', 'new2', 'new3']);
    expect(orderedTags(c, 'old')).toEqual([]);
  }, 60_000);

  it('§5.5, §5.7: a held request of a newer incarnation is not replaced by the older incarnation\'s request for the same CSN', () => {
    const c = makeCluster(1);
    c.run(200);
    // The group still knows incarnation 1 of a1 (at base). Incarnation 2's CSN 3 arrives ahead of
    // its CSN 1, then incarnation 1's request with the same CSN (ahead of its base + 1 too).
    const base = c.replicas[0]?.state().csnReceived.get('a1') ?? 0;
    expect(base).toBeLessThan(2);
    injectAll(c, 'r2', 'r1', [forwarded(cgOf(3, 'new3', 2)), forwarded(cgOf(3, 'old3', 1))]);
    c.run(50);
    injectAll(c, 'r2', 'r1', [forwarded(cgOf(1, 'new1', 2)), forwarded(cgOf(2, 'new2', 2))]);
    c.run(300);
    expect([...orderedTags(c, 'new'), ...orderedTags(c, 'old')]).toEqual(['new1', 'new2', 'new3']);
  });
  it('§5.5: a second request held for the same CSN and incarnation replaces the first: the later one is ordered when the gap fills', () => {
    const c = makeCluster(1);
    c.run(200);
    const base = c.replicas[0]?.state().csnReceived.get('a1') ?? 0;
    // Two requests signed for one CSN (an agent that equivocates, or a fallback copy racing a
    // rewritten one): the hold-back keeps one per CSN, the latest.
    injectAll(c, 'r2', 'r1', [forwarded(cgOf(base + 2, 'h2a')), forwarded(cgOf(base + 2, 'h2b'))]);
    c.run(50);
    injectAll(c, 'r2', 'r1', [forwarded(cgOf(base + 1, 'h1'))]);
    c.run(300);
    expect(orderedTags(c, 'h')).toEqual(['h1', 'h2b']);
    expect(c.effects('suspect')).toEqual([]);
  });

  it('§5.5, §5.7: a held request of a newer incarnation does not follow the older incarnation\'s CSNs: nothing out of sequence is ordered, nobody suspects the primary', () => {
    const c = makeCluster(1);
    c.run(200);
    const base = c.replicas[0]?.state().csnReceived.get('a1') ?? 0;
    // Incarnation 2's CSN base+2 is held; then incarnation 1's base+1 comes and is ordered.
    injectAll(c, 'r2', 'r1', [forwarded(cgOf(base + 2, 'new', 2))]);
    c.run(50);
    injectAll(c, 'r2', 'r1', [forwarded(cgOf(base + 1, 'old1', 1))]);
    c.run(300);
    expect(orderedTags(c, 'old')).toEqual(['old1']);
    expect(orderedTags(c, 'new')).toEqual([]);
    expect(c.effects('suspect')).toEqual([]);
    expect(new Set(c.replicas.map((r) => r.rsn())).size).toBe(1);
  });
});

describe('an operator\'s request is ordered once (PROTOCOL §8.1)', () => {
  it('§8.1: a retry sent to the primary is answered again with the recorded outcome and not ordered again; a backup\'s forward of it is neither ordered nor answered', () => {
    const c = makeCluster(1);
    c.run(200);
    const req = kill(1);
    c.operate(req);
    c.run(300);
    const first = c.opReplies.filter((r) => r.nonce === req.nonce);
    expect(first.map((r) => r.from).sort()).toEqual(['r1', 'r2', 'r3']);
    const rsn = c.replicas[0]?.rsn() as number;
    const outcome = first.find((r) => r.from === 'r1');
    // The operator retries, to the primary only.
    c.operate(req, ['r1']);
    c.run(300);
    const again = c.opReplies.filter((r) => r.nonce === req.nonce).slice(first.length);
    expect(again).toEqual([outcome]);
    expect(c.replicas.map((r) => r.rsn())).toEqual([rsn, rsn, rsn]);
    // A backup forwards it again (its copy of the operator's request, late).
    const signed = signCG({ csn: 0, gssnAck: 0, payload: req, client: 'op', inc: 0 }, hmacSigner('op'));
    injectAll(c, 'r2', 'r1', [forwarded(signed)]);
    c.run(300);
    expect(c.opReplies.filter((r) => r.nonce === req.nonce)).toHaveLength(first.length + 1);
    expect(c.replicas.map((r) => r.rsn())).toEqual([rsn, rsn, rsn]);
  });
});

describe('status and challenges go to operators and agents only (PROTOCOL §7, §10.7)', () => {
  it('§7: a challenge.ask or status.query from another replica or the watchdog is dropped as NOT_A_MEMBER and gets no challenge and no status.reply', () => {
    const c = makeCluster(1);
    c.run(200);
    const sent: { to: ProcessId; type: string; challenge?: Challenge }[] = [];
    c.filters.push((from, to, i) => {
      if (from === 'r1' && (i.type === 'challenge' || i.type === 'status.reply')) sent.push({ to, type: i.type, ...(i.type === 'challenge' ? { challenge: i.challenge } : {}) });
      return i;
    });
    // The operator and an agent are given challenges.
    c.sendAs('op', 'r1', [{ type: 'challenge.ask', nonce: 1 }, { type: 'challenge.ask', nonce: 2 }]);
    c.sendAs('a1', 'r1', [{ type: 'challenge.ask', nonce: 3 }]);
    c.run(5);
    expect(sent.map((s) => `${s.type}>${s.to}`)).toEqual(['challenge>op', 'challenge>op', 'challenge>a1']);
    const [ch1, ch2] = sent.map((s) => s.challenge as Challenge);
    const before = drops(c, 0, 'NOT_A_MEMBER');
    // The watchdog and a replica ask, and query with a challenge r1 issued (and never used by them).
    for (const who of ['scc', 'r2'] as const) c.sendAs(who, 'r1', [{ type: 'challenge.ask', nonce: 4 }]);
    c.sendAs('scc', 'r1', [{ type: 'status.query', nonce: 5, challenge: ch1 as Challenge }]);
    c.sendAs('r2', 'r1', [{ type: 'status.query', nonce: 6, challenge: ch2 as Challenge }]);
    c.run(5);
    expect(drops(c, 0, 'NOT_A_MEMBER')).toBe(before + 4);
    expect(sent).toHaveLength(3);
    // The same challenge answers the operator's query: it was fresh.
    c.sendAs('op', 'r1', [{ type: 'status.query', nonce: 7, challenge: ch1 as Challenge }]);
    c.run(5);
    expect(sent.map((s) => `${s.type}>${s.to}`).slice(3)).toEqual(['status.reply>op']);
  });
});

describe('shutting down, nobody is suspected (PROTOCOL §10.11)', () => {
  it('§10.11: once the shutdown is ordered, neither a primary\'s wrapper out of RSN sequence nor a replica gone silent raises a suspect effect or a replica.suspect log', () => {
    const c = makeCluster(1);
    c.run(200);
    c.operate({ type: 'cluster.shutdown', nonce: nonce(99) });
    c.run(100);
    expect(c.effects('log', 'r2').filter((o) => o.effect.event === 'shutdown.ordered')).toHaveLength(1);
    const rsn = c.replicas[1]?.rsn() as number;
    const since = c.observed.length;
    // r1 orders out of sequence (a gap) to r2, and r3 goes silent.
    injectAll(c, 'r1', 'r2', [{ type: 'wrapper', rsn: rsn + 5, signed: cgOf(1, 'gap') }]);
    c.down.add('r3');
    c.run(600);
    const after = c.observed.slice(since);
    expect(after.filter((o) => o.effect.type === 'suspect')).toEqual([]);
    expect(after.filter((o) => o.effect.type === 'log' && o.effect.event === 'replica.suspect')).toEqual([]);
  });
});

describe('a backup waits for the other backup\'s confirmation only while it may answer (PROTOCOL §5.8)', () => {
  it('§5.8: a backup that never heard the other waits for it only during its first two replica checks, counted from its own start, then executes unconfirmed at once', () => {
    const c = makeCluster(1);
    const check = c.membership.timing.replicaCheckMs;
    // r3's heartbeats and confirmations never reach r2, which starts after the others.
    c.filters.push((from, to, i) => (from === 'r3' && to === 'r2' && (i.type === 'hb' || (i.type === 'ptp' && i.body?.type === 'order')) ? null : i));
    c.down.add('r2');
    c.run(100);
    c.down.delete('r2');
    const started = c.now();
    c.run(100);
    c.input('a1', { type: 'request', nowMs: c.now(), request: echo('early') });
    c.run(2 * check + 100);
    const at = (tag: string, r: ProcessId) => c.effects('deliver.request', r).filter((o) => o.effect.request.type === 'echo' && o.effect.request.tag === tag).map((o) => o.at);
    const [ordered] = at('early', 'r1');
    expect(ordered).toBeLessThan(started + 2 * check);
    // Ordered within the grace: r2 waits for r3 until the grace ends, no longer.
    expect(at('early', 'r2')).toEqual([started + 2 * check]);
    // Ordered after it: executed as it comes.
    c.input('a1', { type: 'request', nowMs: c.now(), request: echo('late') });
    c.run(50);
    const [lateOrdered] = at('late', 'r1');
    expect(at('late', 'r2')).toEqual([(lateOrdered as number) + 1]);
  });
});

describe('daemons that start one by one (PROTOCOL §5.3, §5.6)', () => {
  const requests = (c: Cluster, n: number) => {
    for (let k = 0; k < n; k++) {
      c.input('a1', { type: 'request', nowMs: c.now(), request: { ...echo(`late-${k}`), fanout: 'all', count: 1 } });
      c.run(100);
    }
  };

  it('§5.3: a backup that starts 2.5 s after the others while requests flow is not condemned on the agents\' reports of the copies it could not send', () => {
    const c = makeCluster(2);
    c.down.add('r3');
    c.run(300);
    requests(c, 20);
    c.down.delete('r3');
    c.run(3000);
    expect(c.effects('log').filter((o) => o.effect.event === 'replica.accuse')).toEqual([]);
    expect(c.replicas[0]?.state().replicas).toEqual(['r1', 'r2', 'r3']);
  });

  it('§5.3: a backup that never starts is condemned on the agents\' reports once their start grace is over, not before', () => {
    const c = makeCluster(2);
    const { startGraceMs } = c.membership.timing;
    c.down.add('r3');
    // What r1 and r2 tell the watchdog (spec §1.6 rule 3).
    const reported = c.sent((from, to, i) => (to === 'scc' && i.type === 'diag.report' ? `${from}:${i.reason}:${i.target}` : null));
    c.run(300);
    requests(c, Math.ceil((startGraceMs + 2000) / 100));
    expect([...new Set(reported)].sort()).toEqual(['r1:agent.reports:r3', 'r2:agent.reports:r3']);
    expect(c.effects('log', 'r1').filter((o) => o.effect.event === 'replica.accuse').map((o) => o.effect.fields)).toContainEqual(
      expect.objectContaining({ target: 'r3', reason: 'agent.reports', detail: 'error reports from two agents' }),
    );
    expect(c.effects('log', 'r1').filter((o) => o.effect.event === 'replica.suspect').map((o) => o.effect.fields)).toContainEqual(
      expect.objectContaining({ target: 'r3', reason: 'error.report', detail: expect.stringMatching(/^a[12] reports [a-z-]+ for \d+ gssn from \d+ \(suspects r3\)$/) }),
    );
    const condemned = c.effects('log', 'r1').filter((o) => o.effect.event === 'replica.condemned');
    expect(condemned.map((o) => o.effect.fields)).toEqual([expect.objectContaining({ target: 'r3', reason: 'agent.reports' })]);
    expect(condemned[0]?.at).toBeGreaterThanOrEqual(startGraceMs);
  });
});

describe('a backup watches a bounded number of forwarded requests (PROTOCOL §5.6)', () => {
  it('§5.6: a primary that starts after the backups is not accused of ignoring the requests they forwarded before their sessions with it existed', () => {
    const c = makeCluster(1);
    // r1 boots last: the agent's node.join falls back to the backups, which forward it to a
    // primary they have no session with yet.
    c.down.add('r1');
    c.run(700);
    c.down.delete('r1');
    c.run(1500);
    expect(c.effects('suspect').filter((o) => o.effect.reason === 'primary.progress')).toEqual([]);
    expect(c.effects('log').filter((o) => o.effect.event === 'replica.accuse')).toEqual([]);
    expect(c.replicas[0]?.state().csnReceived.get('a1')).toBe(1); // the node.join, ordered once r1 is up
  });

  it('§5.6: a primary that never starts is accused of primary.progress by both backups once their start grace is over, and not before', () => {
    const c = makeCluster(1);
    const { startGraceMs, primaryProgressMs } = c.membership.timing;
    const progress = () => c.effects('suspect').filter((o) => o.effect.reason === 'primary.progress' && o.effect.target === 'r1');
    c.down.add('r1');
    c.run(startGraceMs - 50);
    expect(progress()).toEqual([]);
    c.run(primaryProgressMs + 100);
    expect([...new Set(progress().map((o) => o.proc))].sort()).toEqual(['r2', 'r3']);
    expect(Math.min(...progress().map((o) => o.at))).toBeGreaterThanOrEqual(startGraceMs);
  });

  it(`§5.6: at most MAX_HOLDBACK_PER_AGENT × agents (${2 * MAX_HOLDBACK_PER_AGENT} for two agents) PrimaryProgressTimeouts: a request forwarded beyond them raises no primary.progress of its own`, () => {
    const c = makeCluster(2);
    c.run(200);
    // The primary never hears r2's forwards.
    c.filters.push((from, to, i) => (from === 'r2' && to === 'r1' && i.type === 'ptp' && i.body?.type === 'wrapper' ? null : i));
    const limit = MAX_HOLDBACK_PER_AGENT * 2;
    for (let k = 0; k <= limit; k++) c.operate(kill(1000 + k), ['r2']);
    c.run(c.membership.timing.primaryProgressMs + 200);
    const progress = c.effects('suspect', 'r2').filter((o) => o.effect.reason === 'primary.progress');
    expect(progress).toHaveLength(limit);
  }, 60_000);

  it('§5.6, §8.1: the operator\'s retries of a request the primary ignores neither put off nor repeat the backup\'s primary.progress suspicion', () => {
    const c = makeCluster(1);
    c.run(200);
    c.filters.push((from, to, i) => (from === 'r2' && to === 'r1' && i.type === 'ptp' && i.body?.type === 'wrapper' ? null : i));
    const progressMs = c.membership.timing.primaryProgressMs;
    const first = c.now();
    // The operator resends every 200 ms until answered (PROTOCOL §8.1), here to r2 only.
    for (let k = 0; k < 8; k++) {
      c.operate(kill(7), ['r2']);
      c.run(200);
    }
    const progress = c.effects('suspect', 'r2').filter((o) => o.effect.reason === 'primary.progress');
    expect(progress).toHaveLength(1);
    expect(progress[0]?.at).toBeLessThanOrEqual(first + progressMs + 10);
  });
});

describe('the survivors of a condemned primary align by view.sync (PROTOCOL §10.5)', () => {
  /** r1 (faulty) orders `to` out of RSN sequence: `to` suspects rsn.gap and accuses it. */
  const gapTo = (c: Cluster, to: ProcessId) => {
    const rsn = c.replicas.find((r) => r.id === to)?.rsn() as number;
    injectAll(c, 'r1', to, [{ type: 'wrapper', rsn: rsn + 5, signed: cgOf(1, 'gap') }]);
  };
  /** r1 (faulty) never orders anything of a1's: it swallows a1's requests and the backups' forwards. */
  const swallowsA1 = (from: ProcessId, to: ProcessId, i: Item): boolean =>
    to === 'r1' && ((from === 'a1' && i.type === 'grp') || (from !== 'a1' && i.type === 'ptp' && i.body?.type === 'wrapper'));
  const views = (c: Cluster, r: ProcessId) => c.effects('log', r).filter((o) => o.effect.event === 'group.view').map((o) => [o.effect.fields['view'], o.effect.fields['primary']]);
  const notice = (text: string): PtpPayload => ({ type: 'notice', text });

  it('§10.5: a view.sync of the current view that comes before this replica condemned the primary is kept and used when its own sync starts: the successor orders the condemnation', () => {
    const c = makeCluster(1);
    c.run(200);
    const view = c.replicas[1]?.status(c.now()).view as number;
    // r3's accusation of r1 is late to r2 (lost here, delivered below).
    let holdAccusation = true;
    c.filters.push((from, to, i): Item => (holdAccusation && from === 'r3' && to === 'r2' && i.type === 'ptp' && i.body?.type === 'accuse' ? { ...i, body: notice('held') } : i));
    gapTo(c, 'r3');
    c.run(20);
    // r2 accuses too: r3, holding both accusations, condemns r1 and sends r2 its view.sync;
    // r2, holding only its own, does not condemn yet.
    gapTo(c, 'r2');
    c.run(20);
    expect(c.replicas.map((r) => r.phase())).toEqual(['retired', 'serving', 'syncing']);
    expect(c.replicas.map((r) => r.status(c.now()).phase)).toEqual(['retired', 'serving', 'syncing']);
    expect(views(c, 'r2')).toEqual([]);
    // r3's accusation reaches r2: r2 condemns r1 and, knowing r3's RSN already, orders it.
    holdAccusation = false;
    injectAll(c, 'r3', 'r2', [{ type: 'accuse', signed: signAccusation({ from: 'r3', view, target: 'r1', reason: 'rsn.gap' }, hmacSigner('r3')) }]);
    c.run(100);
    expect(views(c, 'r2')).toEqual([[view + 1, 'r2']]);
    expect(views(c, 'r3')).toEqual([[view + 1, 'r2']]);
    expect(c.replicas[1]?.rsn()).toBe(c.replicas[2]?.rsn());
  });

  it('§10.5: a repeated view.sync of the same peer (same RSN) sends it nothing again: the missing entries go once', () => {
    const c = makeCluster(1);
    c.run(200);
    const view = c.replicas[1]?.status(c.now()).view as number;
    // r1 withholds its next order from r2, and r3 does not relay it (§5.8): only r3 executes it,
    // unconfirmed, after orderConfirmMs.
    c.filters.push((from, to, i): Item => (to === 'r2' && i.type === 'ptp' && ((from === 'r1' && i.body?.type === 'wrapper') || (from === 'r3' && i.body?.type === 'order.evidence')) ? { ...i, body: notice('withheld') } : i));
    c.operate(kill(5), ['r1', 'r3']);
    c.run(c.membership.timing.orderConfirmMs + 100);
    const behind = c.replicas[1]?.rsn() as number;
    expect(c.replicas[2]?.rsn()).toBe(behind + 1);
    // What r3 sends r2 while they align, seen before it leaves (and kept from r2 here, so that
    // r2 cannot catch up and end the sync).
    const entries: number[] = [];
    c.filters.push((from, to, i): Item => {
      if (from !== 'r3' || to !== 'r2' || i.type !== 'ptp' || (i.body?.type !== 'wrapper' && i.body?.type !== 'wrapper.input')) return i;
      entries.push(i.body.rsn);
      return { ...i, body: notice('kept') };
    });
    gapTo(c, 'r2');
    gapTo(c, 'r3');
    c.run(50);
    expect(c.replicas.map((r) => r.phase())).toEqual(['retired', 'syncing', 'syncing']);
    expect(c.replicas.map((r) => r.status(c.now()).phase)).toEqual(['retired', 'syncing', 'syncing']);
    expect(entries).toEqual([behind + 1]);
    // r2's view.sync again (a replay of its own): nothing more.
    injectAll(c, 'r2', 'r3', [{ type: 'view.sync', view, rsn: behind }]);
    c.run(50);
    expect(entries).toEqual([behind + 1]);
    // An older one neither.
    injectAll(c, 'r2', 'r3', [{ type: 'view.sync', view, rsn: behind - 1 }]);
    c.run(50);
    expect(entries).toEqual([behind + 1]);
  });

  it('§10.5, §5.6: an operator\'s request the condemned primary ordered to the other survivor alone is executed in the sync and not forwarded again: no primary.progress against the successor', () => {
    const c = makeCluster(1);
    c.run(200);
    const { orderConfirmMs, primaryProgressMs } = c.membership.timing;
    // r3 has the request from the operator, forwards it to r1 and watches it (G8); r1 orders it
    // to r2 alone, and r2 does not relay it (§5.8): r2 executes it, unconfirmed, after orderConfirmMs.
    c.filters.push((from, to, i): Item => (to === 'r3' && i.type === 'ptp' && ((from === 'r1' && i.body?.type === 'wrapper') || (from === 'r2' && i.body?.type === 'order.evidence')) ? { ...i, body: notice('withheld') } : i));
    c.operate(kill(6), ['r1', 'r3']);
    c.run(orderConfirmMs + 100);
    const [, r2, r3] = c.replicas;
    expect(r2?.rsn()).toBe((r3?.rsn() as number) + 1);
    // r1 is condemned: r3 gets the request's entry from r2 in the sync, and r2 becomes primary.
    gapTo(c, 'r2');
    gapTo(c, 'r3');
    c.run(100);
    expect(views(c, 'r3').map((v) => v[1])).toEqual(['r2']);
    expect(r3?.state().outcomes.has(nonce(6))).toBe(true);
    c.run(primaryProgressMs + 200);
    // (r3 may well have suspected r1, which withheld the order from it.)
    expect(c.effects('suspect').filter((o) => o.effect.reason === 'primary.progress' && o.effect.target === 'r2')).toEqual([]);
    expect(r3?.rsn()).toBe(r2?.rsn());
    expect(r3?.digestHex()).toBe(r2?.digestHex());
  });

  it('§10.5: an agent\'s request that reaches the successor while it syncs is ordered as its view starts, without waiting for the agent to send it again', () => {
    const c = makeCluster(1);
    c.run(200);
    // r3's view.sync is late to r2 (lost here, sent again below): r2 stays in its sync.
    let holdSync = true;
    c.filters.push((from, to, i): Item => (holdSync && from === 'r3' && to === 'r2' && i.type === 'ptp' && i.body?.type === 'view.sync' ? { ...i, body: notice('held') } : i));
    gapTo(c, 'r2');
    gapTo(c, 'r3');
    c.run(20);
    expect(c.replicas.map((r) => r.phase())).toEqual(['retired', 'syncing', 'syncing']);
    expect(c.replicas.map((r) => r.status(c.now()).phase)).toEqual(['retired', 'syncing', 'syncing']);
    // a1's request: r1 no longer answers, so a1 falls back to r2 and r3 (G7), which hold it.
    c.input('a1', { type: 'request', nowMs: c.now(), request: echo('held') });
    c.run(600);
    expect(c.effects('log', 'r2').filter((o) => o.effect.event === 'agent.fallback')).toEqual([]);
    expect(c.effects('log', 'a1').filter((o) => o.effect.event === 'agent.fallback')).not.toEqual([]);
    holdSync = false;
    const view = c.replicas[1]?.status(c.now()).view as number;
    injectAll(c, 'r3', 'r2', [{ type: 'view.sync', view, rsn: c.replicas[2]?.rsn() as number }]);
    c.run(100);
    const started = c.effects('log', 'r2').find((o) => o.effect.event === 'group.view');
    expect(started?.effect.fields).toMatchObject({ view: view + 1, primary: 'r2' });
    const ordered = c.effects('deliver.request', 'r2').filter((o) => o.effect.request.type === 'echo' && o.effect.request.tag === 'held');
    expect(ordered.map((o) => o.at)).toEqual([started?.at]);
  });

  it('§10.5, spec §3.6 G8: a request the backups forwarded to a primary that never ordered it is ordered by the successor as its view starts, once, and the survivors stay equal', () => {
    const c = makeCluster(1);
    c.run(100);
    c.filters.push((from, to, i) => (swallowsA1(from, to, i) ? null : i));
    c.input('a1', { type: 'request', nowMs: c.now(), request: echo('lost') });
    c.run(2000);
    const started = c.effects('log', 'r2').find((o) => o.effect.event === 'group.view');
    expect(started?.effect.fields).toMatchObject({ primary: 'r2', replicas: ['r2', 'r3'] });
    const lost = (r: ProcessId) => c.effects('deliver.request', r).filter((o) => o.effect.request.type === 'echo' && o.effect.request.tag === 'lost');
    expect(lost('r2').map((o) => o.at)).toEqual([started?.at]);
    expect(lost('r3')).toHaveLength(1);
    const [, r2, r3] = c.replicas;
    expect(r3?.rsn()).toBe(r2?.rsn());
    expect(r3?.digestHex()).toBe(r2?.digestHex());
  });

  it('§10.5, spec §3.6 G8: a request only the other backup forwarded goes from it to the successor, which orders it: a backup never orders', () => {
    const c = makeCluster(1);
    c.run(100);
    // r1 never orders anything of a1's, and r2 never hears a1 at all: only r3 has the request.
    c.filters.push((from, to, i) => (swallowsA1(from, to, i) || (from === 'a1' && to === 'r2' && i.type === 'grp') ? null : i));
    c.input('a1', { type: 'request', nowMs: c.now(), request: echo('lost') });
    c.run(1500);
    // r3 accused r1 of primary.progress; r2 accuses it of an RSN gap: r1 is condemned.
    expect(c.effects('suspect', 'r3').filter((o) => o.effect.reason === 'primary.progress')).toHaveLength(1);
    gapTo(c, 'r2');
    c.run(1000);
    const started = c.effects('log', 'r2').find((o) => o.effect.event === 'group.view');
    expect(started?.effect.fields).toMatchObject({ primary: 'r2', replicas: ['r2', 'r3'] });
    const lost = (r: ProcessId) => c.effects('deliver.request', r).filter((o) => o.effect.request.type === 'echo' && o.effect.request.tag === 'lost');
    expect(lost('r2')).toHaveLength(1);
    expect(lost('r3')).toHaveLength(1);
    expect(lost('r2')[0]?.effect.rsn).toBe(lost('r3')[0]?.effect.rsn);
    const [, r2, r3] = c.replicas;
    expect(r3?.rsn()).toBe(r2?.rsn());
    expect(r3?.digestHex()).toBe(r2?.digestHex());
  });

  it('§10.5: the successor takes how far the other survivor executed only from that survivor\'s view.sync of this view, and entries from that survivor only: a lower RSN claimed in another view or by the condemned primary, or an order of the condemned primary, changes nothing', () => {
    const c = makeCluster(1);
    c.run(200);
    const view = c.replicas[1]?.status(c.now()).view as number;
    // r1 withholds its next order from r2, and r3 does not relay it: only r3 executes it.
    c.filters.push((from, to, i): Item => (to === 'r2' && i.type === 'ptp' && ((from === 'r1' && i.body?.type === 'wrapper') || (from === 'r3' && i.body?.type === 'order.evidence')) ? { ...i, body: notice('withheld') } : i));
    c.operate(kill(8), ['r1', 'r3']);
    c.run(c.membership.timing.orderConfirmMs + 100);
    const [, r2, r3] = c.replicas;
    const behind = r2?.rsn() as number;
    expect(r3?.rsn()).toBe(behind + 1);
    // r3's own view.sync is late to r2 (lost here, sent again below). r1 does not hear the
    // accusations: it goes on as if still primary.
    c.filters.push((_from, to, i): Item => (to === 'r1' && i.type === 'ptp' && i.body?.type === 'accuse' ? { ...i, body: notice('lost') } : i));
    let holdSync = true;
    c.filters.push((from, to, i): Item => (holdSync && from === 'r3' && to === 'r2' && i.type === 'ptp' && i.body?.type === 'view.sync' ? { ...i, body: notice('held') } : i));
    gapTo(c, 'r2');
    gapTo(c, 'r3');
    c.run(20);
    expect(c.effects('log', 'r2').filter((o) => o.effect.event === 'group.sync').map((o) => o.effect.fields)).toEqual([{ view, target: 'r1', peer: 'r3', rsn: behind }]);
    // Claims that r3 is no further than r2: from r3 but of another view, and from r1.
    injectAll(c, 'r3', 'r2', [{ type: 'view.sync', view: view + 1, rsn: behind }]);
    injectAll(c, 'r1', 'r2', [{ type: 'view.sync', view, rsn: behind }]);
    // And the condemned primary's order of a1's next request at r2's next RSN: void.
    const nextCsn = (r2?.state().csnReceived.get('a1') ?? 0) + 1;
    injectAll(c, 'r1', 'r2', [{ type: 'wrapper', rsn: (r2?.rsn() as number) + 1, signed: cgOf(nextCsn, 'void') }]);
    c.run(50);
    expect(views(c, 'r2')).toEqual([]);
    expect(r2?.phase()).toBe('syncing');
    // r3's view.sync: r2 catches up from r3's entries, then orders the condemnation.
    holdSync = false;
    injectAll(c, 'r3', 'r2', [{ type: 'view.sync', view, rsn: behind + 1 }]);
    c.run(100);
    expect(views(c, 'r2')).toEqual([[view + 1, 'r2']]);
    expect(r2?.rsn()).toBe(r3?.rsn());
    expect(r2?.digestHex()).toBe(r3?.digestHex());
    expect(orderedTags(c, 'void')).toEqual([]);
    for (const r of ['r2', 'r3']) expect(c.effects('deliver.request', r).filter((o) => o.effect.request.type === 'echo' && o.effect.request.tag === 'void')).toEqual([]);
  });
});
