// The schema combinators of src/core/wire/schema.ts and the message schemas of messages.ts:
// total decoding with the right drop codes, round trips of every payload type, and the
// canonical encoding that replicas rely on for equal bytes — written by pack(), and the only
// encoding unpack() accepts (docs/PROTOCOL.md §2, DESIGN.md §3).
import { describe, expect, it } from 'vitest';
import {
  LOGS_CHUNK_BYTES, MAX_FRAME_BYTES, MAX_ID_CHARS, MAX_ITEMS_PER_FRAME, MAX_PAYLOAD_BYTES, MAX_TASK_PROCS, MAX_TEXT_CHARS, SIGNATURE_BYTES,
} from '../../../../src/core/constants.ts';
import type { Result } from '../../../../src/base/result.ts';
import { decodeFrame, encodeFrame, pack, unpack } from '../../../../src/core/wire/frame.ts';
import { agentToProc, type AgentToProc } from '../../../../src/core/wire/app-wire.ts';
import {
  agentRequest, frameBody, groupBodyWire, groupCommand, groupMsgCG, groupMsgGC, heartbeatInfo, itemWire, processId,
  ptpPayloadWire, type AgentRequest, type FrameBody, type GroupCommand, type ItemWire,
} from '../../../../src/core/wire/messages.ts';
import {
  bool, bytes, list, nullable, oneOf, struct, text, token, uint, union, type Schema,
} from '../../../../src/core/wire/schema.ts';
import {
  agentRequests, canonicalChoice, cgOf, CLUSTER, encodeLoose, groupCommands, groupMsgsGC, heartbeatInfos, itemsFrom, linkAuthOf,
  logsItems, ptpPayloads, reverseKeys, signerOf, toWire, verifier,
} from './wire-samples.ts';

const code = (r: Result<unknown>): string => (r.ok ? 'ok' : r.code);
const detail = (r: Result<unknown>): string => (r.ok ? '' : r.detail);
const value = <T>(r: Result<T>): T => {
  if (!r.ok) throw new Error(`expected ok, got ${r.code}: ${r.detail}`);
  return r.value;
};

/** Through the real wire: encode, pack, unpack, decode. */
function roundTrip<T>(schema: Schema<T>, v: T): T {
  const tree = value(unpack(pack(schema.enc(v))));
  return value(schema.dec(tree, 'x'));
}

/** Plain copies of byte arrays (the decoder hands back views of its input) so deep equality
 *  compares bytes. */
function normal(v: unknown): unknown {
  if (v instanceof Uint8Array) return { bytes: Buffer.from(v).toString('hex') };
  if (Array.isArray(v)) return v.map(normal);
  if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, normal(x)]));
  return v;
}

function expectRoundTrips<T>(schema: Schema<T>, samples: readonly T[]): void {
  expect(samples.length).toBeGreaterThan(0);
  for (const s of samples) expect(normal(roundTrip(schema, s))).toEqual(normal(s));
}

/** True when a tree holds only arrays and scalars: no msgpack maps, whose key order could vary. */
function isMapFree(tree: unknown): boolean {
  if (Array.isArray(tree)) return tree.every(isMapFree);
  if (tree instanceof Uint8Array) return true;
  return tree === null || typeof tree !== 'object';
}

describe('schema combinators', () => {
  it('uint accepts non-negative safe integers only', () => {
    for (const v of [0, 1, 2 ** 32, Number.MAX_SAFE_INTEGER]) expect(value(uint.dec(v, 'n'))).toBe(v);
    for (const v of [-1, 1.5, Number.NaN, Infinity, -Infinity, 2 ** 53, '1', null, undefined, true, 1n, [1], new Uint8Array(1)]) {
      const r = uint.dec(v, 'a.b');
      expect(code(r)).toBe('WIRE_MALFORMED');
      expect(detail(r)).toContain('a.b');
    }
  });

  it('bool accepts booleans only', () => {
    expect(value(bool.dec(true, 'b'))).toBe(true);
    expect(value(bool.dec(false, 'b'))).toBe(false);
    for (const v of [0, 1, 'true', null]) expect(code(bool.dec(v, 'b'))).toBe('WIRE_MALFORMED');
  });

  it('text checks type, then its length limit (WIRE_LIMIT)', () => {
    const t = text(5);
    expect(value(t.dec('abcde', 's'))).toBe('abcde');
    expect(value(t.dec('', 's'))).toBe('');
    expect(code(t.dec('abcdef', 's'))).toBe('WIRE_LIMIT');
    expect(code(t.dec(5, 's'))).toBe('WIRE_MALFORMED');
    expect(code(t.dec(new Uint8Array(2), 's'))).toBe('WIRE_MALFORMED');
  });

  it('token checks its limit and its pattern', () => {
    const t = token(4, /^[a-z]+$/);
    expect(value(t.dec('ab', 't'))).toBe('ab');
    expect(code(t.dec('aB', 't'))).toBe('WIRE_MALFORMED');
    expect(code(t.dec('', 't'))).toBe('WIRE_MALFORMED');
    expect(code(t.dec('abcde', 't'))).toBe('WIRE_LIMIT');
    expect(code(t.dec(null, 't'))).toBe('WIRE_MALFORMED');
  });

  it('oneOf encodes the index and decodes only valid indexes', () => {
    const e = oneOf(['x', 'y', 'z'] as const);
    expect(e.enc('y')).toBe(1);
    expect(value(e.dec(2, 'e'))).toBe('z');
    for (const v of [3, -1, 1.5, '1', 'y', null, Number.NaN]) expect(code(e.dec(v, 'e'))).toBe('WIRE_MALFORMED');
  });

  it('bytes checks limit and exact size, and copies out of the receive buffer', () => {
    const b = bytes(4);
    const buffer = Uint8Array.of(1, 2, 3, 4, 5, 6);
    const view = buffer.subarray(1, 4);
    const got = value(b.dec(view, 'b'));
    buffer.fill(0);
    expect([...got]).toEqual([2, 3, 4]);
    expect(got.buffer).not.toBe(buffer.buffer);
    expect(code(b.dec(new Uint8Array(5), 'b'))).toBe('WIRE_LIMIT');
    expect(code(bytes(32, 32).dec(new Uint8Array(31), 'd'))).toBe('WIRE_MALFORMED');
    expect(code(bytes(32, 32).dec(new Uint8Array(32), 'd'))).toBe('ok');
    for (const v of ['abcd', [1, 2], null, new Uint16Array(2), new ArrayBuffer(2)]) expect(code(b.dec(v, 'b'))).toBe('WIRE_MALFORMED');
  });

  it('nullable maps nil to null and defers everything else', () => {
    const n = nullable(uint);
    expect(n.enc(null)).toBe(null);
    expect(value(n.dec(null, 'n'))).toBe(null);
    expect(value(n.dec(undefined, 'n'))).toBe(null);
    expect(value(n.dec(3, 'n'))).toBe(3);
    expect(code(n.dec('3', 'n'))).toBe('WIRE_MALFORMED');
  });

  it('list checks its limit before decoding entries, and names the failing index', () => {
    const l = list(uint, 3);
    expect(value(l.dec([], 'l'))).toEqual([]);
    expect(value(l.dec([1, 2, 3], 'l'))).toEqual([1, 2, 3]);
    expect(code(l.dec([1, 2, 3, 4], 'l'))).toBe('WIRE_LIMIT');
    expect(code(l.dec(['bad', 1, 2, 3], 'l'))).toBe('WIRE_LIMIT');
    const r = l.dec([1, -1], 'l');
    expect(code(r)).toBe('WIRE_MALFORMED');
    expect(detail(r)).toContain('l[1]');
    expect(code(l.dec({ length: 1, 0: 1 }, 'l'))).toBe('WIRE_MALFORMED');
  });

  it('struct encodes in its fixed field order and checks arity and every field', () => {
    type P = { a: number; b: string };
    const s = struct<P>(['a', 'b'], { a: uint, b: text(10) });
    expect(s.enc({ b: 'x', a: 1 })).toEqual([1, 'x']);
    expect(s.enc({ a: 1, b: 'x', extra: true } as P)).toEqual([1, 'x']);
    expect(value(s.dec([1, 'x'], 'p'))).toEqual({ a: 1, b: 'x' });
    expect(code(s.dec([1], 'p'))).toBe('WIRE_MALFORMED');
    expect(code(s.dec([1, 'x', 2], 'p'))).toBe('WIRE_MALFORMED');
    expect(code(s.dec({ a: 1, b: 'x' }, 'p'))).toBe('WIRE_MALFORMED');
    const r = s.dec([1, 2], 'p');
    expect(code(r)).toBe('WIRE_MALFORMED');
    expect(detail(r)).toContain('p.b');
  });

  it('union encodes [code, ...fields] and tells an unknown code (WIRE_UNKNOWN_TYPE) from garbage', () => {
    type U = { type: 'one'; n: number } | { type: 'two' };
    const u = union<U>({ one: { code: 1, order: ['n'], fields: { n: uint } }, two: { code: 7, order: [], fields: {} } });
    expect(u.enc({ type: 'one', n: 4 })).toEqual([1, 4]);
    expect(u.enc({ type: 'two' })).toEqual([7]);
    expect(value(u.dec([1, 4], 'u'))).toEqual({ type: 'one', n: 4 });
    expect(value(u.dec([7], 'u'))).toEqual({ type: 'two' });
    expect(code(u.dec([2, 4], 'u'))).toBe('WIRE_UNKNOWN_TYPE');
    expect(code(u.dec([], 'u'))).toBe('WIRE_MALFORMED');
    expect(code(u.dec(['1', 4], 'u'))).toBe('WIRE_MALFORMED');
    expect(code(u.dec([1], 'u'))).toBe('WIRE_MALFORMED');
    expect(code(u.dec([1, 4, 5], 'u'))).toBe('WIRE_MALFORMED');
    expect(code(u.dec(1, 'u'))).toBe('WIRE_MALFORMED');
    expect(code(u.dec(null, 'u'))).toBe('WIRE_MALFORMED');
  });

  it('union refuses duplicate codes when declared, and an unknown type when encoding (our bugs)', () => {
    type U = { type: 'a' } | { type: 'b' };
    expect(() => union<U>({ a: { code: 1, order: [], fields: {} }, b: { code: 1, order: [], fields: {} } })).toThrow(/duplicate/);
    const u = union<U>({ a: { code: 1, order: [], fields: {} }, b: { code: 2, order: [], fields: {} } });
    expect(() => u.enc({ type: 'c' } as unknown as U)).toThrow(/no codec/);
  });
});

describe('message schemas', () => {
  const cgs = agentRequests.map((p, i) => cgOf(i % 2 === 0 ? 'a1' : 'a2', i + 1, p));
  const ptpWire = ptpPayloads().map((p) => {
    const item = toWire({ type: 'ptp', srcInc: 0, destInc: 0, seq: 0, ackSeq: 0, body: p });
    if (item.type !== 'ptp' || item.body === null) throw new Error('sample');
    return item.body;
  });
  const items: ItemWire[] = itemsFrom('a1').map(toWire);
  const body: FrameBody = { cluster: CLUSTER, to: 'r1', items };
  const groupBodies = items.flatMap((i) => (i.type === 'grp' ? [i.body] : []));

  it('the samples cover every variant of every union', () => {
    expect(new Set(agentRequests.map((r) => r.type))).toEqual(new Set(['node.join', 'echo', 'error.report']));
    expect(new Set(groupCommands.map((r) => r.type))).toEqual(new Set(['echo.reply']));
    expect(new Set(ptpWire.map((r) => r.type))).toEqual(new Set(['wrapper', 'notice', 'error.report']));
    expect(new Set(heartbeatInfos.map((r) => r.type))).toEqual(new Set(['replica', 'agent']));
    expect(new Set(groupBodies.map((r) => r.type))).toEqual(new Set(['cg', 'gc']));
    expect(new Set(items.map((r) => r.type))).toEqual(
      new Set(['hello', 'ptp', 'grp', 'gack', 'hb', 'probe', 'probe.reply', 'challenge.ask', 'challenge', 'status.query', 'status.reply', 'bind.proof', 'logs.read', 'logs.data']),
    );
  });

  it('round-trips every agent request, group command, CG and GC', () => {
    expectRoundTrips(agentRequest, agentRequests);
    expectRoundTrips(groupCommand, groupCommands);
    expectRoundTrips(groupMsgCG, cgs);
    expectRoundTrips(groupMsgGC, groupMsgsGC);
  });

  it('round-trips every point-to-point payload, heartbeat and lane-1 body', () => {
    expectRoundTrips(ptpPayloadWire, ptpWire);
    expectRoundTrips(heartbeatInfo, heartbeatInfos);
    expectRoundTrips(groupBodyWire, groupBodies);
  });

  it('round-trips every item type and a whole frame body', () => {
    expectRoundTrips(itemWire, items);
    expectRoundTrips(frameBody, [body]);
    expectRoundTrips(processId, ['r1', 'scc', 'a-12', 'x'.repeat(MAX_ID_CHARS)]);
  });

  it('encodes the same content to the same bytes whatever the key insertion order', () => {
    const check = <T>(schema: Schema<T>, samples: readonly T[]): void => {
      for (const s of samples) {
        const reversed = reverseKeys(s);
        expect(Object.keys(reversed as object)).not.toEqual(Object.keys(s as object));
        expect(Buffer.from(pack(schema.enc(reversed))).equals(Buffer.from(pack(schema.enc(s))))).toBe(true);
      }
    };
    check(agentRequest, agentRequests);
    check(groupMsgCG, cgs);
    check(groupMsgGC, groupMsgsGC);
    check(heartbeatInfo, heartbeatInfos);
    check(itemWire, items);
    check(frameBody, [body]);
  });

  it('encodes without maps, and packing is independent of what was packed before', () => {
    expect(isMapFree(frameBody.enc(body))).toBe(true);
    const first = pack(frameBody.enc(body));
    for (const s of items) pack(itemWire.enc(s));
    pack({ some: 'map', with: ['keys'] });
    expect(Buffer.from(pack(frameBody.enc(body))).equals(Buffer.from(first))).toBe(true);
  });

  it('decoding ignores no field: a changed field changes the decoded value', () => {
    const tree = frameBody.enc(body) as unknown[];
    const decoded = value(frameBody.dec(value(unpack(pack(tree))), 'f'));
    const other = value(frameBody.dec(value(unpack(pack([tree[0], 'r2', tree[2]]))), 'f'));
    expect(decoded.to).toBe('r1');
    expect(other.to).toBe('r2');
  });

  it('enforces the named limits of messages.ts', () => {
    const rt = <T>(schema: Schema<T>, v: T): string => code(schema.dec(value(unpack(pack(schema.enc(v)))), 'x'));
    expect(rt(agentRequest, { type: 'error.report', gssn: 1, count: 1, kind: 'mismatch', suspects: ['r1', 'r2', 'r3', 'r1'] })).toBe('WIRE_LIMIT');
    expect(rt(agentRequest, { type: 'echo', tag: 'x'.repeat(MAX_TEXT_CHARS + 1), fanout: 'all', count: 1, data: new Uint8Array(0) })).toBe('WIRE_LIMIT');
    expect(rt(agentRequest, { type: 'echo', tag: 'x'.repeat(MAX_TEXT_CHARS), fanout: 'all', count: 1, data: new Uint8Array(0) })).toBe('ok');
    expect(rt(agentRequest, { type: 'echo', tag: 't', fanout: 'all', count: 1, data: new Uint8Array(MAX_PAYLOAD_BYTES + 1) })).toBe('WIRE_LIMIT');
    expect(rt(agentRequest, { type: 'echo', tag: 't', fanout: 'all', count: 1, data: new Uint8Array(MAX_PAYLOAD_BYTES) })).toBe('ok');
    expect(rt(processId, 'x'.repeat(MAX_ID_CHARS + 1))).toBe('WIRE_LIMIT');
    for (const bad of ['R1', '1r', '-r', 'r_1', 'r 1', '', 'r1\n']) expect(rt(processId, bad)).toBe('WIRE_MALFORMED');
    expect(rt(heartbeatInfo, { type: 'replica', role: 'primary', rsn: 1, gssn: 1, digest: new Uint8Array(31), view: 0, ckptRsn: 0, ckptDigest: new Uint8Array(32) })).toBe('WIRE_MALFORMED');
    expect(rt(groupBodyWire, { type: 'cg', bytes: new Uint8Array(3), sig: new Uint8Array(SIGNATURE_BYTES - 1) })).toBe('WIRE_MALFORMED');
    expect(rt(groupBodyWire, { type: 'cg', bytes: new Uint8Array(3), sig: new Uint8Array(SIGNATURE_BYTES + 1) })).toBe('WIRE_LIMIT');
    const many: ItemWire[] = Array.from({ length: MAX_ITEMS_PER_FRAME + 1 }, (_, i) => ({ type: 'probe', nonce: i }));
    expect(rt(frameBody, { ...body, items: many })).toBe('WIRE_LIMIT');
    expect(rt(frameBody, { ...body, items: many.slice(1) })).toBe('ok');
    expect(rt(frameBody, { ...body, cluster: 'Upper' })).toBe('WIRE_MALFORMED');
  });

  it('encodes a CG as [csn, gssnAck, payload, client, inc] and a GC with destInc before its payload (PROTOCOL §5.7)', () => {
    const cg = cgOf('a2', 5, { type: 'node.join', slots: 2, resync: false }, 1_700_000_000_042);
    expect(groupMsgCG.enc(cg)).toEqual([5, 15, [1, 2, false], 'a2', 1_700_000_000_042]);
    const gc = groupMsgsGC[0] as (typeof groupMsgsGC)[number];
    const gcTree = groupMsgGC.enc(gc) as unknown[];
    expect(gcTree.slice(0, 4)).toEqual([gc.gssn, gc.prevGssn, gc.csnAck, gc.destInc]);
    expect(gcTree[5]).toBe(gc.dest);
    // the layouts without the incarnations are refused, not misread
    const oldCg = (groupMsgCG.enc(cg) as unknown[]).slice(0, 4);
    expect(code(groupMsgCG.dec(value(unpack(pack(oldCg))), 'cg'))).toBe('WIRE_MALFORMED');
    const oldGc = [gcTree[0], gcTree[1], gcTree[2], gcTree[4], gcTree[5]];
    expect(code(groupMsgGC.dec(value(unpack(pack(oldGc))), 'gc'))).toBe('WIRE_MALFORMED');
  });
});

describe('the task key: task.submit, proc.spawn and the socket\'s welcome (PROTOCOL §9.5)', () => {
  const key = Uint8Array.from({ length: 32 }, (_, i) => i);
  const submit: AgentRequest = {
    type: 'task.submit', nonce: 'ab'.repeat(16), name: 'job', size: 4, file: '/bin/app', args: ['-n'], cwd: '/srv', env: [['A', '1']],
    mode: 'linked', recovery: { kind: 'app' }, dgrp: null, straggler: null, maxSpawns: 32, taskKey: key,
  };
  const spawn: GroupCommand = {
    type: 'proc.spawn', task: 't3', vpid: 2, mode: 'linked', file: '/bin/app', args: [], cwd: '/srv', env: [], size: 4, rank: 2, restarted: false,
    endpoints: [{ vpid: 0, node: 'n1' }], taskKey: key,
  };
  const welcome: AgentToProc = { type: 'welcome', taskKey: key };
  /** The encoded tree with its last field (the key) replaced. */
  const withKey = (tree: unknown, k: unknown): unknown => [...(tree as unknown[]).slice(0, -1), k];

  it('round-trips, the key last in each field order', () => {
    expectRoundTrips(agentRequest, [submit]);
    expectRoundTrips(groupCommand, [spawn]);
    expectRoundTrips(agentToProc, [welcome]);
    for (const tree of [agentRequest.enc(submit), groupCommand.enc(spawn), agentToProc.enc(welcome)]) expect((tree as unknown[]).at(-1)).toBe(key);
  });

  it('a key of any other size, or none, never decodes', () => {
    const cases: [Schema<unknown>, unknown][] = [
      [agentRequest as Schema<unknown>, agentRequest.enc(submit)], [groupCommand as Schema<unknown>, groupCommand.enc(spawn)],
      [agentToProc as Schema<unknown>, agentToProc.enc(welcome)],
    ];
    for (const [schema, tree] of cases) {
      for (const bad of [new Uint8Array(31), new Uint8Array(33), new Uint8Array(0), 'k'.repeat(32), null]) {
        expect(code(schema.dec(withKey(tree, bad), 'x'))).not.toBe('ok');
      }
      expect(code(schema.dec((tree as unknown[]).slice(0, -1), 'x'))).not.toBe('ok');
    }
  });
});

describe('reads of task output: logs.read and logs.data (PROTOCOL §7.1)', () => {
  type Read = Extract<ItemWire, { type: 'logs.read' }>;
  type Data = Extract<ItemWire, { type: 'logs.data' }>;
  const read: Read = { type: 'logs.read', nonce: 3, task: 't12', vpid: 5, stream: 'out', offset: 4096, maxBytes: 1024, challenge: { inc: 7, serial: 8, atMs: 9 } };
  const data: Data = { type: 'logs.data', nonce: 3, ok: true, error: '', offset: 4096, bytes: new Uint8Array(10), size: 5000, missing: false };
  const rt = (v: ItemWire): Result<ItemWire> => itemWire.dec(value(unpack(pack(itemWire.enc(v)))), 'x');

  it('round-trip through the real wire, at their limits too', () => {
    expectRoundTrips(itemWire, logsItems.map(toWire));
    expectRoundTrips(itemWire, [
      read, { ...read, stream: 'err', vpid: MAX_TASK_PROCS - 1, maxBytes: LOGS_CHUNK_BYTES, offset: Number.MAX_SAFE_INTEGER },
      data, { ...data, bytes: new Uint8Array(LOGS_CHUNK_BYTES).fill(0x0a), error: 'x'.repeat(MAX_TEXT_CHARS) },
      { ...data, ok: false, error: 'cannot read tasks/t12/5.out: EIO', bytes: new Uint8Array(0), size: 0 },
    ]);
  });

  it('encode as [code, ...fields] in their fixed order', () => {
    expect(itemWire.enc(read)).toEqual([16, 3, 't12', 5, 0, 4096, 1024, [7, 8, 9]]);
    expect(itemWire.enc({ ...read, stream: 'err' })).toEqual([16, 3, 't12', 5, 1, 4096, 1024, [7, 8, 9]]);
    expect(itemWire.enc(data)).toEqual([17, 3, true, '', 4096, data.bytes, 5000, false]);
  });

  it('a task id or VPID that could name a path outside logs/tasks/ never decodes (WIRE_MALFORMED)', () => {
    for (const task of ['../../keys', '..', 't1/../../keys', '/etc/passwd', 't1/', 't0', 'T1', 't01', 't1\0', 't1 ', '', 'keys/op.json']) {
      expect(code(rt({ ...read, task })), task).toBe('WIRE_MALFORMED');
    }
    for (const vpid of [-1, 1.5, Number.NaN, Infinity]) expect(code(rt({ ...read, vpid })), String(vpid)).toBe('WIRE_MALFORMED');
    expect(code(rt({ ...read, task: 't'.repeat(MAX_ID_CHARS + 1) }))).toBe('WIRE_LIMIT');
    // Trees a peer could send that no encoder of ours writes.
    const tree = itemWire.enc(read) as unknown[];
    for (const [i, bad] of [[2, 7], [2, null], [3, '5'], [3, [5]], [4, 2], [4, 'out'], [5, -1], [6, true]] as const) {
      const t = [...tree];
      t[i] = bad;
      expect(code(itemWire.dec(t, 'x')), `field ${i} = ${JSON.stringify(bad)}`).toBe('WIRE_MALFORMED');
    }
    expect(code(itemWire.dec(tree.slice(0, 6), 'x'))).toBe('WIRE_MALFORMED');
    expect(code(itemWire.dec([...tree, 0], 'x'))).toBe('WIRE_MALFORMED');
  });

  it('enforce their named limits: VPID below MAX_TASK_PROCS, at most LOGS_CHUNK_BYTES asked or carried, text', () => {
    expect(code(rt({ ...read, vpid: MAX_TASK_PROCS }))).toBe('WIRE_LIMIT');
    expect(code(rt({ ...read, maxBytes: LOGS_CHUNK_BYTES + 1 }))).toBe('WIRE_LIMIT');
    expect(code(rt({ ...data, bytes: new Uint8Array(LOGS_CHUNK_BYTES + 1) }))).toBe('WIRE_LIMIT');
    expect(code(rt({ ...data, error: 'x'.repeat(MAX_TEXT_CHARS + 1) }))).toBe('WIRE_LIMIT');
    const tree = itemWire.enc(data) as unknown[];
    for (const [i, bad] of [[2, 1], [3, 7], [4, -1], [5, 'bytes'], [5, [1, 2]], [6, 1.5], [7, null]] as const) {
      const t = [...tree];
      t[i] = bad;
      expect(code(itemWire.dec(t, 'x')), `field ${i} = ${JSON.stringify(bad)}`).toBe('WIRE_MALFORMED');
    }
  });

  it('a full reply fits in one frame, signed or MAC\'d', () => {
    const full: Data = { ...data, bytes: new Uint8Array(LOGS_CHUNK_BYTES).fill(0xff), error: 'x'.repeat(MAX_TEXT_CHARS) };
    for (const linkAuth of [undefined, linkAuthOf('a1')]) {
      const frame = encodeFrame({ from: 'a1', to: 'op', items: [full] }, { cluster: CLUSTER, signer: signerOf('a1'), ...(linkAuth === undefined ? {} : { linkAuth }) });
      expect(frame.length).toBeLessThan(MAX_FRAME_BYTES);
      const r = decodeFrame(frame, { cluster: CLUSTER, self: 'op', verifier, linkAuth: linkAuthOf('op') });
      expect(r.ok && r.value.items[0]?.type).toBe('logs.data');
    }
  });

  it("a frame asking for '../../keys' is dropped whole by the frame decoder, authenticated or not", () => {
    const frame = encodeFrame({ from: 'op', to: 'a1', items: [{ ...read, task: '../../keys' }] }, { cluster: CLUSTER, signer: signerOf('op'), linkAuth: linkAuthOf('op') });
    const r = decodeFrame(frame, { cluster: CLUSTER, self: 'a1', verifier, linkAuth: linkAuthOf('a1') });
    expect(r.ok ? 'ok' : r.code).toBe('WIRE_MALFORMED');
    expect(detail(r)).toContain('task');
  });
});

describe('canonical input (PROTOCOL §2.2 step 9)', () => {
  const trees: unknown[] = [
    frameBody.enc({ cluster: CLUSTER, to: 'r1', items: itemsFrom('a1').map(toWire) }),
    ...agentRequests.map((p, i) => groupMsgCG.enc(cgOf('a1', i, p))),
    ...groupMsgsGC.map((gc) => groupMsgGC.enc(gc)),
    ...heartbeatInfos.map((h) => heartbeatInfo.enc(h)),
  ];

  it('the hand encoder with canonical choices writes exactly what pack() writes', () => {
    for (const tree of trees) expect(Buffer.from(encodeLoose(tree, canonicalChoice)).equals(Buffer.from(pack(tree)))).toBe(true);
  });

  it('unpack accepts an encoding exactly when it is byte for byte what pack() writes', () => {
    let seed = 99;
    const random = (n: number): number => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return (seed >>> 16) % n;
    };
    let refused = 0;
    for (let round = 0; round < 60; round++) {
      for (const tree of trees) {
        // mostly canonical, with a few nodes in another width
        const loose = encodeLoose(tree, (n, v) => (random(8) === 0 ? random(n) : canonicalChoice(n, v)));
        const canonical = Buffer.from(loose).equals(Buffer.from(pack(tree)));
        const r = unpack(loose);
        if (canonical) {
          expect(code(r)).toBe('ok');
        } else {
          refused++;
          expect(`${code(r)} ${detail(r)}`).toBe('WIRE_MALFORMED msgpack: not the canonical encoding');
        }
      }
    }
    expect(refused).toBeGreaterThan(100);
  });

  it('unpack refuses what pack() can write but Trine never sends: maps, float32-free floats aside', () => {
    expect(code(unpack(pack({ a: 1 })))).toBe('WIRE_MALFORMED');
    expect(code(unpack(pack([1, { b: [2] }])))).toBe('WIRE_MALFORMED');
    expect(code(unpack(pack(new Map([[1, 2]]))))).toBe('WIRE_MALFORMED');
    expect(code(unpack(pack(new Date(0))))).toBe('WIRE_MALFORMED'); // msgpackr writes a timestamp extension
    // -0 is written as the integer 0, so a float64 -0 is not canonical
    expect(code(unpack(Uint8Array.of(0xcb, 0x80, 0, 0, 0, 0, 0, 0, 0)))).toBe('WIRE_MALFORMED');
  });
});

describe('text encoding refuses what UTF-8 cannot carry', () => {
  it('a lone surrogate is our own bug: encoding throws instead of sending invalid or altered text', async () => {
    const { text } = await import('../../../../src/core/wire/schema.ts');
    const t = text(100);
    expect(() => t.enc('x\ud800')).toThrow(/surrogate/);
    expect(() => t.enc('x\udc00y')).toThrow(/surrogate/);
    expect(t.enc('emoji \ud83d\ude00 ok')).toBe('emoji \ud83d\ude00 ok');
  });
});
