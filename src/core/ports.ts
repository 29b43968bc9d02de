// The small interfaces the core, the node shell and the Agent's process driver are given
// (STYLE.md 3), declared here and nowhere else. Real implementations live in src/io/, simulated
// twins in src/sim/. The shared contract tests every implementation passes: Signer/Verifier
// (test/unit/io/signer-contract.ts), Spawner (test/unit/io/spawner-contract.ts), LinkAuth
// (test/unit/io/link-auth-contract.ts: the node:crypto link keys and the simulator's keyrings),
// Transport (test/unit/io/transport-contract.ts): the WebSocket transport and the simulated network.
//
// No Clock port: a core has no clock. It reads the time only from each input's `nowMs` and
// answers `nextWakeMs()`; the driver owns the clock (a timer in src/daemon/run-core.ts, the
// simulator's Scheduler): docs/ARCHITECTURE.md §2, "Time". Random: no core consumes it; the
// simulator's SeededRandom (src/sim/random.ts) is its one implementation, so it has no contract.
import type { FsmAgentProcEvent, KillProcessParams, SpawnProcessParams } from '../../fsm/fsm-agent-proc.ts';

export type ProcessId = string;

/** Carries the node shell's frames to a peer (src/io/ws-transport.ts; src/sim/network.ts). */
export interface Transport {
  /** Best effort: a frame sent while the link is down is lost; the protocol retransmits. */
  send(to: ProcessId, frame: Uint8Array): void;
}

/** Signs outgoing bytes as one process (docs/PROTOCOL.md §2.3). Synchronous: Ed25519 signing
 *  is ~40 µs with node:crypto, cheaper than an extra event-loop turn. */
export interface Signer {
  readonly id: ProcessId;
  sign(data: Uint8Array): Uint8Array;
}

/** Knows every public key of the cluster and checks signatures against them. */
export interface Verifier {
  has(id: ProcessId): boolean;
  verify(id: ProcessId, data: Uint8Array, signature: Uint8Array): boolean;
}

/** Authenticates one process's links (docs/PROTOCOL.md §2.4): a MAC under a key per direction
 *  that only the two ends can derive. Cheap, but it convinces only the receiver, so frames a
 *  third party must believe stay signed. */
export interface LinkAuth {
  readonly id: ProcessId;
  /** The tag of bytes this process sends to `to`; null if it has no key for `to`. */
  tag(to: ProcessId, data: Uint8Array): Uint8Array | null;
  /** Whether `from` has a link key with this process. */
  has(from: ProcessId): boolean;
  /** Whether `tag` is the tag of bytes `from` sent to this process. Never throws. */
  check(from: ProcessId, data: Uint8Array, tag: Uint8Array): boolean;
}

/** SHA-256 (state digests). A port so the core never imports node:crypto. */
export type Hash = (data: Uint8Array) => Uint8Array;

/** Deterministic random source, seeded in simulation. */
export interface Random {
  /** Uniform integer in [0, bound). */
  int(bound: number): number;
  /** Uniform float in [0, 1). */
  next(): number;
}

/** How to start one process: FsmAgentProc's `spawnProcess` params plus where its logs go. */
export type SpawnSpec = SpawnProcessParams & { logDir: string };

/** The events a Spawner reports: exactly those FsmAgentProc consumes from the OS. */
export type SpawnerEvent = Extract<FsmAgentProcEvent, { type: 'os.spawned' | 'os.forkFailed' | 'os.exited' }>;

export type KillSignal = KillProcessParams['signal'];

/** Starts and kills an Agent's task processes and reports what the OS says (src/io/spawner.ts;
 *  src/sim/sim-spawner.ts). It executes FsmAgentProc's `spawnProcess` / `killProcess` actions. */
export interface Spawner {
  /** Starts the process. Returns its pid when the OS gave one before returning (fork done;
   *  `os.spawned` or `os.forkFailed` still follows), so the caller can record it before anything
   *  else can happen to it; null otherwise. */
  spawnProcess(spec: SpawnSpec, on: (event: SpawnerEvent) => void): number | null;
  killProcess(pid: number, signal: KillSignal): void;
}
