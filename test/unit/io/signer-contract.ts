// The shared contract every Signer/Verifier pair passes (STYLE.md 3): node:crypto, tweetnacl
// and the simulator's cheap signer. Not a test file itself; a *.test.ts calls signerContract.
import { describe, expect, it } from 'vitest';
import { SIGNATURE_BYTES } from '../../../src/core/constants.ts';
import type { Signer, Verifier } from '../../../src/core/ports.ts';

export type SignerSet = { signers: Map<string, Signer>; verifier: Verifier };

const IDS = ['r1', 'r2', 'a1'];

function message(size: number, salt: number): Uint8Array {
  const m = new Uint8Array(size);
  for (let i = 0; i < size; i++) m[i] = (i * 31 + salt * 7 + 3) & 0xff;
  return m;
}

function flipBit(data: Uint8Array, bit: number): Uint8Array {
  const out = Uint8Array.from(data);
  const index = Math.floor(bit / 8) % out.length;
  out[index] = (out[index] as number) ^ (1 << (bit % 8));
  return out;
}

export function signerContract(name: string, make: (ids: string[]) => SignerSet): void {
  describe(`Signer/Verifier contract: ${name}`, () => {
    const { signers, verifier } = make(IDS);
    const signer = (id: string): Signer => {
      const s = signers.get(id);
      if (s === undefined) throw new Error(`make() returned no signer for ${id}`);
      return s;
    };
    const messages = [message(0, 0), message(1, 1), message(200, 2), message(64 * 1024, 3)];

    it('gives one signer per id, each carrying its id', () => {
      for (const id of IDS) expect(signer(id).id).toBe(id);
      for (const id of IDS) expect(verifier.has(id)).toBe(true);
    });

    it(`signs with exactly ${SIGNATURE_BYTES} bytes, the frame format's signature size`, () => {
      for (const m of messages) expect(signer('r1').sign(m).length).toBe(SIGNATURE_BYTES);
    });

    it('verifies what each signer signed, for empty, small and large messages', () => {
      for (const id of IDS) {
        for (const m of messages) expect(verifier.verify(id, m, signer(id).sign(m))).toBe(true);
      }
    });

    it('rejects a one-bit flip anywhere in the data', () => {
      const m = message(200, 4);
      const sig = signer('r1').sign(m);
      for (const bit of [0, 7, 8 * 100 + 3, 200 * 8 - 1]) {
        expect(verifier.verify('r1', flipBit(m, bit), sig)).toBe(false);
      }
      // appended or removed bytes are a different message too
      expect(verifier.verify('r1', Uint8Array.from([...m, 0]), sig)).toBe(false);
      expect(verifier.verify('r1', m.subarray(0, 199), sig)).toBe(false);
    });

    it('rejects a one-bit flip anywhere in the signature', () => {
      const m = message(200, 5);
      const sig = signer('r1').sign(m);
      for (let bit = 0; bit < SIGNATURE_BYTES * 8; bit += 37) {
        expect(verifier.verify('r1', m, flipBit(sig, bit))).toBe(false);
      }
      expect(verifier.verify('r1', m, flipBit(sig, 0))).toBe(false);
      expect(verifier.verify('r1', m, flipBit(sig, SIGNATURE_BYTES * 8 - 1))).toBe(false);
    });

    it("rejects another process's signature on the same data", () => {
      const m = message(200, 6);
      expect(verifier.verify('r1', m, signer('r2').sign(m))).toBe(false);
      expect(verifier.verify('r2', m, signer('r1').sign(m))).toBe(false);
      expect(verifier.verify('a1', m, signer('r1').sign(m))).toBe(false);
    });

    it("rejects a signature of other data by the same process", () => {
      const sig = signer('r1').sign(message(200, 7));
      expect(verifier.verify('r1', message(200, 8), sig)).toBe(false);
    });

    it('knows no unknown id, including names of Object.prototype members', () => {
      const m = message(200, 9);
      const sig = signer('r1').sign(m);
      for (const id of ['r4', '', 'R1', 'constructor', 'toString', '__proto__', 'hasOwnProperty']) {
        expect(verifier.has(id)).toBe(false);
        expect(verifier.verify(id, m, sig)).toBe(false);
      }
    });

    it('returns false, without throwing, for a signature of the wrong length', () => {
      const m = message(200, 10);
      const sig = signer('r1').sign(m);
      const wrong = [
        new Uint8Array(0),
        sig.subarray(0, SIGNATURE_BYTES - 1),
        Uint8Array.from([...sig, 0]), // a valid signature followed by a stray byte
        Uint8Array.from([...sig, ...sig]),
        new Uint8Array(SIGNATURE_BYTES + 1),
      ];
      for (const s of wrong) expect(verifier.verify('r1', m, s)).toBe(false);
      expect(verifier.verify('r1', m, new Uint8Array(SIGNATURE_BYTES))).toBe(false);
    });

    it('signs deterministically: same data, same signature; other data, other signature', () => {
      for (const m of messages) expect(signer('r1').sign(m)).toEqual(signer('r1').sign(Uint8Array.from(m)));
      expect(signer('r1').sign(message(200, 11))).not.toEqual(signer('r1').sign(message(200, 12)));
      expect(signer('r1').sign(message(200, 11))).not.toEqual(signer('r2').sign(message(200, 11)));
    });

    it('shares no state through its buffers: mutating a returned signature or the input is harmless', () => {
      const m = message(200, 13);
      const sig = signer('r1').sign(m);
      const copy = Uint8Array.from(sig);
      sig.fill(0);
      const again = signer('r1').sign(m);
      expect(again).toEqual(copy);
      expect(verifier.verify('r1', m, again)).toBe(true);
      const before = Uint8Array.from(m);
      verifier.verify('r1', m, again);
      expect(m).toEqual(before);
      expect(again).toEqual(copy);
    });

    it('verifies data and signatures that are views into larger buffers', () => {
      const m = message(200, 14);
      const sig = signer('r1').sign(m);
      const big = new Uint8Array(7 + m.length + sig.length + 5);
      big.set(m, 7);
      big.set(sig, 7 + m.length);
      const mView = big.subarray(7, 7 + m.length);
      const sView = big.subarray(7 + m.length, 7 + m.length + sig.length);
      expect(verifier.verify('r1', mView, sView)).toBe(true);
      expect(signer('r1').sign(mView)).toEqual(sig);
      expect(verifier.verify('r1', Buffer.from(m), Buffer.from(sig))).toBe(true);
    });
  });
}
