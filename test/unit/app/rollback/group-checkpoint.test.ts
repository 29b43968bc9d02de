// Semi-coordinated checkpoints (PROTOCOL §11.7; radic-hmpl A.2.8 BSCO, SCO): the logging rule of
// a message between two ranks of one checkpoint group (channels.ts mustLog, onArrive), the choice
// of the checkpoint a restarting group restores (completeCheckpoint), and the coordination of the
// members' checkpoints (group-checkpoint.ts), stepped by hand with the frames passed between them.
import { describe, expect, it } from 'vitest';
import { createChannelState, mustLog, onArrive, onLogged, take } from '../../../../src/app/rollback/channels.ts';
import type { GroupFrame } from '../../../../src/app/rollback/codec.ts';
import { completeCheckpoint, GroupCheckpoint, groupRanks } from '../../../../src/app/rollback/group-checkpoint.ts';

const env = (ssn: number, epoch: number) => ({ ssn, epoch, comm: 0, tag: 1, structured: false, data: Uint8Array.of(ssn) });

describe('A.2.8 "internal messages ... are not logged, because re-execution regenerates them"', () => {
  it('the rule: another group, always logged; same group, logged only when the sender\'s epoch is below the receiver\'s (it crossed the checkpoint line)', () => {
    expect(mustLog(3, 3, false)).toBe(true);
    expect(mustLog(4, 3, false)).toBe(true);
    expect(mustLog(3, 3, true)).toBe(false);
    expect(mustLog(4, 3, true)).toBe(false);
    expect(mustLog(2, 3, true)).toBe(true);
  });

  it('an internal message takes no log position, is held at once and acknowledged; a cross-group one is logged as under NCO', () => {
    const st = createChannelState(0, 3, [0, 1, 0]); // ranks 0 and 2 share a group
    expect(onArrive(st, 2, env(1, 0))).toEqual({ kind: 'internal', loggedIn: 1 });
    expect(onArrive(st, 1, env(1, 0))).toEqual({ kind: 'new', pos: 1, parts: 1 });
    expect(st.logPos).toBe(1);
    expect(take(st, { source: 2, tag: 1, comm: 0 }, 0, true)?.ssn).toBe(1); // RBML takes it: held
    expect(take(st, { source: 1, tag: 1, comm: 0 }, 1, true)).toBeNull(); // not logged yet
  });

  it('SCO: a message sent before the sender\'s checkpoint k and received after the receiver\'s is logged', () => {
    const st = createChannelState(0, 2, [0, 0]);
    st.epoch = 2;
    expect(onArrive(st, 1, env(1, 1))).toEqual({ kind: 'new', pos: 1, parts: 1 });
    expect(onArrive(st, 1, env(2, 2))).toEqual({ kind: 'internal', loggedIn: 0 });
  });

  it('an internal message counts as held only once every earlier one from its sender is logged: `have` and acks never cover an unlogged one', () => {
    const st = createChannelState(0, 2, [0, 0]);
    st.epoch = 2;
    onArrive(st, 1, env(1, 1)); // crossing: logged at position 1
    expect(onArrive(st, 1, env(2, 2))).toEqual({ kind: 'internal', loggedIn: 0 });
    expect(st.loggedIn[1]).toBe(0);
    expect(onLogged(st, 1)).toEqual(new Map([[1, 2]]));
    expect(st.loggedIn[1]).toBe(2);
  });
});

describe('A.2.8 commit rule: "complete only when it has received all group members\' checkpoint files ... the previous complete checkpoint is used"', () => {
  const m = (...ids: number[]) => ids.map((id) => ({ id }));
  it('the newest id in every member\'s record', () => {
    expect(completeCheckpoint([m(2, 3), m(1, 2), m(2, 3)], [0, 1, 2])).toBe(2);
    expect(completeCheckpoint([m(2, 3), m(2, 3)], [1, 0])).toBe(3);
  });
  it('a member\'s newer checkpoint the group never completed is passed over; the origin (1) is complete once every member put it', () => {
    expect(completeCheckpoint([m(1, 2), m(1)], [0, 1])).toBe(1);
  });
  it('none while a member\'s record is empty (its marks have not reached the group)', () => {
    expect(completeCheckpoint([m(1, 2), []], [0, 1])).toBeNull();
    expect(completeCheckpoint([m(0)], [0])).toBeNull();
  });
  it('the group is the ranks that share a group id', () => {
    expect(groupRanks([0, 1, 0, 1], 2)).toEqual([0, 2]);
    expect(groupRanks([0, 1, 2], 1)).toEqual([1]);
  });
});

/** Members of one group wired to each other: frames are queued and delivered by `flush`. */
function wire(mode: 'bsco' | 'sco', groups: number[]) {
  const queue: { from: number; to: number; f: GroupFrame }[] = [];
  const members = new Map<number, GroupCheckpoint>();
  for (let r = 0; r < groups.length; r++) {
    members.set(r, new GroupCheckpoint({ self: r, groups, mode, send: (to, f) => queue.push({ from: r, to, f }) }));
  }
  // Deliver every frame, letting the members' waiting steps run, until nothing moves.
  const flush = async () => {
    for (let quiet = 0; quiet < 3; ) {
      await new Promise((r) => setImmediate(r));
      if (queue.length === 0) quiet++;
      for (const { from, to, f } of queue.splice(0)) members.get(to)!.onFrame(from, f);
    }
  };
  for (const g of members.values()) g.announce();
  return { members, flush, queue };
}

/** One snapshot() of `g` as runtime.ts makes it, storing the checkpoint at once. */
async function snapshot(g: GroupCheckpoint, due: boolean): Promise<number | null> {
  g.calls++;
  const id = await g.decide(due);
  if (id !== null) {
    g.epoch = id;
    g.stored(id);
  }
  return id;
}

describe('A.2.8 SCO: a member checkpoints and continues; it does not begin k+1 before every member has stored k', () => {
  it('epochs line up: the first to be due takes k, the other follows at its next snapshot, and nobody takes k+1 before both stored k', async () => {
    const { members, flush } = wire('sco', [0, 0]);
    await flush();
    const [a, b] = [members.get(0)!, members.get(1)!];
    expect(await snapshot(a, true)).toBe(1);
    expect(await snapshot(a, true)).toBeNull(); // b has not stored 1: skipped, not blocked
    await flush();
    expect(await snapshot(b, false)).toBe(1); // a member is at a higher epoch: due
    await flush();
    expect(await snapshot(a, true)).toBe(2);
  });

  it('after a group rollback the next id is past every member\'s floor (a protector takes no id twice)', async () => {
    const { members, flush } = wire('sco', [0, 0]);
    members.get(0)!.restored(2, 3); // a stored 3, which b never completed
    members.get(1)!.restored(2, 2);
    members.get(0)!.announce();
    members.get(1)!.announce();
    await flush();
    expect(await snapshot(members.get(1)!, true)).toBe(4);
    await flush();
    expect(await snapshot(members.get(0)!, false)).toBe(4);
  });
});

describe('A.2.8 BSCO: the leader\'s round, one snapshot() call for all, then the barrier', () => {
  it('the leader asks, each member says how many snapshot() calls it made, all take checkpoint k at the same call', async () => {
    const { members, flush } = wire('bsco', [0, 0, 0]);
    await flush();
    const [l, b, c] = [0, 1, 2].map((r) => members.get(r)!);
    // b is one call ahead of the leader.
    expect(await snapshot(b!, false)).toBeNull();
    const leading = snapshot(l!, true); // call 1: the leader asks
    await flush();
    expect(await leading).toBeNull(); // everyone answered: commit at call max(1, 1, 0) + 1 = 2
    await flush();
    expect(await snapshot(b!, false)).toBe(1); // b's call 2
    const cFirst = await snapshot(c!, false); // c's call 1: before the commit's call
    expect(cFirst).toBeNull();
    expect(await snapshot(c!, false)).toBe(1);
    expect(await snapshot(l!, false)).toBe(1);
    await flush();
    expect([l, b, c].map((g) => g!.allStored(1))).toEqual([true, true, true]);
  });

  it('a member that answered holds its next snapshot() until the decision', async () => {
    const { members, flush, queue } = wire('bsco', [0, 0]);
    await flush();
    const [l, b] = [members.get(0)!, members.get(1)!];
    const leading = snapshot(l, true);
    // Deliver only the prepare: b answers and its next snapshot waits.
    await new Promise((r) => setImmediate(r));
    const prepare = queue.splice(0).filter((x) => x.f.kind === 'prepare');
    for (const p of prepare) b.onFrame(p.from, p.f);
    let done = false;
    const held = snapshot(b, false).then((id) => {
      done = true;
      return id;
    });
    await new Promise((r) => setImmediate(r));
    expect(done).toBe(false);
    await flush();
    await leading;
    await flush();
    expect(await held).toBeNull(); // the decision: call max(1, 0) + 1 = 2
    expect(await snapshot(b, false)).toBe(1);
  });

  it('a group of one checkpoints on its interval alone, as under NCO', async () => {
    const { members } = wire('bsco', [0, 1]);
    expect(await snapshot(members.get(0)!, false)).toBeNull();
    expect(await snapshot(members.get(0)!, true)).toBe(1);
    expect(await snapshot(members.get(1)!, true)).toBe(1);
  });
});
