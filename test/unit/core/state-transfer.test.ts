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

  it('a copy that failed to decode is discarded; another member\'s copy of the same state is installed', () => {
    const { t, send, receive } = transfer();
    send('r2', [{ type: 'state.digest', rsn: RSN, digest: sha256(good) }]);
    expect(send('r1', statePayloads(RSN, good, sha256(good)))).toEqual(installed);
    t.discard(RSN);
    expect(t.ready()).toBeNull();
    expect(send('r2', statePayloads(RSN, good, sha256(good)).slice(1))).toEqual(installed);
  });
});
