// Semi-coordinated checkpoints of one checkpoint group (docs/PROTOCOL.md §11.7; radic-hmpl A.2.8
// BSCO and SCO): the ranks placed on one node when the task started checkpoint together, with
// group epochs for ids (the k-th checkpoint of every member has id k), so that their messages to
// each other need not be logged (channels.ts mustLog). This file owns the coordination: what each
// member knows of the others' epochs (`epoch` frames), when a member's snapshot() takes its next
// checkpoint and with which id, BSCO's leader round (`prepare` / `ready` / `commit`) and barrier,
// and the choice of the checkpoint a restarting group restores (`completeCheckpoint`).
//
// - Every member announces `epoch {stored, floor}` (its epoch; the highest id its store holds) to
//   the others when it starts, to each new holder of a member's rank, and after each stored
//   checkpoint. After a group rollback the next id is past every member's floor: a protector takes
//   no id twice, and a member may hold a newer checkpoint its group never completed.
// - SCO: a member checkpoints at a snapshot() once its interval has passed or a member is at a
//   higher epoch, and continues; it does not begin checkpoint k+1 before every member has stored k
//   (it skips the snapshot instead of blocking: no member ever waits for another here).
// - BSCO: the group's leader (its lowest rank), when its interval has passed, asks every member
//   for the number of snapshot() calls it has made (`prepare`); each answers from its message pump
//   (`ready`) and holds its next snapshot() until the leader says at which call all take the
//   checkpoint and with which id (`commit`). All take it at that call, then wait until every
//   member has stored it (the barrier, A.2.8 BSCO steps 1-4). A member waiting at the barrier has
//   reached the same snapshot() call as the others: in an SPMD code nobody needs it to get there.
import { assert } from '../../base/result.ts';
import type { GroupFrame } from './codec.ts';

export type GroupMode = 'bsco' | 'sco';

/** The checkpoint a member of a restarting group restores (A.2.8 commit rule: "a group checkpoint
 *  [is] complete only when it has received all group members' checkpoint files ... If the node
 *  fails first, the previous complete checkpoint is used"): the newest id that every member's
 *  recorded marks include; null when there is none (a mark not recorded yet). Every member
 *  restarts together and reads the same marks, so all choose the same id. */
export function completeCheckpoint(marks: readonly (readonly { readonly id: number }[])[], members: readonly number[]): number | null {
  assert(members.length > 0, 'a group has a member');
  const own = (marks[members[0]!] ?? []).map((m) => m.id).filter((id) => id > 0).sort((a, b) => b - a);
  for (const id of own) if (members.every((r) => (marks[r] ?? []).some((m) => m.id === id))) return id;
  return null;
}

/** The ranks of `self`'s checkpoint group, itself included, ascending. */
export const groupRanks = (groups: readonly number[], self: number): number[] => groups.flatMap((g, r) => (g === groups[self] ? [r] : []));

type Known = { stored: number; floor: number };

export type GroupCheckpointOptions = {
  readonly self: number;
  readonly groups: readonly number[];
  readonly mode: GroupMode;
  /** Sends a coordination frame to a rank of the group (rank-channels.ts). */
  readonly send: (rank: number, f: GroupFrame) => void;
};

export class GroupCheckpoint {
  readonly mode: GroupMode;
  /** The other ranks of the group. */
  readonly members: readonly number[];
  readonly leader: boolean;
  /** The group's lowest rank: BSCO's leader. */
  private readonly leaderRank: number;
  /** This member's epoch: the checkpoint id it last took or restored. */
  epoch = 0;
  /** The highest checkpoint id this member's store holds. */
  floor = 0;
  /** snapshot() calls made so far (BSCO's rounds count them). */
  calls = 0;
  private readonly known = new Map<number, Known>();
  /** BSCO: the leader's round, and the members' answers to it. */
  private round = 0;
  private readonly readies = new Map<number, number>();
  /** BSCO: a member answered `ready` and waits for the leader's decision. */
  private awaitingCommit = false;
  private commit: { id: number; at: number } | null = null;
  private waiters: { until: () => boolean; resolve: () => void }[] = [];
  private readonly send: (rank: number, f: GroupFrame) => void;

  constructor(o: GroupCheckpointOptions) {
    this.mode = o.mode;
    this.send = o.send;
    const ranks = groupRanks(o.groups, o.self);
    this.members = ranks.filter((r) => r !== o.self);
    this.leaderRank = ranks[0]!;
    this.leader = this.leaderRank === o.self;
  }

  /** Tell `rank` (every member when undefined) where this member stands. */
  announce(rank?: number): void {
    for (const r of rank === undefined ? this.members : [rank]) if (this.members.includes(r)) this.send(r, { kind: 'epoch', stored: this.epoch, floor: this.floor });
  }

  /** A new process holds `rank` (a replacement): what the old one said no longer holds. */
  forget(rank: number): void {
    this.known.delete(rank);
    this.readies.delete(rank);
  }

  onFrame(rank: number, f: GroupFrame): void {
    if (!this.members.includes(rank)) return;
    switch (f.kind) {
      case 'epoch': {
        const k = this.known.get(rank);
        this.known.set(rank, { stored: Math.max(f.stored, k?.stored ?? 0), floor: Math.max(f.floor, f.stored, k?.floor ?? 0) });
        break;
      }
      case 'prepare':
        if (rank !== this.leaderRank) break;
        this.awaitingCommit = true;
        this.send(rank, { kind: 'ready', round: f.round, calls: this.calls });
        break;
      case 'ready':
        if (this.leader && f.round === this.round) this.readies.set(rank, f.calls);
        break;
      case 'commit':
        if (rank === this.leaderRank) {
          this.commit = { id: f.id, at: f.at };
          this.awaitingCommit = false;
        }
        break;
      default: {
        const never: never = f;
        return never;
      }
    }
    this.wake();
  }

  /** This member stored checkpoint `id`: its epoch is `id` (set at capture), its floor too. */
  stored(id: number): void {
    this.floor = Math.max(this.floor, id);
    this.announce();
    this.wake();
  }

  /** A restarted member: `epoch` the checkpoint it restored (0: none), `floor` the highest id its
   *  store or the group's record holds. */
  restored(epoch: number, floor: number): void {
    this.epoch = epoch;
    this.floor = Math.max(floor, epoch);
  }

  /** Every member has stored `id` (or gone beyond it). */
  allStored(id: number): boolean {
    return this.members.every((r) => (this.known.get(r)?.stored ?? 0) >= id);
  }

  until(p: () => boolean): Promise<void> {
    if (p()) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ until: p, resolve }));
  }

  /** The id of this member's next checkpoint: the one a member has already taken beyond this
   *  member's epoch (it follows), else past every floor the group knows of. */
  private nextId(): number {
    const ahead = [...this.known.values()].map((k) => k.stored).filter((k) => k > this.epoch);
    if (ahead.length > 0) return Math.min(...ahead);
    let id = this.floor;
    for (const k of this.known.values()) id = Math.max(id, k.floor);
    return id + 1;
  }

  private allKnown(): boolean {
    return this.members.every((r) => this.known.has(r));
  }

  /** At snapshot() call `this.calls` (already counted): the id of the checkpoint to take now, or
   *  null. `due`: this member's interval has passed. */
  async decide(due: boolean): Promise<number | null> {
    if (this.members.length === 0) return due ? this.nextId() : null;
    if (this.mode === 'sco') {
      const behind = [...this.known.values()].some((k) => k.stored > this.epoch);
      if (!(due || behind) || !this.allKnown() || !this.allStored(this.epoch)) return null;
      return this.nextId();
    }
    if (this.awaitingCommit) await this.until(() => !this.awaitingCommit);
    if (this.commit !== null && this.calls >= this.commit.at) {
      const { id } = this.commit;
      this.commit = null;
      return id;
    }
    if (!this.leader || !due || this.commit !== null) return null;
    await this.until(() => this.allKnown());
    this.round++;
    this.readies.clear();
    for (const r of this.members) this.send(r, { kind: 'prepare', round: this.round });
    await this.until(() => this.members.every((r) => this.readies.has(r)));
    const at = Math.max(this.calls, ...this.readies.values()) + 1;
    const id = this.nextId();
    for (const r of this.members) this.send(r, { kind: 'commit', round: this.round, id, at });
    this.commit = { id, at };
    return null;
  }

  private wake(): void {
    const still: typeof this.waiters = [];
    for (const w of this.waiters) {
      if (w.until()) w.resolve();
      else still.push(w);
    }
    this.waiters = still;
  }
}
