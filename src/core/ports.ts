// The small interfaces the core and the node shell are given (STYLE.md 3). Real
// implementations live in src/io/, simulated twins in src/sim/; each passes one contract test.

export type ProcessId = string;

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

/** SHA-256 (state digests). A port so the core never imports node:crypto. */
export type Hash = (data: Uint8Array) => Uint8Array;

/** Deterministic random source, seeded in simulation. */
export interface Random {
  /** Uniform integer in [0, bound). */
  int(bound: number): number;
  /** Uniform float in [0, 1). */
  next(): number;
}
