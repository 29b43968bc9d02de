// G-MPI's init in a task with `recovery: rollback` (docs/PROTOCOL.md §11): what the mapping says
// (this process's rank, every rank's VPID, the task's options, its protector), the checks that
// make a misconfigured process fail at once and visibly, and the assembly of the rank channels,
// the communicators over them and the checkpoint runtime. A replacement restores its rank's
// checkpoint and log here, before it meets the others, so what it tells them it holds is what
// it held when it died.
import { barrier } from '../gmpi/collectives.ts';
import { CommLayer, type Comm } from '../gmpi/comm.ts';
import type { P2P } from '../gmpi/p2p.ts';
import { P2PError, type PeerAddress } from '../gmpi/p2p-types.ts';
import type { Link } from '../link/link.ts';
import type { RollbackMapping } from '../../core/wire/recovery.ts';
import type { RollbackChannels } from './channels-api.ts';
import { CmChannels } from './cm-channels.ts';
import { CmClient } from './cm-client.ts';
import { ProtectorClient, type ProtectorConnectOptions } from './protector-client.ts';
import { RankChannels } from './rank-channels.ts';
import { FailoverStore } from './failover-store.ts';
import { ChainedStore, LOG_EXTENT_REPORT_MS } from './log-chain.ts';
import { GroupCheckpoint } from './group-checkpoint.ts';
import { checkRegisteredState, RollbackError, RollbackRuntime, type Mark, type MarkBody, type RecoverableStore, type RegisteredState } from './runtime.ts';

/** The rollback part of the mapping (§11.2): this process's rank and protector, every rank's
 *  VPID, protector and recorded checkpoints, the task's options. */
export type { RollbackMapping };

export type RecoveryReport = {
  rank: number; restoredFrom: number; refused: number; replayed: number; fetchMs: number; restoreMs: number; replayMs: number;
};

/** The exit status of a process whose rollback protection failed (its store refused or lost
 *  its log, a peer broke the channel protocol): it stops rather than run on unprotected, and
 *  the group replaces it (EX_SOFTWARE). */
export const ROLLBACK_FATAL_EXIT = 70;

/** The logging modes this library carries out; the others are refused at init (§11.5). */
export const BUILT_LOGGING: readonly RollbackMapping['logging'][] = ['rbml', 'hmpl', 'cm'];
/** Uncoordinated, and semi-coordinated per checkpoint group (§11.7; with rbml and hmpl). */
export const BUILT_CHECKPOINTS: readonly RollbackMapping['checkpoint'][] = ['nco', 'bsco', 'sco'];

export type RollbackParts = {
  readonly channels: RollbackChannels;
  readonly layer: CommLayer;
  readonly world: Comm;
  readonly runtime: RollbackRuntime;
  readonly store: ChainedStore;
  /** Reports the log's extent to the group (LOG_EXTENT_REPORT_MS). */
  readonly extentTimer: NodeJS.Timeout;
  /** The store failed under a call: end the process visibly (it never runs on unprotected). */
  readonly fatal: (e: Error) => void;
  /** Finalize closed the channels (closeRollback); until then a rank in finalize's barrier
   *  still meets a replacement (§11.3): its peer may die there. */
  closed: boolean;
};

export type OpenRollbackArgs = {
  readonly p2p: P2P;
  readonly rb: RollbackMapping;
  readonly state: RegisteredState | undefined;
  readonly recovered: boolean;
  /** The group's record of this rank's checkpoints (§11.4). */
  readonly marks?: readonly Mark[];
  /** Sends a mark to the group (§11.4): a stored checkpoint's, an extent report, or, for a rank
   *  the group has no mark of yet, where its log goes (id 0), so a replacement placed on
   *  another node still finds it (under channel memories, its home CM). */
  readonly onMark?: (mark: MarkBody) => void;
  /** The rank's store at its protector (protector-client.ts; an in-memory one in tests). */
  readonly connectStore: () => Promise<RecoverableStore & { close(): Promise<void> }>;
  readonly onFatal: (e: Error) => void;
  readonly now?: () => number;
  /** A replacement's recovery, once it has caught up. */
  readonly report?: (r: RecoveryReport) => void;
  /** The runtime, once built: a move's mark is its newest, with the new protector. */
  readonly bind?: (runtime: RollbackRuntime) => void;
  /** Channel memories (§11.6): every rank's home CM, and a connection to one as this rank.
   *  `connectStore` then gives the connection to this rank's own home CM (a CmClient). */
  readonly cm?: { readonly homes: readonly string[]; readonly connect: (endpoint: string) => Promise<CmClient> };
};

/** Where a rank's data is: the protector its newest mark names, else the mapping's. */
const newestProtector = (rb: RollbackMapping, rank: number): string => {
  const marks = rb.marks[rank] ?? [];
  return marks[marks.length - 1]?.protector ?? rb.protectors[rank] ?? '';
};

/** Where this process's own rank's data is: its newest mark's protector, else its mapping's. */
const ownProtector = (rb: RollbackMapping): string => rb.marks[rb.rank]?.at(-1)?.protector ?? rb.protector;

/** How to reach the protector at `endpoint` as this process. */
function protectorTarget(link: Link, rb: RollbackMapping, endpoint: string): ProtectorConnectOptions {
  const i = endpoint.lastIndexOf(':');
  if (i <= 0) throw new RollbackError('NO_CHECKPOINT', `the mapping names no protector (${JSON.stringify(endpoint)}) for rank ${rb.rank}: the cluster needs a second node`);
  return { host: endpoint.slice(0, i), port: Number(endpoint.slice(i + 1)), task: link.mapping.task, rank: rb.rank, incarnation: link.vpid, taskKey: link.taskKey };
}

/** Channel memories (§11.6): each rank's home CM is the protector that holds its data (its
 *  newest mark's; the mapping's before any), which stays its home for the task's life (a CM is
 *  not moved: its node's failure fails the ranks that need it, visibly). */
function cmArgs(link: Link, p2p: P2P, rb: RollbackMapping, state: RegisteredState | undefined): OpenRollbackArgs {
  const marks = rb.marks[rb.rank] ?? [];
  const homes = rb.ranks.map((_, r) => (r === rb.rank ? ownProtector(rb) : newestProtector(rb, r)));
  const home = homes[rb.rank]!;
  const connect = (endpoint: string): Promise<CmClient> => CmClient.connect(endpoint, protectorTarget(link, rb, endpoint));
  return {
    p2p, rb, state, recovered: link.mapping.recovered, marks, cm: { homes, connect },
    onMark: (m) => link.mark({ ...m, protector: home }),
    connectStore: () => connect(home),
    ...toStderr(rb.rank),
  };
}

/** Both go to the task's stderr: a replacement's recovery line, and a fatal error, which ends the
 *  process visibly (it never runs on unprotected). */
const toStderr = (rank: number): Pick<OpenRollbackArgs, 'report' | 'onFatal'> => ({
  report: (r) => process.stderr.write(`trine: rollback recovery ${JSON.stringify(r)}\n`),
  onFatal: fatalExit(rank),
});

const fatalExit = (rank: number) => (e: Error): never => {
  process.stderr.write(`trine: rollback recovery of rank ${rank} failed, stopping: ${e.message}\n`);
  process.exit(ROLLBACK_FATAL_EXIT);
};

/** What Gmpi.init passes: the protector from the mapping, and a fatal error ends the process
 *  visibly, with the reason on stderr (the task's output), never silently. */
export function rollbackArgs(link: Link, p2p: P2P, rb: RollbackMapping, state: RegisteredState | undefined): OpenRollbackArgs {
  if (rb.logging === 'cm') return cmArgs(link, p2p, rb, state);
  const marks = rb.marks[rb.rank] ?? [];
  // The rank's data stays with the protector its newest mark names; a rank with none yet uses
  // its node's protector in the ring. The others of the ring are where it moves if that one's
  // node fails.
  const protector = ownProtector(rb);
  let runtime: RollbackRuntime | null = null;
  const store = new FailoverStore({
    endpoints: protectorOrder(protector, rb.protectors),
    connect: (endpoint) => ProtectorClient.connect(protectorTarget(link, rb, endpoint)),
    // The same newest mark (its checkpoint is the one the store moved), now held there. A move
    // while init is still recovering is told once the runtime sends its marks.
    onMoved: (endpoint) => {
      if (runtime !== null) link.mark({ ...runtime.mark(), protector: endpoint });
    },
  });
  return {
    p2p, rb, state, recovered: link.mapping.recovered, marks,
    onMark: (m) => link.mark({ ...m, protector: store.endpoint }),
    bind: (r) => (runtime = r),
    connectStore: async () => {
      // A replacement's data is at the protector its newest mark names (or, with none, the
      // mapping's, where its first incarnation began); a first incarnation takes any that answers.
      await store.open(link.mapping.recovered);
      return store;
    },
    ...toStderr(rb.rank),
  };
}

/** `first`, then the other protectors the mapping names, in ring order after it (each
 *  endpoint once): where a rank's data goes when its protector's node fails. */
export function protectorOrder(first: string, protectors: readonly string[]): string[] {
  const others = [...new Set(protectors.filter((p) => p !== '' && p !== first))].sort();
  const after = others.filter((p) => p > first);
  return [first, ...after, ...others.filter((p) => p < first)];
}

/** Check the options, connect the store, build the parts; a replacement recovers. (A first
 *  incarnation takes no checkpoint here: its state is what its own code builds after init, and
 *  a replacement before its first snapshot() rebuilds it the same way, replaying the whole log.) */
export async function openRollback(a: OpenRollbackArgs): Promise<RollbackParts> {
  const { rb } = a;
  if (a.state === undefined) {
    throw new RollbackError('BAD_STATE', "this task runs with rollback recovery: register the application's state with Gmpi.init({ state }) (hooks or a plain object)");
  }
  const state = checkRegisteredState(a.state);
  if (!BUILT_LOGGING.includes(rb.logging) || !BUILT_CHECKPOINTS.includes(rb.checkpoint)) {
    throw new RollbackError('BAD_STATE', `logging ${rb.logging} with ${rb.checkpoint} checkpoints is not built (PROTOCOL §11.5): submit with --logging rbml, hmpl or cm`);
  }
  if (rb.logging === 'cm' && rb.checkpoint !== 'nco') {
    throw new RollbackError('BAD_STATE', `channel memories carry every message through its receiver's CM, so semi-coordinated checkpoints (${rb.checkpoint}) have nothing to save there (PROTOCOL §11.6): submit --logging cm with --checkpoint nco, or ${rb.checkpoint} with --logging rbml or hmpl`);
  }
  if (rb.logging === 'cm' && a.cm === undefined) throw new RollbackError('BAD_STATE', 'channel memories need every rank\'s home CM (§11.6)');
  const raw = await a.connectStore();
  const store = new ChainedStore(raw);
  try {
    const { channels, coordination } = makeChannels(a, raw, store);
    // Ranks whose holder ended normally (§11.3) take nothing more: nothing waits for them.
    rb.finished.forEach((done, r) => {
      if (done && r !== rb.rank) channels.onFinished(rb.ranks[r]!);
    });
    const layer = new CommLayer(channels);
    const world = layer.create(0, rb.ranks.map((_, r) => r));
    const runtime = new RollbackRuntime({
      channels, layer, world, store, state, intervalMs: rb.intervalMs, maxStateBytes: rb.maxStateBytes, now: a.now ?? (() => Date.now()),
      ...(a.marks === undefined ? {} : { marks: a.marks }), ...(a.onMark === undefined ? {} : { onCheckpoint: a.onMark }),
      ...(coordination === null ? {} : { group: { coordination, groups: rb.groups, marks: rb.marks } }),
    });
    a.bind?.(runtime);
    if (a.recovered) {
      const t0 = Date.now();
      await runtime.recover();
      const s = runtime.stats;
      // One line for the operator (the task's stderr) and the benches: what the replacement
      // restored, and how long the fetch, the restore and the re-execution of the replayed
      // part took (replay ends when the program has taken every replayed message).
      channels.whenCaughtUp(() => a.report?.({
        rank: rb.rank, restoredFrom: s.restoredFrom, refused: s.refused, replayed: s.replayed, fetchMs: s.fetchMs, restoreMs: s.restoreMs, replayMs: Date.now() - t0 - s.fetchMs - s.restoreMs,
      }));
    }
    if (coordination !== null && !a.recovered) await runtime.origin();
    else if ((a.marks ?? []).length === 0) a.onMark?.(runtime.mark());
    // The log's extent goes to the group as it grows (log-chain.ts), so a replacement can tell
    // a protector that dropped or rewrote entries.
    const extentTimer = setInterval(() => {
      const m = runtime.extentReport();
      if (m !== null) a.onMark?.(m);
    }, LOG_EXTENT_REPORT_MS);
    extentTimer.unref();
    return { channels, layer, world, runtime, store, extentTimer, fatal: a.onFatal, closed: false };
  } catch (e) {
    await store.close();
    throw e;
  }
}

/** The message layer the task's logging asks for, over the chained store (`raw` is what it
 *  wraps: under channel memories, the rank's connection to its home CM), and a bsco/sco task's
 *  group coordination (§11.7), which rides on the rank channels' frames. */
function makeChannels(a: OpenRollbackArgs, raw: RecoverableStore, store: ChainedStore): { channels: RollbackChannels; coordination: GroupCheckpoint | null } {
  const { rb } = a;
  if (rb.logging === 'cm') {
    if (!(raw instanceof CmClient) || a.cm === undefined) throw new RollbackError('BAD_STATE', 'channel memories: the store must be the rank\'s home CM (§11.6)');
    // The CM writes this rank's log; the rank chains it as the CM pushes it.
    const channels = new CmChannels({ rank: rb.rank, vpids: rb.ranks, homes: a.cm.homes, home: raw, connect: a.cm.connect, onFatal: a.onFatal, observe: (pos, blob) => store.observe(pos, blob) });
    return { channels, coordination: null };
  }
  const semi = rb.checkpoint === 'nco' ? null : rb.checkpoint;
  const channels = new RankChannels({
    p2p: a.p2p, rank: rb.rank, vpids: rb.ranks, store, onFatal: a.onFatal, logging: rb.logging === 'hmpl' ? 'hmpl' : 'rbml', ...(semi === null ? {} : { groups: rb.groups }),
  });
  const coordination = semi === null ? null : new GroupCheckpoint({ self: rb.rank, groups: rb.groups, mode: semi, send: (r, f) => channels.sendGroupFrame(r, f) });
  if (coordination !== null) {
    channels.group = {
      onFrame: (r, f) => coordination.onFrame(r, f),
      onHaveSent: (r, fresh) => {
        if (fresh) coordination.forget(r);
        coordination.announce(r);
      },
    };
  }
  return { channels, coordination };
}

/** MPI_Finalize in rollback mode: a barrier first, so no rank leaves while a replacement may
 *  still need to hear what it holds (its `have`), then the store. */
export async function closeRollback(p: RollbackParts): Promise<void> {
  await barrier(p.layer, p.world);
  // HMPL: nothing of ours may be left unlogged at a receiver, nor theirs at our protector.
  await p.channels.drained();
  await p.channels.logged();
  clearInterval(p.extentTimer);
  p.channels.close(new Error('finalized'));
  await p.store.close();
  p.closed = true;
  // For the benches and the campaign (TRINE_ROLLBACK_STATS=1 in the task's environment): the log
  // entries this rank appended, its checkpoints, and what its message layer counted.
  if (process.env.TRINE_ROLLBACK_STATS === '1') {
    const st = { rank: p.channels.self, appended: p.channels.st.logPos, checkpoints: p.runtime.stats.checkpoints, ...p.channels.counters };
    process.stderr.write(`trine: rollback stats ${JSON.stringify(st)}\n`);
  }
}

/** What a rollback task's membership signals do (§11.3): GSIG_NTF_DIED pauses the dead rank's
 *  channels until its replacement says what it holds; GSIG_NTF_FINISHED (its holder ended
 *  normally) ends every wait for that rank, its connection included. */
export function rollbackMembership(p: RollbackParts, p2p: P2P): { onDeath: (vpid: number) => void; onFinished: (vpid: number) => void } {
  return {
    onDeath: (vpid) => {
      p.channels.onDeath(vpid);
      p2p.removePeer(vpid);
    },
    onFinished: (vpid) => {
      p.channels.onFinished(vpid);
      if (!p.closed) p2p.removePeer(vpid);
    },
  };
}

/** Connect the mesh to the mapping's members; one that finishes meanwhile (GSIG_NTF_FINISHED
 *  removes it) is no error: a finished rank takes nothing more. */
export async function connectRanks(p2p: P2P, peers: readonly PeerAddress[]): Promise<void> {
  await Promise.all(peers.map((peer) => p2p.connect([peer]).catch((e: unknown) => {
    if (!(e instanceof P2PError && e.code === 'PEER_REMOVED')) throw e;
  })));
}
