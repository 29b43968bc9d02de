// State transfer to a replacement replica (docs/PROTOCOL.md §10.6). Every member sends the new
// replica the digest of the state at the RSN where it joined, and the canonical state itself in
// chunks. The new replica installs the first complete copy whose SHA-256 equals the digest two
// distinct members sent for that RSN: with at most one faulty member, two matching digests
// include a correct one, so a faulty member can neither forge the state nor block the transfer
// (the correct member's copy completes too). Pure: no clock, no I/O.
import { bytesEqual, concatBytes } from '../base/bytes.ts';
import { assert } from '../base/result.ts';
import { MAX_STATE_CHUNK_BYTES, MAX_STATE_CHUNKS, QUORUM } from './constants.ts';
import type { Hash, ProcessId } from './ports.ts';
import type { PtpPayload } from './wire/messages.ts';

/** The payloads a member sends: the digest first, then the chunks. */
export function statePayloads(rsn: number, bytes: Uint8Array, digest: Uint8Array): PtpPayload[] {
  const count = Math.max(1, Math.ceil(bytes.length / MAX_STATE_CHUNK_BYTES));
  const out: PtpPayload[] = [{ type: 'state.digest', rsn, digest }];
  for (let index = 0; index < count; index++) {
    out.push({ type: 'state.chunk', rsn, index, count, data: bytes.subarray(index * MAX_STATE_CHUNK_BYTES, (index + 1) * MAX_STATE_CHUNK_BYTES) });
  }
  return out;
}

type Copy = { rsn: number; count: number; parts: (Uint8Array | undefined)[]; have: number };

export type StateTransfer = ReturnType<typeof createStateTransfer>;

/** The new replica's side. `members`: who may send (the group as commanded at the spawn, plus
 *  anyone who joins it; all are checked against the digests anyway). */
export function createStateTransfer(hash: Hash, members: () => readonly ProcessId[]) {
  const digests = new Map<ProcessId, { rsn: number; digest: Uint8Array }>();
  const copies = new Map<ProcessId, Copy>();

  return {
    /** A state.digest or state.chunk from `from`; returns the verified bytes and RSN once a copy
     *  is complete and vouched for by two members, else null. */
    receive(from: ProcessId, p: PtpPayload): { rsn: number; bytes: Uint8Array } | null {
      if (!members().includes(from)) return null;
      if (p.type === 'state.digest') {
        digests.set(from, { rsn: p.rsn, digest: p.digest });
      } else if (p.type === 'state.chunk') {
        if (p.count < 1 || p.count > MAX_STATE_CHUNKS || p.index >= p.count) return null;
        let c = copies.get(from);
        if (c === undefined || c.rsn !== p.rsn || c.count !== p.count) copies.set(from, (c = { rsn: p.rsn, count: p.count, parts: new Array(p.count), have: 0 }));
        if (c.parts[p.index] === undefined) c.have++;
        c.parts[p.index] = p.data;
      } else {
        return null;
      }
      return this.ready();
    },

    ready(): { rsn: number; bytes: Uint8Array } | null {
      for (const c of copies.values()) {
        if (c.have !== c.count) continue;
        // Every index has its part: `have` counts the distinct indexes received.
        const parts = c.parts.filter((x): x is Uint8Array => x !== undefined);
        assert(parts.length === c.count, `state copy of rsn ${c.rsn}: ${parts.length} parts of ${c.count}`);
        const bytes = concatBytes(parts);
        const h = hash(bytes);
        let vouching = 0;
        for (const d of digests.values()) if (d.rsn === c.rsn && bytesEqual(d.digest, h)) vouching++;
        if (vouching >= QUORUM) return { rsn: c.rsn, bytes };
      }
      return null;
    },

    /** A complete copy failed to decode (only a faulty member's could): forget it. */
    discard(rsn: number): void {
      for (const [from, c] of copies) if (c.rsn === rsn) copies.delete(from);
    },
  };
}
