// The contract between a protocol core and whatever drives it (docs/ARCHITECTURE.md §2).
// A core is deterministic: the same inputs in the same order give the same effects. The shell
// (src/core/shell.ts) turns bytes into inputs and effects into signed frames; the daemons and
// the simulator differ only in the transport and clock they hand the shell.
import type { Timing } from './constants.ts';
import type { ProcessId } from './ports.ts';
import type { DropCode } from '../base/result.ts';
import type { AddedReplica, AgentRequest, Frame, GroupCommand, GroupInput, Item, MovedPort } from './wire/messages.ts';
import type { MembershipChanges } from './task-journal.ts';

/** Who is in the cluster. Every process gets the same membership (cluster.json). */
export type Membership = {
  cluster: string;
  /** The three initial replica ids; the first is the initial primary (docs/PROTOCOL.md §5.1). */
  replicas: readonly ProcessId[];
  /** The node each initial replica runs on, in the order of `replicas`. */
  replicaNodes: readonly string[];
  /** Replica ids held in reserve for replacements, used in this order (PROTOCOL §10.6). */
  spareReplicas: readonly ProcessId[];
  /** The node a spare is bound to, where one is (a cluster of several hosts: the spare's key and
   *  listen address live on that node's host, so only its agent can start it; PROTOCOL §10.6).
   *  A spare without an entry may start on any node (a one-host `trine up` cluster). */
  spareNodes?: Readonly<Record<ProcessId, string>>;
  /** Agent ids, one per node, with the node each runs on. */
  agents: readonly { id: ProcessId; node: string }[];
  /** The watchdog's id. */
  scc: ProcessId;
  /** Operator identities allowed to query status. */
  operators: readonly ProcessId[];
  timing: Timing;
};

/** What every core takes (docs/ARCHITECTURE.md §2): the driver's wake-up, frames, the
 *  transport's hints and a plain lane-0 message to send. */
export type BaseInput =
  | { type: 'tick'; nowMs: number }
  /** A frame that decoded and verified; `raw`: its bytes, kept by a replica as evidence of what
   *  the sender signed (PROTOCOL §10.2 equivocation). */
  | { type: 'frame'; nowMs: number; frame: Frame; raw?: Uint8Array }
  /** A frame that did not: counted as evidence against its claimed sender (STYLE.md 6). */
  | { type: 'dropped'; nowMs: number; from: ProcessId | null; code: DropCode; detail: string }
  /** The transport to a peer came up or went down (a hint; the protocol does not rely on it). */
  | { type: 'transport.up'; nowMs: number; peer: ProcessId }
  | { type: 'transport.down'; nowMs: number; peer: ProcessId }
  /** Send a plain point-to-point message on lane 0 (spec §9.2 A15). */
  | { type: 'notice'; nowMs: number; to: ProcessId; text: string };

/** A replica takes the base inputs only. */
export type ReplicaInput = BaseInput;

/** The agent's: its requests to the group, and the group as the replicas' status showed it. */
export type AgentInput =
  | BaseInput
  /** Send a request to the manager group (spec §3.6 G6). */
  | { type: 'request'; nowMs: number; request: AgentRequest }
  /** The group as two replicas reported it alike in their status (PROTOCOL §10.7), which a new
   *  incarnation asks for while it runs; taken like a delivered `replicas` command. */
  | { type: 'group'; nowMs: number; view: number; primary: ProcessId; replicas: ProcessId[]; ports: MovedPort[]; added: AddedReplica[] };

/** The watchdog's: after a cluster reset, the task journals found on the nodes' disks, raw
 *  (src/core/task-journal.ts), each with where it was read from (PROTOCOL §10.9). */
export type WatchdogInput = BaseInput | { type: 'restore.load'; nowMs: number; journals: { source: string; data: Uint8Array }[] };

/** Any core's input: what a driver that serves every kind of core passes on. */
export type CoreInput = ReplicaInput | AgentInput | WatchdogInput;

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

/** A key learnt at run time (the `keys` effect); `replica`: a spare's node and where it listens. */
export type LearntKey = { id: ProcessId; publicKey: Uint8Array; replica?: { node: string; address: string; port: number } };

export type CoreEffect =
  | { type: 'send'; to: ProcessId; item: Item }
  /** Agent: a group command delivered on 2 matching copies, in order (spec §3.5 G3). */
  | { type: 'deliver.command'; gssn: number; command: GroupCommand }
  /** Replica: an agent request delivered in RSN order (spec §3.6 G9). */
  | { type: 'deliver.request'; rsn: number; client: ProcessId; inc: number; csn: number; request: AgentRequest }
  /** Replica: an input of the group's own executed in RSN order (PROTOCOL §8.3, §8.4). */
  | { type: 'deliver.input'; rsn: number; input: GroupInput }
  /** A plain point-to-point message arrived in order on lane 0. */
  | { type: 'deliver.notice'; from: ProcessId; text: string }
  /** Something suspects a replica: the trigger of self-diagnosis (spec §2.1, issue 5). */
  | { type: 'suspect'; target: ProcessId | null; reason: SuspectReason; detail: string }
  /** Agent: two matching copies have become impossible; the agent must stop (spec §3.5 G2 3e). */
  | { type: 'terminate'; reason: string }
  /** Watchdog: power-reset this node, as two replicas commanded (spec §1.6 rule 1). */
  | { type: 'reset.node'; node: string; rsn: number; address: string }
  /** Watchdog: power-reset every node of the cluster (spec §1.6 rules 2 and 3). */
  /** `journals`: the replicas' task journals the watchdog kept (PROTOCOL §10.9), for a cluster
   *  whose replicas' disks it cannot read; `membership`: what those journals say an operator
   *  changed (§10.12): the added nodes to power-cycle too, the removed ones to leave off. */
  | { type: 'reset.cluster'; reason: string; journals: { source: string; data: Uint8Array }[]; membership: MembershipChanges }
  /** Replica: write this task journal (src/core/task-journal.ts) to the node's disk, replacing
   *  the last; what a cluster reset restores (PROTOCOL §10.9). */
  | { type: 'persist.tasks'; journal: Uint8Array }
  /** Agent, replica: the replica group this process works with is now `replicas` (a new view,
   *  PROTOCOL §10). A driver keeps connections to them and dials the rest of the pool only on
   *  demand, so a retired replica is not dialed forever (PROTOCOL §10.6). `ports`: members
   *  listening on another port than cluster.json's, to dial there (§10.6). */
  | { type: 'replicas'; replicas: ProcessId[]; ports: MovedPort[] }
  /** Replica, agent: processes added at run time (PROTOCOL §10.12) and their Ed25519 keys: the
   *  driver verifies and authenticates their frames from now on. Only ever new ids. A replica
   *  (a spare of an added node) comes with where it listens, which the driver dials as it dials
   *  the spares of cluster.json. */
  | { type: 'keys'; keys: LearntKey[] }
  /** Replica, watchdog: the operator shut the cluster down and this process is done
   *  (PROTOCOL §10.11); the driver exits with EXIT_SHUTDOWN, which nothing restarts. */
  | { type: 'shutdown'; reason: string }
  | { type: 'log'; level: LogLevel; event: string; fields: Record<string, unknown> };

export type SuspectReason =
  | 'heartbeat.missed'
  | 'rsn.gap'
  | 'primary.progress'
  | 'error.report'
  | 'digest.mismatch'
  /** The primary orders task-clock ticks too fast (PROTOCOL §8.3). */
  | 'clock.rate';

/** A protocol core as the shell drives it. `step` owns and mutates the core's state; the core
 *  has no clock, no I/O and no randomness of its own (STYLE.md 1). */
export interface Core<I extends { type: string; nowMs: number } = CoreInput> {
  readonly id: ProcessId;
  /** Each core takes its own inputs (`I`): a driver that passes another core's has a wiring
   *  fault, which the core's exhaustive switch turns into an InvariantError. */
  step(input: I): CoreEffect[];
  /** The earliest time at which a `tick` has something to do, or null. */
  nextWakeMs(): number | null;
}
