// The bytes of rollback recovery (src/app/rollback/codec.ts, PROTOCOL §11.3): round trips, and
// total decoders that turn every malformed input into WIRE_MALFORMED.
import { describe, expect, it } from 'vitest';
import {
  decodeChannelFrame, decodeCheckpoint, decodeLogEntry, encodeChannelFrame, encodeCheckpoint, encodeLogEntry,
} from '../../../../src/app/rollback/codec.ts';

const env = { ssn: 7, epoch: 4, comm: 0, tag: -3, structured: true, data: Uint8Array.of(1, 2, 3) };

describe('channel frames', () => {
  it('round-trip data (with its sender\'s epoch, PROTOCOL §11.7), ack, have and the checkpoint group\'s frames (radic-hmpl A.2.8)', () => {
    const frames = [
      { kind: 'data', env }, { kind: 'ack', upTo: 9 }, { kind: 'have', rank: 2, have: 0 }, { kind: 'epoch', stored: 3, floor: 4 },
      { kind: 'prepare', round: 2 }, { kind: 'ready', round: 2, calls: 17 }, { kind: 'commit', round: 2, id: 5, at: 18 },
    ] as const;
    for (const f of frames) {
      const d = decodeChannelFrame(encodeChannelFrame(f));
      expect(d.ok && d.value).toEqual(f);
    }
  });

  it('every truncation and corruption is refused, never thrown', () => {
    const good = encodeChannelFrame({ kind: 'data', env });
    for (let n = 0; n < 18; n++) expect(decodeChannelFrame(good.slice(0, n)).ok).toBe(false);
    expect(decodeChannelFrame(Uint8Array.of(9)).ok).toBe(false);
    const badFlag = good.slice();
    badFlag[17] = 2;
    expect(decodeChannelFrame(badFlag).ok).toBe(false);
    const ssn0 = good.slice();
    ssn0.set([0, 0, 0, 0], 1);
    expect(decodeChannelFrame(ssn0).ok).toBe(false);
    expect(decodeChannelFrame(Uint8Array.of(3, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0)).ok).toBe(false);
  });

  it('PROTOCOL §11.7: a group frame of the wrong size, or a commit of checkpoint 0, is refused', () => {
    for (const f of [{ kind: 'epoch', stored: 1, floor: 1 }, { kind: 'prepare', round: 1 }, { kind: 'ready', round: 1, calls: 2 }, { kind: 'commit', round: 1, id: 2, at: 3 }] as const) {
      const good = encodeChannelFrame(f);
      for (let n = 0; n < good.length; n++) expect(decodeChannelFrame(good.slice(0, n)).ok).toBe(false);
      const long = new Uint8Array(good.length + 1);
      long.set(good);
      expect(decodeChannelFrame(long).ok).toBe(false);
    }
    expect(decodeChannelFrame(encodeChannelFrame({ kind: 'commit', round: 1, id: 0, at: 3 }))).toMatchObject({ ok: false, code: 'WIRE_MALFORMED' });
  });
});

describe('log entries', () => {
  it('round-trip messages and determinants', () => {
    const m = { kind: 'message', source: 2, env } as const;
    const d = { kind: 'determinant', index: 12, det: { source: 1, ssn: 4 } } as const;
    expect(decodeLogEntry(encodeLogEntry(m), 3)).toEqual({ ok: true, value: m });
    expect(decodeLogEntry(encodeLogEntry(d), 3)).toEqual({ ok: true, value: d });
  });

  it('a source outside the task, a truncation or an unknown kind is refused', () => {
    expect(decodeLogEntry(encodeLogEntry({ kind: 'message', source: 5, env }), 3).ok).toBe(false);
    expect(decodeLogEntry(encodeLogEntry({ kind: 'determinant', index: 0, det: { source: 3, ssn: 1 } }), 3).ok).toBe(false);
    const good = encodeLogEntry({ kind: 'message', source: 1, env });
    for (let n = 0; n < 22; n++) expect(decodeLogEntry(good.slice(0, n), 3).ok).toBe(false);
    expect(decodeLogEntry(Uint8Array.of(7, 0, 0, 0, 0), 3).ok).toBe(false);
  });
});

describe('checkpoints', () => {
  const body = {
    id: 3, logPos: 40, app: Uint8Array.of(9, 9), collectives: 12,
    channels: { nextSsn: [1, 5], lastIn: [0, 4], loggedIn: [0, 4], recvIndex: 8, queue: [{ ...env, source: 1, pos: 40, logged: true }] },
  };

  it('round-trip', () => {
    const d = decodeCheckpoint(encodeCheckpoint(body), 2, 1 << 20);
    expect(d.ok && d.value).toEqual(body);
    // PROTOCOL §11.7: a checkpoint group's origin (checkpoint 1 at init) says so.
    const o = decodeCheckpoint(encodeCheckpoint({ ...body, origin: true }), 2, 1 << 20);
    expect(o.ok && o.value.origin).toBe(true);
  });

  it('a checkpoint above the bound, for another task size, or with any field broken is refused', () => {
    const bytes = encodeCheckpoint(body);
    expect(decodeCheckpoint(bytes, 2, bytes.length - 1).ok).toBe(false);
    expect(decodeCheckpoint(bytes, 3, 1 << 20).ok).toBe(false);
    expect(decodeCheckpoint(bytes.slice(0, bytes.length - 3), 2, 1 << 20).ok).toBe(false);
    expect(decodeCheckpoint(encodeCheckpoint({ ...body, logPos: -1 }), 2, 1 << 20).ok).toBe(false);
    const badQueue = { ...body, channels: { ...body.channels, queue: [{ ...body.channels.queue[0]!, source: 7 }] } };
    expect(decodeCheckpoint(encodeCheckpoint(badQueue), 2, 1 << 20).ok).toBe(false);
    expect(decodeCheckpoint(Uint8Array.of(0xc1), 2, 1 << 20).ok).toBe(false);
    expect(decodeCheckpoint(encodeCheckpoint({ ...body, origin: 'yes' } as never), 2, 1 << 20).ok).toBe(false);
    const noEpoch = { ...body, channels: { ...body.channels, queue: [{ ...body.channels.queue[0]!, epoch: -1 }] } };
    expect(decodeCheckpoint(encodeCheckpoint(noEpoch), 2, 1 << 20).ok).toBe(false);
  });
});
