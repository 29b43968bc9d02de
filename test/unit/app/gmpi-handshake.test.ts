// handshake.ts stepped by hand (docs/PROTOCOL.md §9.5): an acceptor (VPID 1) and a dialler
// (VPID 4) exchange challenge and hellos with no socket, so every check is visible; then who
// may dial, and the strangers' caps.
import { describe, expect, it } from 'vitest';
import {
  acceptorHello, admitHello, admitStranger, challenge, checkHello, createStrangers, diallerStep, type HandshakeNonces, type HelloSender, leaveStrangers,
} from '../../../src/app/gmpi/handshake.ts';
import { MAX_UNATTRIBUTED_CONNECTIONS, MAX_UNAUTHENTICATED_PER_ADDRESS } from '../../../src/app/gmpi/p2p-types.ts';
import type { HelloFrame } from '../../../src/app/gmpi/wire.ts';

const KEY = new Uint8Array(32).fill(7);
const OTHER_KEY = new Uint8Array(32).fill(9);
const acceptor = { taskId: 't', self: 1, key: KEY };
const dialler = { taskId: 't', self: 4, key: KEY };
const nonces = (): HandshakeNonces => ({ ourNonce: null, theirNonce: null });

/** Challenge, the dialler's hello: returns both sides' nonces and the hello. */
function toHello(d = dialler): { a: HandshakeNonces; dn: HandshakeNonces; hello: HelloFrame } {
  const a = nonces();
  const dn = nonces();
  const step = diallerStep(d, dn, 1, challenge(1, a));
  if (step.kind !== 'send') throw new Error(`expected our hello, got ${step.kind}`);
  return { a, dn, hello: step.frame };
}

describe('handshake', () => {
  it('challenge, dialler hello, acceptor hello: both sides verify', () => {
    const { a, dn, hello } = toHello();
    expect(hello).toMatchObject({ type: 'hello', id: 4, taskId: 't' });
    expect(checkHello(acceptor, a, hello)).toEqual({ kind: 'verified' });
    expect(a.theirNonce).toEqual(dn.ourNonce);
    expect(diallerStep(dialler, dn, 1, acceptorHello(acceptor, a, 4))).toEqual({ kind: 'verified' });
  });

  it('a hello under another key is BAD_MAC on either side', () => {
    const { a, hello } = toHello({ ...dialler, key: OTHER_KEY });
    expect(checkHello(acceptor, a, hello)).toMatchObject({ kind: 'fail', reason: { code: 'BAD_MAC' } });
    const good = toHello();
    expect(checkHello(acceptor, good.a, good.hello).kind).toBe('verified');
    const reply = acceptorHello({ ...acceptor, key: OTHER_KEY }, good.a, 4);
    expect(diallerStep(dialler, good.dn, 1, reply)).toMatchObject({ kind: 'fail', reason: { code: 'BAD_MAC' } });
  });

  it("the dialler wants the dialled VPID's challenge first, then its hello", () => {
    const dn = nonces();
    expect(diallerStep(dialler, dn, 1, challenge(2, nonces()))).toMatchObject({ kind: 'fail', reason: { code: 'WRONG_ID' } });
    expect(diallerStep(dialler, dn, 1, { type: 'bye', id: 1, seq: 0 })).toMatchObject({ kind: 'fail', reason: { code: 'CHALLENGE_EXPECTED' } });
    const { dn: after } = toHello();
    expect(diallerStep(dialler, after, 1, challenge(1, nonces()))).toMatchObject({ kind: 'fail', reason: { code: 'UNEXPECTED_CHALLENGE' } });
  });

  it('who may dial: higher VPIDs, not removed; unknown or lost ones are held, expected ones attributed', () => {
    const base: HelloSender = { id: 4, self: 1, removed: false, peer: { state: 'expected', hasConn: false }, alreadyHeld: false, heldCount: 0 };
    expect(admitHello(base)).toEqual({ kind: 'attribute' });
    expect(admitHello({ ...base, id: 1 })).toMatchObject({ kind: 'fail', reason: { code: 'WRONG_ID' } });
    expect(admitHello({ ...base, removed: true })).toMatchObject({ kind: 'fail', reason: { code: 'WRONG_ID' } });
    expect(admitHello({ ...base, peer: undefined })).toEqual({ kind: 'hold' });
    expect(admitHello({ ...base, peer: { state: 'lost', hasConn: false } })).toEqual({ kind: 'hold' });
    expect(admitHello({ ...base, peer: undefined, alreadyHeld: true })).toMatchObject({ reason: { code: 'DUPLICATE_PEER' } });
    expect(admitHello({ ...base, peer: undefined, heldCount: MAX_UNATTRIBUTED_CONNECTIONS })).toMatchObject({ reason: { code: 'TOO_MANY_CONNECTIONS' } });
    expect(admitHello({ ...base, peer: { state: 'expected', hasConn: true } })).toMatchObject({ reason: { code: 'DUPLICATE_PEER' } });
  });

  it('strangers are capped per address and counted back down as they leave', () => {
    const s = createStrangers<number>();
    for (let i = 0; i < MAX_UNAUTHENTICATED_PER_ADDRESS; i++) expect(admitStranger(s, i, 'a')).toBeNull();
    expect(admitStranger(s, 99, 'a')).toMatchObject({ code: 'TOO_MANY_CONNECTIONS' });
    expect(admitStranger(s, 100, 'b')).toBeNull();
    expect(leaveStrangers(s, 0, 'a')).toBe(true);
    expect(leaveStrangers(s, 0, 'a')).toBe(false);
    expect(admitStranger(s, 101, 'a')).toBeNull();
    expect(leaveStrangers(s, 100, 'b')).toBe(true);
    expect(s.byAddress.has('b')).toBe(false);
  });
});
