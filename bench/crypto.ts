// Signing and frame-codec throughput (STYLE.md 17): Ed25519 signatures and verifications per
// second for node:crypto and tweetnacl on a 200-byte message (DESIGN.md §6 quotes ~0.04 ms and
// ~0.12 ms for node:crypto), and whole frames of 1 and 64 `grp` items encoded+signed and
// decoded+verified per second, signed (version 1) and MAC'd on a link (version 2, PROTOCOL §2.4:
// the grp-gc frames a replica sends an agent; a CG keeps its agent's own signature either way).
// bench/run.ts imports benchCrypto(); run alone with
//   node --import tsx bench/crypto.ts
import { randomBytes } from 'node:crypto';
import { resolve } from 'node:path';
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import type { Signer, Verifier } from '../src/core/ports.ts';
import { decodeFrame, encodeFrame, signCG } from '../src/core/wire/frame.ts';
import type { Item } from '../src/core/wire/messages.ts';
import { generateKeyPair } from '../src/io/keys.ts';
import { createNodeLinkAuth } from '../src/io/link-auth-node.ts';
import { createNaclSigner, createNaclVerifier } from '../src/io/signer-nacl.ts';
import { createNodeSigner, createNodeVerifier } from '../src/io/signer-node.ts';

export type Figure = { name: string; value: number; unit: string };
export type BenchCryptoOptions = {
  /** Least wall time per figure; 1 s by default so timer noise stays under a percent. */
  minMs?: number;
  /** Least operations per figure, however slow: tweetnacl may sign only a few hundred a second. */
  minOperations?: number;
};

const MESSAGE_BYTES = 200;
const CLUSTER = 'bench';

/** Operations per second of `op`, timed over at least `minMs` and `minOperations`. */
function rate(op: (i: number) => void, minMs: number, minOperations: number): number {
  for (let i = 0; i < Math.min(minOperations, 10); i++) op(i); // warm up the JIT
  let done = 0;
  let batch = 1;
  const start = performance.now();
  let elapsed = 0;
  while (elapsed < minMs || done < minOperations) {
    for (let i = 0; i < batch; i++) op(done + i);
    done += batch;
    elapsed = performance.now() - start;
    // grow batches so reading the clock costs nothing, but keep each under ~1/10 of the budget
    if (elapsed < minMs / 10) batch *= 2;
  }
  return (done * 1000) / elapsed;
}

function signerPair(make: 'node' | 'nacl', seed: Uint8Array, publicKey: Uint8Array, id: string): { signer: Signer; verifier: Verifier } {
  return make === 'node'
    ? { signer: createNodeSigner(id, seed), verifier: createNodeVerifier({ [id]: publicKey }) }
    : { signer: createNaclSigner(id, seed), verifier: createNaclVerifier({ [id]: publicKey }) };
}

/** Agent a1 → replica r1: `n` CGs on lane 1, each signed by the agent (decode verifies n + 1). */
function cgItems(agent: Signer, n: number): Item[] {
  return Array.from({ length: n }, (_, i): Item => ({
    type: 'grp', srcInc: 1, destInc: 1, seq: i + 1,
    body: { type: 'cg', signed: signCG({ csn: i + 1, gssnAck: i, payload: { type: 'echo', tag: 'bench', fanout: 'self', count: 1, data: randomBytes(64) }, client: agent.id, inc: 1 }, agent) },
  }));
}

/** Replica r1 → agent a1: `n` GCs on lane 1 under the one frame signature. */
function gcItems(n: number): Item[] {
  return Array.from({ length: n }, (_, i): Item => ({
    type: 'grp', srcInc: 1, destInc: 1, seq: i + 1,
    body: { type: 'gc', gc: { gssn: i + 1, prevGssn: i, csnAck: i, destInc: 1, dest: 'a1', payload: { type: 'echo.reply', origin: 'a1', tag: 'bench', rsn: i + 1, index: 0, data: randomBytes(64) } } },
  }));
}

export async function benchCrypto(options: BenchCryptoOptions = {}): Promise<Figure[]> {
  const minMs = options.minMs ?? 1000;
  const minOperations = options.minOperations ?? 20;
  const figures: Figure[] = [];
  const { seed, publicKey } = generateKeyPair();
  const message = randomBytes(MESSAGE_BYTES);

  for (const impl of ['node', 'nacl'] as const) {
    const label = impl === 'node' ? 'node-crypto' : 'tweetnacl';
    const { signer, verifier } = signerPair(impl, seed, publicKey, 'p1');
    const signature = signer.sign(message);
    figures.push({ name: `crypto.${label}.sign-${MESSAGE_BYTES}B`, value: rate(() => signer.sign(message), minMs, minOperations), unit: 'signatures/s' });
    await yieldToLoop();
    let rejected = 0;
    figures.push({
      name: `crypto.${label}.verify-${MESSAGE_BYTES}B`,
      value: rate(() => { if (!verifier.verify('p1', message, signature)) rejected++; }, minMs, minOperations),
      unit: 'verifications/s',
    });
    if (rejected > 0) throw new Error(`${label} rejected its own signature`);
    await yieldToLoop();
  }

  const keys = { r1: generateKeyPair(), a1: generateKeyPair() };
  const r1 = createNodeSigner('r1', keys.r1.seed);
  const a1 = createNodeSigner('a1', keys.a1.seed);
  const publicKeys = { r1: keys.r1.publicKey, a1: keys.a1.publicKey };
  const verifier = createNodeVerifier(publicKeys);
  const links = { r1: createNodeLinkAuth('r1', keys.r1.seed, publicKeys, CLUSTER), a1: createNodeLinkAuth('a1', keys.a1.seed, publicKeys, CLUSTER) };
  const cases = [
    { kind: 'grp-cg', signer: a1, to: 'r1', make: (n: number) => cgItems(a1, n), mac: false },
    { kind: 'grp-gc', signer: r1, to: 'a1', make: gcItems, mac: false },
    { kind: 'grp-gc', signer: r1, to: 'a1', make: gcItems, mac: true },
  ];
  for (const c of cases) {
    for (const n of [1, 64]) {
      const frame = { from: c.signer.id, to: c.to, items: c.make(n) };
      const encodeCtx = { cluster: CLUSTER, signer: c.signer, ...(c.mac ? { linkAuth: links.r1 } : {}) };
      const decodeCtx = { cluster: CLUSTER, self: c.to, verifier, ...(c.mac ? { linkAuth: links.a1 } : {}) };
      const data = encodeFrame(frame, encodeCtx);
      const check = decodeFrame(data, decodeCtx);
      if (!check.ok || check.value.items.length !== n) throw new Error(`bench frame does not decode: ${check.ok ? 'item count' : check.code}`);
      if ((data[0] === 2) !== c.mac) throw new Error(`bench frame is version ${data[0]}`);
      const [enc, dec] = c.mac ? ['encode-mac', 'decode-mac'] : ['encode-sign', 'decode-verify'];
      figures.push({ name: `frame.${enc}.${c.kind}x${n}`, value: rate(() => encodeFrame(frame, encodeCtx), minMs, minOperations), unit: 'frames/s' });
      await yieldToLoop();
      figures.push({ name: `frame.${dec}.${c.kind}x${n}`, value: rate(() => decodeFrame(data, decodeCtx), minMs, minOperations), unit: 'frames/s' });
      figures.push({ name: `frame.bytes${c.mac ? '-mac' : ''}.${c.kind}x${n}`, value: data.length, unit: 'bytes' });
      await yieldToLoop();
    }
  }
  return figures;
}

/** "1234.5 signatures/s (810.0 µs each)" */
export function formatFigure(f: Figure): string {
  const value = f.value >= 100 ? Math.round(f.value).toLocaleString('en-US') : f.value.toFixed(1);
  const each = f.unit.endsWith('/s') && f.value > 0 ? `  (${(1e6 / f.value).toFixed(1)} µs each)` : '';
  return `${f.name.padEnd(36)} ${value.padStart(10)} ${f.unit}${each}`;
}

const invokedDirectly = process.argv[1] !== undefined && import.meta.url === pathToFileURL(resolve(process.argv[1])).href;
if (invokedDirectly) {
  for (const f of await benchCrypto()) console.log(formatFigure(f));
}
