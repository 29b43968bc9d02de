// The protector hello's MAC (src/app/rollback/protector-auth.ts; docs/PROTOCOL.md §11.4, as
// §9.5 with its own label): it verifies only under the task key, on the connection whose
// challenge it answers (no replay), for the rank and incarnation it names (no fencing another
// holder, mpichv-dgrp 1.2.4), in its role (no reflection), and never as a G-MPI hello.
import { describe, expect, it } from 'vitest';
import { helloMac } from '../../../src/app/gmpi/hello-auth.ts';
import { protectorMac, protectorMacValid, protectorNonce, type ProtectorTranscript } from '../../../src/app/rollback/protector-auth.ts';
import { TASK_KEY_BYTES } from '../../../src/core/constants.ts';

const KEY = new Uint8Array(TASK_KEY_BYTES).fill(0x21);
const base: ProtectorTranscript = {
  role: 'process', task: 't3', rank: 2, incarnation: 17, processNonce: new Uint8Array(32).fill(1), protectorNonce: new Uint8Array(32).fill(2),
};

describe('PROTOCOL §11.4 protector hello MAC', () => {
  const mac = protectorMac(KEY, base);

  it('verifies for its own transcript under the task key', () => {
    expect(mac).toHaveLength(32);
    expect(protectorMacValid(KEY, base, mac)).toBe(true);
  });

  it('a forged MAC, or one under another key (a stranger, another task), does not verify', () => {
    const forged = mac.slice();
    forged[0] = forged[0]! ^ 1;
    expect(protectorMacValid(KEY, base, forged)).toBe(false);
    expect(protectorMacValid(KEY, base, mac.subarray(0, 31))).toBe(false);
    expect(protectorMacValid(new Uint8Array(TASK_KEY_BYTES).fill(0x22), base, mac)).toBe(false);
  });

  it('a replayed hello fails on another connection: the protector\'s nonce differs', () => {
    expect(protectorMacValid(KEY, { ...base, protectorNonce: protectorNonce() }, mac)).toBe(false);
  });

  it('binds the task, the rank, the incarnation and the role', () => {
    for (const other of [{ task: 't33' }, { rank: 3 }, { incarnation: 18 }, { role: 'protector' as const }, { processNonce: new Uint8Array(32) }]) {
      expect(protectorMacValid(KEY, { ...base, ...other }, mac)).toBe(false);
    }
    expect(protectorMacValid(KEY, { ...base, incarnation: 2 ** 32 + 17 }, mac)).toBe(false);
  });

  it('has its own label: a G-MPI hello over the same fields never verifies as a protector hello', () => {
    const gmpi = helloMac(KEY, { role: 'dialler', taskId: 't3', sender: 2, receiver: 17, diallerNonce: base.processNonce, acceptorNonce: base.protectorNonce });
    expect(protectorMacValid(KEY, base, gmpi)).toBe(false);
  });

  it('fresh nonces differ', () => {
    expect(protectorNonce()).not.toEqual(protectorNonce());
  });
});
