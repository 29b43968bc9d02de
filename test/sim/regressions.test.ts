// Protocol bugs the simulator found, each reduced to a deterministic scenario on the real cores
// (no random faults), asserting what the agent observes and that every invariant holds.
import { describe, expect, it } from 'vitest';
import { realCores } from '../../src/sim/cores.ts';
import { World } from '../../src/sim/world.ts';

const echo = (tag: string, fanout: 'self' | 'all' = 'self') => ({ type: 'echo' as const, tag, fanout, count: 1, data: new Uint8Array([1]) });

function errorReportsNaming(w: World, agent: string, replica: string, afterMs: number): number {
  return w.effects((e, at) => at === agent && e.type === 'log' && e.event === 'agent.error-report').filter((e) => {
    const suspects = e.effect.type === 'log' ? e.effect.fields['suspects'] : null;
    return e.atMs > afterMs && Array.isArray(suspects) && suspects.includes(replica);
  }).length;
}

describe('regressions found by the simulator', () => {
  // Seeds with this shape (e.g. seed 272 of the first simulator runs): a replica's lane 1 to an
  // agent loses every copy for longer than three ReplicaTimeouts. PROTOCOL §5.3 then settled the
  // GSSN and group-acked it, which released the lossy replica's unsent copy: its lane-1 stream to
  // the agent had a hole it never filled (flaw 1 of spec §3.7 again, through the timeout path),
  // and one later crash left the agent with a single copy of everything.
  it('a replica\'s lane to an agent cut for longer than three ReplicaTimeouts carries its copies again after the heal', () => {
    const w = new World({ seed: 0, agents: 1, cores: realCores, trace: true });
    const healMs = 900;
    w.network.addRule((f, now) => (f.from === 'r2' && f.to === 'a1' && now >= 100 && now < healMs && f.items.some((i) => i.type === 'grp') ? 'drop' : 'pass'));
    w.start();
    w.scheduler.at(100, () => w.request('a1', echo('before')));
    for (let i = 0; i < 5; i++) w.scheduler.at(1000 + 50 * i, () => w.request('a1', echo(`after${i}`)));
    // One crash fault after the heal: r1 and r2 are correct, so a1 must still get 2 matching copies.
    w.scheduler.at(1300, () => w.crash('r3'));
    for (let i = 0; i < 3; i++) w.scheduler.at(1400 + 50 * i, () => w.request('a1', echo(`late${i}`)));
    w.runUntil(2500);

    // After the heal r2 is healthy: the agent has no reason to report it.
    expect(errorReportsNaming(w, 'a1', 'r2', healMs + 400)).toBe(0);
    w.checker.finish({ livenessExpected: true, digests: w.digests() });
    expect(w.checker.violations).toEqual([]);
  });

  // Seeds with this shape (e.g. seed 804 before the fix): an agent's first request (its
  // node.join) is ordered after a fanout-'all' echo of another agent. The agent delivered that
  // broadcast (destInc 0); then the delivery of its first request adopted its incarnation and
  // restarted its GSSN chain at 0 (PROTOCOL §5.7) while the agent's gssnDelivered stayed at the
  // broadcast's GSSN, so nothing was ever delivered to it again. Fixed by sending 'all' echoes
  // to joined agents only: the agent does not get the broadcast, but gets everything after.
  it('an agent whose first request is ordered after another agent\'s broadcast still gets its own replies', () => {
    const w = new World({ seed: 0, agents: 2, cores: realCores, trace: true });
    w.network.addRule((f, now) => (f.from === 'a1' && f.to === 'r1' && now < 30 && f.items.some((i) => i.type === 'grp') ? 'drop' : 'pass'));
    w.start();
    w.scheduler.at(10, () => w.request('a2', echo('bcast', 'all')));
    w.scheduler.at(200, () => w.request('a1', echo('mine')));
    w.runUntil(1500);

    const tags = w.effects((e, at) => at === 'a1' && e.type === 'deliver.command').map((e) => (e.effect.type === 'deliver.command' ? e.effect.command.type === 'echo.reply' ? e.effect.command.tag : '' : ''));
    expect(tags).toEqual(['mine']);
    w.checker.finish({ livenessExpected: true, digests: w.digests() });
    expect(w.checker.violations).toEqual([]);
  });

  // Found by the rsn.swap behaviour (src/faults/byzantine.ts): a Byzantine primary tells one backup
  // a different order (RSN 3 and 4 swapped between two agents' requests). Each backup's checks
  // pass (RSNs in sequence, each agent's CSNs in order), so the two correct backups apply
  // different sequences, reach different states at the same RSN, and sign conflicting group
  // messages for the same GSSN (DESIGN.md §2: "two correct replicas never sign conflicting
  // commands"). The agents then report the correct backup r3 as the odd one out, and no replica
  // raises 'digest.mismatch' although every heartbeat carries (rsn, digest).
  it('a primary that orders differently for each backup is caught before correct replicas diverge', () => {
    const w = new World({ seed: 0, agents: 2, cores: realCores, trace: true, byzantine: new Map([['r1', [{ type: 'rsn.swap', backup: 'r3', atRsn: 3 }]]]) });
    w.start();
    w.scheduler.at(100, () => w.request('a1', echo('x')));
    w.scheduler.at(101, () => w.request('a2', echo('y')));
    w.scheduler.at(200, () => w.request('a1', echo('z', 'all')));
    w.runUntil(1000);

    const raised = w.effects((e) => e.type === 'suspect' && e.reason === 'digest.mismatch');
    expect(raised.length).toBeGreaterThan(0);
    w.checker.finish({ livenessExpected: false, digests: w.digests() });
    expect(w.checker.violations).toEqual([]);
  });

  // Seeds 409 and 1480: an agent restarts and its hello to the backups is lost for a while, but
  // its first request reaches the primary, so every replica adopts the new incarnation (RSN
  // order). The backups still hold the old session to the agent: they send the new
  // incarnation's group messages on it (the agent drops them as STALE_SESSION), then discard
  // them when the new session resets the link (PROTOCOL §3.2 step 2). Only the primary's copies
  // ever arrive, so the agent, now correct, never delivers anything again.
  it('a restarted agent whose hello reaches the backups late still gets its group messages', () => {
    const w = new World({ seed: 0, agents: 1, cores: realCores, trace: true });
    w.network.addRule((f, now) => (now >= 150 && now < 300 && f.from === 'a1' && (f.to === 'r2' || f.to === 'r3') ? 'drop' : 'pass'));
    w.start();
    w.scheduler.at(50, () => w.request('a1', echo('old')));
    w.scheduler.at(100, () => w.crash('a1'));
    w.scheduler.at(150, () => w.restart('a1'));
    w.scheduler.at(170, () => w.request('a1', echo('new')));
    w.runUntil(1500);

    const tags = w.effects((e, at) => at === 'a1' && e.type === 'deliver.command').map((e) => (e.effect.type === 'deliver.command' ? e.effect.command.type === 'echo.reply' ? e.effect.command.tag : '' : ''));
    expect(tags).toEqual(['old', 'new']);
    w.checker.finish({ livenessExpected: true, digests: w.digests() });
    expect(w.checker.violations).toEqual([]);
  });
});
