// What the rest of the library needs of a rollback task's message layer (docs/PROTOCOL.md §11.3,
// §11.6): CommLayer's MessageLayer (ranks for VPIDs), the checkpoint runtime's capture, restore
// and replay, and G-MPI's membership and finalize hooks. Two layers implement it: RankChannels
// (RBML, HMPL: the P2P mesh, receiver-side logging) and CmChannels (channel memories: every
// message through the receiver's home CM).
import type { MessageLayer } from '../gmpi/comm.ts';
import type { ChannelState } from './channels.ts';
import type { ChannelSnapshot, LogEntry } from './codec.ts';

export type RollbackChannels = MessageLayer & {
  /** This process's rank. */
  readonly self: number;
  /** What the layer counted (duplicates, resends, internal messages, deposits, …), by name. */
  readonly counters: Readonly<Record<string, number>>;
  readonly st: ChannelState;
  size(): number;
  /** Start receiving (after a replacement's restore and replay). */
  start(): void;
  /** The channels' part of a checkpoint, taken between calls. */
  capture(): ChannelSnapshot;
  /** A replacement starts from checkpoint `c` taken at log position `logPos`. */
  restore(c: ChannelSnapshot, logPos: number): void;
  /** The log entries after the checkpoint, in log order. */
  replay(pos: number, e: LogEntry): void;
  skipLogTo(pos: number): void;
  /** Call `f` once the program has taken every replayed message. */
  whenCaughtUp(f: () => void): void;
  /** Resolves once no send of ours waits unlogged (a checkpoint waits for it). */
  drained(): Promise<void>;
  /** Resolves once the store holds every entry of ours (finalize waits for it). */
  logged(): Promise<void>;
  close(reason: Error): void;
  onDeath(vpid: number): void;
  /** `vpid`'s rank ended normally (§11.3): it takes nothing more, so nothing waits for it. */
  onFinished(vpid: number): void;
  vpidOf(rank: number): number;
  rankOfVpid(vpid: number): number;
};
