// The wire's vocabulary (docs/PROTOCOL.md §2–§8): process, task and node ids, ports, what a
// replacement and a backup sign (portClaim, orderClaim), and the task and process records that
// requests and commands carry. Part of the schemas that messages.ts gathers.
import { MAX_ARG_CHARS, MAX_CLUSTER_ID_CHARS, MAX_ENV_ENTRIES, MAX_ID_CHARS, MAX_PATH_CHARS, MAX_TEXT_CHARS, TASK_KEY_BYTES } from '../constants.ts';
import type { ProcessId } from '../ports.ts';
import { err, ok } from '../../base/result.ts';
import { MAX_SIGNAL_ARG, MIN_SIGNAL_ARG } from '../signals.ts';
import { bytes, list, nullable, oneOf, struct, text, token, uint, type Schema } from './schema.ts';

export const processId = token(MAX_ID_CHARS, /^[a-z][a-z0-9-]*$/);
/** A TCP port a replica listens on; 0: the one cluster.json gives it. */
export const listenPort: Schema<number> = {
  enc: (v) => v,
  dec: (t, p) => (typeof t === 'number' && Number.isSafeInteger(t) && t >= 0 && t <= 65_535 ? ok(t) : err('WIRE_MALFORMED', `${p}: expected a port`)),
};
/** What a replacement signs of where it listens (PROTOCOL §10.6): its id, the view it joins,
 *  and its port (0: cluster.json's). */
export const portClaim = (id: ProcessId, view: number, port: number): unknown[] => ['replica.port', id, view, port];
/** What a backup signs with each order confirmation (PROTOCOL §5.8): in view `view`, the
 *  primary's order at `rsn` has digest `digest`. Evidence of a lie (§10.2 `order.lie`). */
export const orderClaim = (id: ProcessId, view: number, rsn: number, digest: Uint8Array): unknown[] => ['order.claim', id, view, rsn, digest];

/** A replica listening on another port than cluster.json's (PROTOCOL §10.6). */
export type MovedPort = { id: ProcessId; port: number };
export const movedPort: Schema<MovedPort> = struct<MovedPort>(['id', 'port'], { id: processId, port: listenPort });
/** A TCP port something listens on: 1 to 65535. */
export const tcpPort: Schema<number> = {
  enc: (v) => v,
  dec: (t, p) => (typeof t === 'number' && Number.isSafeInteger(t) && t >= 1 && t <= 65_535 ? ok(t) : err('WIRE_MALFORMED', `${p}: expected a port`)),
};
export const clusterId = token(MAX_CLUSTER_ID_CHARS, /^[a-z0-9-]+$/);
export const reason = text(MAX_TEXT_CHARS);

// ---- Tasks and processes (PROTOCOL §8) ---------------------------------------------------------

/** Task ids are assigned by the group in order: t1, t2, … (PROTOCOL §8.2). */
export const taskId = token(MAX_ID_CHARS, /^t[1-9][0-9]*$/);
/** An operator request's nonce: 32 hex digits the operator draws at random (PROTOCOL §8.1). */
export const nonce = token(32, /^[0-9a-f]{32}$/);
export const nodeName = token(MAX_ID_CHARS, /^[a-z0-9][a-z0-9-]*$/);
/** A host's network address as the hosts file gives it: an IPv4 or IPv6 address or a DNS name. */
export const hostAddress = token(64, /^[A-Za-z0-9][A-Za-z0-9.:-]*$/);
export const arg = text(MAX_ARG_CHARS);
export const path = text(MAX_PATH_CHARS);
/** Environment entries, sorted by name and unique (canonical; checked by the group on submit). */
export type EnvEntry = [string, string];
const envEntry: Schema<EnvEntry> = {
  enc: (v) => [v[0], v[1]],
  dec: (t, p) => {
    if (!Array.isArray(t) || t.length !== 2) return err('WIRE_MALFORMED', `${p}: expected [name, value]`);
    const k = token(MAX_ARG_CHARS, /^[A-Za-z_][A-Za-z0-9_]*$/).dec(t[0], `${p}[0]`);
    if (!k.ok) return k;
    const v = arg.dec(t[1], `${p}[1]`);
    if (!v.ok) return v;
    return ok([k.value, v.value]);
  },
};
export const env = list(envEntry, MAX_ENV_ENTRIES);
/** A task's G-MPI key (PROTOCOL §9.5): exactly TASK_KEY_BYTES. */
export const taskKey = bytes(TASK_KEY_BYTES, TASK_KEY_BYTES);
export type Endpoint = { vpid: number; node: string };
export const endpoint: Schema<Endpoint> = struct<Endpoint>(['vpid', 'node'], { vpid: uint, node: nodeName });
/** "host:port" of a linked process's G-MPI listener, as it told its agent; empty for none. */
export const MAX_ENDPOINT_CHARS = 64;
export const endpointText = text(MAX_ENDPOINT_CHARS);
/** A member of a task in the mapping message (spec §7 item 2): VPID, node and endpoint. */
export type Member = { vpid: number; node: string; endpoint: string };
export const member: Schema<Member> = struct<Member>(['vpid', 'node', 'endpoint'], { vpid: uint, node: nodeName, endpoint: endpointText });

/** A signal address or number on the wire: u32 (signals.ts GSIG_CM, GSIG_BROADCAST). */
export const u32: Schema<number> = {
  enc: (v) => v,
  dec: (t, p) =>
    typeof t === 'number' && Number.isInteger(t) && t >= 0 && t <= 0xffffffff ? ok(t) : err('WIRE_MALFORMED', `${p}: expected u32`),
};
/** A signal argument: a C int in the source (spec §4.1), signed 32-bit. */
export const int32: Schema<number> = {
  enc: (v) => v,
  dec: (t, p) =>
    typeof t === 'number' && Number.isInteger(t) && t >= MIN_SIGNAL_ARG && t <= MAX_SIGNAL_ARG ? ok(t) : err('WIRE_MALFORMED', `${p}: expected int32`),
};

/** How a process talks to its agent: `plain` executables never connect, so the agent takes a
 *  successful exec as the connect and exit code 0 as the clean disconnect (PROTOCOL §8.5);
 *  `linked` processes use the application library (issue 4). */
export type ProcMode = 'plain' | 'linked';

/** What FsmAgentProc reports to FsmProc (spec §6.2 inputs), as an agent request. `pid` is 0,
 *  `exitCode` and `signal` null when they do not apply. */
export type ProcReportKind = 'spawnSucceeded' | 'spawnFailed' | 'terminatedNormally' | 'terminatedAbnormally';
export type ProcReport = {
  task: string;
  vpid: number;
  kind: ProcReportKind;
  pid: number;
  exitCode: number | null;
  signal: string | null;
  reason: string;
  /** spawnSucceeded of a linked process: its G-MPI endpoint ("host:port"); else empty. */
  endpoint: string;
};
export const procReport: Schema<ProcReport> = struct<ProcReport>(['task', 'vpid', 'kind', 'pid', 'exitCode', 'signal', 'reason', 'endpoint'], {
  task: taskId,
  vpid: uint,
  kind: oneOf(['spawnSucceeded', 'spawnFailed', 'terminatedNormally', 'terminatedAbnormally'] as const),
  pid: uint,
  exitCode: nullable(uint),
  signal: nullable(token(16, /^SIG[A-Z0-9]+$/)),
  reason: text(MAX_TEXT_CHARS),
  endpoint: endpointText,
});
