// Shared fixtures of the wire tests: fixed keys for a small cluster, and a representative value
// of every payload and item type of src/core/wire/messages.ts. Not a test file itself.
import { createHash } from 'node:crypto';
import type { Signer, Verifier } from '../../../../src/core/ports.ts';
import { signCG } from '../../../../src/core/wire/frame.ts';
import type {
  AgentRequest, GroupBody, GroupCommand, GroupMsgCG, GroupMsgGC, HeartbeatInfo, Item, ItemWire, PtpPayload,
  PtpPayloadWire, SignedCG,
} from '../../../../src/core/wire/messages.ts';
import { publicKeyFromSeed } from '../../../../src/io/keys.ts';
import { createNodeSigner, createNodeVerifier } from '../../../../src/io/signer-node.ts';

export const CLUSTER = '0f1e2d3c4b5a69788796a5b4c3d2e1f0';
export const IDS = ['r1', 'r2', 'r3', 'a1', 'a2', 'scc', 'op'] as const;

export const seedOf = (id: string): Uint8Array =>
  new Uint8Array(createHash('sha256').update(`trine-wire-test:${id}`).digest());

const signerCache = new Map<string, Signer>();
/** A real node:crypto signer with a fixed seed (also for ids the verifier does not know). */
export function signerOf(id: string): Signer {
  let s = signerCache.get(id);
  if (s === undefined) {
    s = createNodeSigner(id, seedOf(id));
    signerCache.set(id, s);
  }
  return s;
}

export const verifier: Verifier = createNodeVerifier(new Map(IDS.map((id) => [id, publicKeyFromSeed(seedOf(id))] as const)));

const bytesOf = (n: number, salt = 0): Uint8Array => Uint8Array.from({ length: n }, (_, i) => (i * 131 + salt) & 0xff);

export const agentRequests: AgentRequest[] = [
  { type: 'node.join', slots: 8 },
  { type: 'echo', tag: 'ping-1', fanout: 'self', count: 1, data: bytesOf(0) },
  { type: 'echo', tag: 'ünïcödé ✓', fanout: 'all', count: 1000, data: bytesOf(300, 1) },
  { type: 'error.report', gssn: 2 ** 40, kind: 'replica-timeout', suspects: ['r2'] },
  { type: 'error.report', gssn: 0, kind: 'mismatch', suspects: [] },
];

export const groupCommands: GroupCommand[] = [
  { type: 'echo.reply', origin: 'a1', tag: 't', rsn: 17, index: 0, data: bytesOf(5, 2) },
  { type: 'echo.reply', origin: 'a2', tag: '', rsn: Number.MAX_SAFE_INTEGER, index: 999, data: bytesOf(0) },
];

export function cgOf(client: string, csn: number, payload: AgentRequest, inc = 1): GroupMsgCG {
  return { csn, gssnAck: csn * 3, payload, client, inc };
}

export const groupMsgsGC: GroupMsgGC[] = groupCommands.map((payload, i) => ({
  gssn: 100 + i, prevGssn: i === 0 ? 0 : 99, csnAck: 4 + i, destInc: 1_700_000_000_000 + i, payload, dest: i === 0 ? 'a1' : 'a2',
}));

export const heartbeatInfos: HeartbeatInfo[] = [
  { type: 'replica', role: 'primary', rsn: 12, gssn: 34, digest: bytesOf(32, 3) },
  { type: 'replica', role: 'backup', rsn: 0, gssn: 0, digest: new Uint8Array(32) },
  { type: 'agent', gssnDelivered: 9, csnSent: 2 ** 33 },
];

/** A CG signed by its client agent. */
export function signedCGOf(client: string, csn: number, payload: AgentRequest): SignedCG {
  return signCG(cgOf(client, csn, payload), signerOf(client));
}

export function ptpPayloads(): PtpPayload[] {
  return [
    { type: 'wrapper', rsn: 5, signed: signedCGOf('a1', 3, agentRequests[1] as AgentRequest) },
    { type: 'wrapper', rsn: 0, signed: signedCGOf('a2', 1, agentRequests[0] as AgentRequest) },
    { type: 'notice', text: 'operator note: draining node 3' },
    { type: 'notice', text: '' },
    { type: 'error.report', gssn: 7, kind: 'mismatch', suspects: ['r1', 'r3'] },
  ];
}

/** Every item type (and every body variant) that process `from` may send. A `grp` CG is always
 *  the sender's own (relays travel wrapped in `ptp`). */
export function itemsFrom(from: string): Item[] {
  const groupBodies: GroupBody[] = [
    { type: 'cg', signed: signedCGOf(from, 1, agentRequests[0] as AgentRequest) },
    { type: 'cg', signed: signedCGOf(from, 2, agentRequests[3] as AgentRequest) },
    ...groupMsgsGC.map((gc): GroupBody => ({ type: 'gc', gc })),
  ];
  return [
    { type: 'hello', inc: 1, echo: 0, established: false },
    { type: 'hello', inc: 1_700_000_000_000, echo: 1_700_000_000_001, established: true },
    { type: 'ptp', srcInc: 1, destInc: 2, seq: 10, ackSeq: 9, body: null },
    ...ptpPayloads().map((body, i): Item => ({ type: 'ptp', srcInc: 1, destInc: 2, seq: 11 + i, ackSeq: 9, body })),
    ...groupBodies.map((body, i): Item => ({ type: 'grp', srcInc: 3, destInc: 4, seq: 1 + i, body })),
    { type: 'gack', srcInc: 3, destInc: 4, ack: 77 },
    ...heartbeatInfos.map((info, i): Item => ({ type: 'hb', inc: 5, counter: i, info })),
    { type: 'probe', nonce: 0xdeadbeef },
    { type: 'probe.reply', nonce: 0xdeadbeef },
    { type: 'status.query', nonce: 1 },
    { type: 'status.reply', nonce: 1, json: JSON.stringify({ role: 'primary', rsn: 12, nodes: ['n1', 'n2'] }) },
  ];
}

/** The wire form of an item, as the frame codec sends it. */
export function toWire(item: Item): ItemWire {
  switch (item.type) {
    case 'grp':
      return item.body.type === 'cg'
        ? { ...item, body: { type: 'cg', bytes: item.body.signed.bytes, sig: item.body.signed.sig } }
        : { ...item, body: item.body };
    case 'ptp': {
      const b = item.body;
      const body: PtpPayloadWire | null =
        b === null || b.type !== 'wrapper' ? b : { type: 'wrapper', rsn: b.rsn, cgBytes: b.signed.bytes, cgSig: b.signed.sig };
      return { ...item, body };
    }
    default:
      return item;
  }
}

/** The same value with every plain object's keys in reverse insertion order. */
export function reverseKeys<T>(value: T): T {
  if (Array.isArray(value)) return value.map((v: unknown) => reverseKeys(v)) as T;
  if (value === null || typeof value !== 'object' || value instanceof Uint8Array) return value;
  return Object.fromEntries(Object.entries(value).reverse().map(([k, v]) => [k, reverseKeys(v)])) as T;
}
