// Binding a connection by proofs of each end's nonce (PROTOCOL §2.5; issue 14 items 2, 3): a
// proof opens to its sender, with the challenge it asks to have answered, under a signature or a
// link MAC; a proof of another nonce (a replay from another connection), a frame that is not a
// lone proof, a challenge of the wrong size, a forged or foreign one, and bytes that are no frame
// at all are each refused with a typed reason, never thrown.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { BIND_NONCE_BYTES } from '../../../../src/core/constants.ts';
import { bindProof, openBindProof } from '../../../../src/core/wire/bind-proof.ts';
import { encodeFrame } from '../../../../src/core/wire/frame.ts';
import { CLUSTER, linkAuthOf, signerOf, verifier } from './wire-samples.ts';

const nonce = () => new Uint8Array(randomBytes(BIND_NONCE_BYTES));
/** A dialer's challenge. */
const c = nonce();
const at = (self: string) => ({ cluster: CLUSTER, self, verifier, linkAuth: linkAuthOf(self) });

describe('bind proofs (PROTOCOL §2.5)', () => {
  it('a signed proof of this connection\'s nonce opens to its dialer', () => {
    const n = nonce();
    expect(openBindProof(bindProof({ cluster: CLUSTER, signer: signerOf('a1') }, 'r1', n, c), n, at('r1'))).toEqual({ ok: true, value: { from: 'a1', challenge: c } });
  });

  it('a proof under the link MAC opens too (version 2 frame)', () => {
    const n = nonce();
    const proof = bindProof({ cluster: CLUSTER, signer: signerOf('op'), linkAuth: linkAuthOf('op') }, 'r1', n, c);
    expect(proof[0]).toBe(2);
    expect(openBindProof(proof, n, at('r1'))).toEqual({ ok: true, value: { from: 'op', challenge: c } });
  });

  it('the proof of another connection\'s nonce is REPLAYED', () => {
    const proof = bindProof({ cluster: CLUSTER, signer: signerOf('a1') }, 'r1', nonce(), c);
    expect(openBindProof(proof, nonce(), at('r1'))).toMatchObject({ ok: false, code: 'REPLAYED' });
  });

  it('a genuine frame that is not a lone proof is UNEXPECTED, whatever it carries', () => {
    const n = nonce();
    const sign = { cluster: CLUSTER, signer: signerOf('a1') };
    const probe = encodeFrame({ from: 'a1', to: 'r1', items: [{ type: 'probe', nonce: 1 }] }, sign);
    const twice = encodeFrame({ from: 'a1', to: 'r1', items: [{ type: 'bind.proof', nonce: n, challenge: c }, { type: 'probe', nonce: 1 }] }, sign);
    expect(openBindProof(probe, n, at('r1'))).toMatchObject({ ok: false, code: 'UNEXPECTED' });
    expect(openBindProof(twice, n, at('r1'))).toMatchObject({ ok: false, code: 'UNEXPECTED' });
  });

  it('a proof for another listener, another cluster, or under a forged key is refused as the frame decoder refuses it', () => {
    const n = nonce();
    expect(openBindProof(bindProof({ cluster: CLUSTER, signer: signerOf('a1') }, 'r2', n, c), n, at('r1'))).toMatchObject({ ok: false, code: 'WIRE_MISADDRESSED' });
    expect(openBindProof(bindProof({ cluster: 'another', signer: signerOf('a1') }, 'r1', n, c), n, at('r1'))).toMatchObject({ ok: false, code: 'WIRE_FOREIGN_CLUSTER' });
    const forged = { id: 'a1', sign: signerOf('a2').sign };
    expect(openBindProof(bindProof({ cluster: CLUSTER, signer: forged }, 'r1', n, c), n, at('r1'))).toMatchObject({ ok: false, code: 'SIG_INVALID' });
    expect(openBindProof(bindProof({ cluster: CLUSTER, signer: { id: 'x9', sign: signerOf('a1').sign } }, 'r1', n, c), n, at('r1'))).toMatchObject({ ok: false, code: 'SIG_UNKNOWN_KEY' });
  });

  it('a listener\'s answer carries no challenge; a challenge of another size than 0 or 16 bytes is malformed', () => {
    const n = nonce();
    expect(openBindProof(bindProof({ cluster: CLUSTER, signer: signerOf('r1') }, 'a1', n, new Uint8Array()), n, at('a1'))).toEqual({ ok: true, value: { from: 'r1', challenge: new Uint8Array() } });
    expect(openBindProof(bindProof({ cluster: CLUSTER, signer: signerOf('r1') }, 'a1', n, new Uint8Array(5)), n, at('a1'))).toMatchObject({ ok: false, code: 'WIRE_MALFORMED' });
  });

  it('is total over bytes that are no frame', () => {
    const n = nonce();
    for (let len = 0; len < 200; len += 7) {
      const r = openBindProof(new Uint8Array(randomBytes(len)), n, at('r1'));
      expect(r.ok).toBe(false);
    }
  });
});
