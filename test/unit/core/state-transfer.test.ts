// State transfer to a replacement replica (PROTOCOL §10.6 "Verifying"; spec §2.2, where the
// dissertation leaves it open, and §1.3: one faulty member among three). The new replica installs
// the first complete copy whose SHA-256 equals the digest two distinct members sent for the same
// RSN. Issue 15 planted `vouching >= 1` here and nothing failed: a replica could install a state
// only its sender vouched for. Each case below is what one faulty member can try.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { MAX_STATE_CHUNK_BYTES, MAX_STATE_CHUNKS } from '../../../src/core/constants.ts';
import { createStateTransfer, statePayloads } from '../../../src/core/state-transfer.ts';
import type { PtpPayload } from '../../../src/core/wire/messages.ts';

const sha256 = (b: Uint8Array) => new Uint8Array(createHash('sha256').update(b).digest());
/** `length` bytes of a pattern that `seed` shifts. */
function state(seed: number, length: number): Uint8Array {
  const b = new Uint8Array(length);
  for (let i = 0; i < length; i++) b[i] = (i * 31 + seed) % 251;
  return b;
}
/** An installed copy as its RSN and digest (hex): comparing 800 KB byte by byte is slow. */
const seen = (r: { rsn: number; bytes: Uint8Array } | null) => (r === null ? null : { rsn: r.rsn, sha: Buffer.from(sha256(r.bytes)).toString('hex') });

/** A receiver for a group of r1, r2, r3 and what each member would send it. */
function transfer(members = ['r1', 'r2', 'r3']) {
  const t = createStateTransfer(sha256, () => members);
  const send = (from: string, payloads: readonly PtpPayload[]) => seen(payloads.map((p) => t.receive(from, p)).filter((x) => x !== null).at(-1) ?? null);
  const receive = (from: string, p: PtpPayload) => seen(t.receive(from, p));
  return { t, send, receive };
}

describe('state transfer: two members vouch, one faulty member cannot (PROTOCOL §10.6)', () => {
  const RSN = 40;
  const good = state(1, 3 * MAX_STATE_CHUNK_BYTES + 17); // four chunks
  const forged = state(2, 1_000);
  const installed = { rsn: RSN, sha: Buffer.from(sha256(good)).toString('hex') };

  it('a complete copy vouched for by its sender alone is not installed; the second matching digest installs it', () => {
    const { t, send, receive } = transfer();
    expect(send('r1', statePayloads(RSN, good, sha256(good)))).toBeNull();
    expect(t.ready()).toBeNull();
    // r2's digest alone (its chunks still on the way) is the second voucher.
    expect(receive('r2', { type: 'state.digest', rsn: RSN, digest: sha256(good) })).toEqual(installed);
  });

  it('a faulty member\'s forged state under its own matching digest is never installed; the correct copy is, once two vouch', () => {
    const { send } = transfer();
    expect(send('r3', statePayloads(RSN, forged, sha256(forged)))).toBeNull();
    expect(send('r1', statePayloads(RSN, good, sha256(good)))).toBeNull();
    expect(send('r2', statePayloads(RSN, good, sha256(good)))).toEqual(installed);
  });

  it('a faulty member that sends the correct digest but a forged copy is not believed: its copy does not hash to it', () => {
    const { t, send, receive } = transfer();
    expect(send('r3', [{ type: 'state.digest', rsn: RSN, digest: sha256(good) }, ...statePayloads(RSN, forged, sha256(good)).slice(1)])).toBeNull();
    expect(receive('r1', { type: 'state.digest', rsn: RSN, digest: sha256(good) })).toBeNull();
    // r1's own copy completes: vouched by r1 and r3 (whose digest was right), installed.
    expect(send('r1', statePayloads(RSN, good, sha256(good)).slice(1))).toEqual(installed);
  });

  it('two digests at different RSNs vouch for nothing; nor does the same member twice', () => {
    const { t, send, receive } = transfer();
    expect(send('r1', statePayloads(RSN, good, sha256(good)))).toBeNull();
    expect(receive('r2', { type: 'state.digest', rsn: RSN + 1, digest: sha256(good) })).toBeNull();
    expect(receive('r1', { type: 'state.digest', rsn: RSN, digest: sha256(good) })).toBeNull();
  });

  it('a process outside the group is not heard: neither its digest nor its copy', () => {
    const { t, send, receive } = transfer();
    expect(send('r9', statePayloads(RSN, forged, sha256(forged)))).toBeNull();
    expect(receive('r1', { type: 'state.digest', rsn: RSN, digest: sha256(forged) })).toBeNull();
    expect(send('a1', statePayloads(RSN, good, sha256(good)))).toBeNull();
    expect(receive('r1', { type: 'state.digest', rsn: RSN, digest: sha256(good) })).toBeNull();
  });

  it('chunks in any order, one repeated, reassemble; a chunk past its count or a count past the limit is ignored', () => {
    const { t, receive } = transfer();
    const [digest, ...chunks] = statePayloads(RSN, good, sha256(good));
    t.receive('r2', { type: 'state.digest', rsn: RSN, digest: sha256(good) });
    t.receive('r1', digest as PtpPayload);
    const c = chunks as Extract<PtpPayload, { type: 'state.chunk' }>[];
    expect(receive('r1', { ...c[0]!, index: c[0]!.count })).toBeNull();
    expect(receive('r1', { ...c[0]!, count: MAX_STATE_CHUNKS + 1 })).toBeNull();
    expect(receive('r1', c[3]!)).toBeNull();
    expect(receive('r1', c[3]!)).toBeNull(); // again: still three missing
    expect(receive('r1', c[1]!)).toBeNull();
    expect(receive('r1', c[0]!)).toBeNull();
    expect(receive('r1', c[2]!)).toEqual(installed);
  });

  it('a member sends the digest, then exactly ceil(size / MAX_STATE_CHUNK_BYTES) chunks, indexed 0..count-1; an empty state is one empty chunk', () => {
    const shape = (bytes: Uint8Array) => statePayloads(RSN, bytes, sha256(bytes)).map((p) => (p.type === 'state.chunk' ? `${p.index}/${p.count}:${p.data.length}` : p.type));
    expect(shape(good)).toEqual(['state.digest', '0/4:' + MAX_STATE_CHUNK_BYTES, '1/4:' + MAX_STATE_CHUNK_BYTES, '2/4:' + MAX_STATE_CHUNK_BYTES, '3/4:17']);
    expect(shape(state(3, 2 * MAX_STATE_CHUNK_BYTES))).toEqual(['state.digest', '0/2:' + MAX_STATE_CHUNK_BYTES, '1/2:' + MAX_STATE_CHUNK_BYTES]);
    expect(shape(new Uint8Array(0))).toEqual(['state.digest', '0/1:0']);
  });

  it('a digest that differs from the copy\'s in one byte, or only shares a prefix of it, vouches for nothing', () => {
    const h = sha256(good);
    const flipped = Uint8Array.from(h, (x, i) => (i === h.length - 1 ? x ^ 1 : x));
    for (const wrong of [flipped, h.subarray(0, 16), new Uint8Array(0)]) {
      const { t, send, receive } = transfer();
      expect(send('r1', statePayloads(RSN, good, h))).toBeNull();
      expect(receive('r2', { type: 'state.digest', rsn: RSN, digest: wrong }), `${wrong.length} bytes`).toBeNull();
      expect(t.ready()).toBeNull();
    }
  });

  it('a chunk whose index is not below its count, or whose count is 0 or past MAX_STATE_CHUNKS, changes nothing and throws nothing', () => {
    const one = state(4, 100); // one chunk
    const [digest, chunk] = statePayloads(RSN, one, sha256(one)) as [PtpPayload, Extract<PtpPayload, { type: 'state.chunk' }>];
    for (const bad of [
      { ...chunk, index: 1 },
      { ...chunk, index: 7 },
      { ...chunk, count: 0 },
      { ...chunk, index: 0, count: 0 },
      { ...chunk, count: MAX_STATE_CHUNKS + 1 },
      { ...chunk, index: 2 ** 32 - 2, count: 2 ** 32 - 1 },
    ]) {
      const { t, receive } = transfer();
      t.receive('r2', digest);
      t.receive('r1', digest);
      expect(receive('r1', bad), JSON.stringify({ index: bad.index, count: bad.count })).toBeNull();
      // The copy was not started, shrunk or filled by it: the real chunk still installs.
      expect(receive('r1', chunk)).toEqual({ rsn: RSN, sha: Buffer.from(sha256(one)).toString('hex') });
    }
  });

  it('a copy of exactly MAX_STATE_CHUNKS chunks is installed', () => {
    const bytes = state(5, MAX_STATE_CHUNKS * 3);
    const chunks: PtpPayload[] = Array.from({ length: MAX_STATE_CHUNKS }, (_, index) => ({
      type: 'state.chunk', rsn: RSN, index, count: MAX_STATE_CHUNKS, data: bytes.subarray(3 * index, 3 * index + 3),
    }));
    const { send, receive } = transfer();
    expect(receive('r2', { type: 'state.digest', rsn: RSN, digest: sha256(bytes) })).toBeNull();
    expect(send('r1', [{ type: 'state.digest', rsn: RSN, digest: sha256(bytes) }, ...chunks])).toEqual({ rsn: RSN, sha: Buffer.from(sha256(bytes)).toString('hex') });
  });

  it('a copy of more than MAX_STATE_CHUNKS chunks is never held, even when two members vouch for it', () => {
    const count = MAX_STATE_CHUNKS + 1;
    const bytes = state(9, count);
    const chunks: PtpPayload[] = Array.from({ length: count }, (_, index) => ({ type: 'state.chunk', rsn: RSN, index, count, data: bytes.subarray(index, index + 1) }));
    const { send } = transfer();
    expect(send('r2', [{ type: 'state.digest', rsn: RSN, digest: sha256(bytes) }])).toBeNull();
    expect(send('r1', [{ type: 'state.digest', rsn: RSN, digest: sha256(bytes) }, ...chunks])).toBeNull();
  });

  it('a member\'s copy of a later RSN, or of another chunk count, replaces its unfinished one instead of mixing with it', () => {
    const later = state(6, 3 * MAX_STATE_CHUNK_BYTES + 5); // four chunks, as RSN 40's
    const { send } = transfer();
    // r1 starts on RSN 40 and sends three of its four chunks; then the group moves on, and it
    // sends RSN 41's four. Mixed with the old parts, the copy would never hash right.
    expect(send('r1', statePayloads(RSN, good, sha256(good)).slice(0, 4))).toBeNull();
    expect(send('r2', [{ type: 'state.digest', rsn: RSN + 1, digest: sha256(later) }])).toBeNull();
    expect(send('r1', statePayloads(RSN + 1, later, sha256(later)))).toEqual({ rsn: RSN + 1, sha: Buffer.from(sha256(later)).toString('hex') });
    // The same RSN with another count (a member that re-encoded) also starts over.
    const { send: send2 } = transfer();
    const [, c0, c1] = statePayloads(RSN, good, sha256(good)) as Extract<PtpPayload, { type: 'state.chunk' }>[];
    const small = state(7, 10);
    expect(send2('r1', [c0!, c1!])).toBeNull();
    expect(send2('r2', [{ type: 'state.digest', rsn: RSN, digest: sha256(small) }])).toBeNull();
    expect(send2('r1', statePayloads(RSN, small, sha256(small)))).toEqual({ rsn: RSN, sha: Buffer.from(sha256(small)).toString('hex') });
  });

  it('a payload that is not part of a state transfer is not heard, even when a copy is ready', () => {
    const { t, send } = transfer();
    send('r2', [{ type: 'state.digest', rsn: RSN, digest: sha256(good) }]);
    expect(send('r1', statePayloads(RSN, good, sha256(good)))).toEqual(installed);
    expect(t.receive('r1', { type: 'order.claim', claimant: 'r2', view: 1, rsn: RSN, digest: sha256(good), sig: new Uint8Array(64) })).toBeNull();
  });

  it('discarding the copies of one RSN keeps another member\'s copy of a later RSN', () => {
    const later = state(8, 3_000);
    const { t, send, receive } = transfer();
    send('r3', [{ type: 'state.digest', rsn: RSN, digest: sha256(good) }]);
    expect(send('r1', statePayloads(RSN, good, sha256(good)))).toEqual(installed);
    // r2 already sent RSN 41's copy, which only r2 vouches for so far.
    expect(send('r2', statePayloads(RSN + 1, later, sha256(later)))).toEqual(installed); // RSN 40's is still ready
    t.discard(RSN);
    expect(t.ready()).toBeNull();
    expect(receive('r3', { type: 'state.digest', rsn: RSN + 1, digest: sha256(later) })).toEqual({ rsn: RSN + 1, sha: Buffer.from(sha256(later)).toString('hex') });
  });

  it('a copy that failed to decode is discarded; another member\'s copy of the same state is installed', () => {
    const { t, send, receive } = transfer();
    send('r2', [{ type: 'state.digest', rsn: RSN, digest: sha256(good) }]);
    expect(send('r1', statePayloads(RSN, good, sha256(good)))).toEqual(installed);
    t.discard(RSN);
    expect(t.ready()).toBeNull();
    expect(send('r2', statePayloads(RSN, good, sha256(good)).slice(1))).toEqual(installed);
  });
});
