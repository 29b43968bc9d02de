// What a replica reports to an operator's status query (docs/PROTOCOL.md §7). The JSON form of
// `trine status --json` is built from these (docs/OPERATIONS.md documents it field by field).
import type { ProcessId } from './ports.ts';
import type { Role } from './wire/messages.ts';

export type PeerHealth = 'healthy' | 'late' | 'silent' | 'unknown';

export type ReplicaStatus = {
  id: ProcessId;
  role: Role;
  /** The replica's incarnation (start time in ms); changes when it restarts. */
  inc: number;
  /** Replicated state: last RSN processed, last GSSN used, primary, and SHA-256 digest (hex). */
  rsn: number;
  gssn: number;
  primary: ProcessId;
  digest: string;
  /** Other replicas as this one sees them. */
  replicas: { id: ProcessId; connected: boolean; lastHeartbeatAgeMs: number | null; health: PeerHealth }[];
  /** Agents as this one sees them. Only backups receive agent heartbeats (spec §1.3). */
  agents: {
    id: ProcessId;
    node: string;
    connected: boolean;
    joined: boolean;
    lastHeartbeatAgeMs: number | null;
    health: PeerHealth;
  }[];
  /** Self-diagnosis triggers raised so far (issue 5 acts on them). */
  suspicions: number;
  /** Inbound frames dropped, by reason. */
  drops: Record<string, number>;
};
