// A digest of a simulated run's whole trace (issue 16): every frame as it reached its receiver
// (sender, receiver, time, bytes, corruption), every effect a core gave its driver, and every
// fault the run injected, in order. A change that alters nothing a process or an operator could
// observe leaves each seed's digest as it was:
//   npm run sim -- --seeds 10000 --digests before.txt      (on the old commit)
//   npm run sim -- --seeds 10000 --digests after.txt       (on the new one)
//   cmp before.txt after.txt
// The text hashed is canonical, so building the same effect with its fields in another order
// changes nothing; anything that differs in value does.
import { createHash, type Hash } from 'node:crypto';

/** `v` as canonical text: object keys sorted, bytes as hex, Maps and Sets as their entries in
 *  order, numbers that JSON cannot write by name. Undefined object fields are left out, as JSON
 *  leaves them. */
export function canonical(v: unknown): string {
  if (v === null || v === undefined) return 'null';
  switch (typeof v) {
    case 'number':
      return Number.isFinite(v) ? String(v) : `"${String(v)}"`;
    case 'bigint':
      return `${v}n`;
    case 'string':
      return JSON.stringify(v);
    case 'boolean':
      return v ? 'true' : 'false';
    case 'object':
      break;
    default:
      throw new TypeError(`canonical: a ${typeof v} has no canonical text`);
  }
  if (v instanceof Uint8Array) return `x${Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('hex')}`;
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v instanceof Map) return `M[${[...v].map(([k, x]) => `${canonical(k)}:${canonical(x)}`).join(',')}]`;
  if (v instanceof Set) return `S[${[...v].map(canonical).join(',')}]`;
  const o = v as Record<string, unknown>;
  const keys = Object.keys(o).filter((k) => o[k] !== undefined).sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`).join(',')}}`;
}

/** The running digest of one run's trace. */
export class TraceDigest {
  private readonly hash: Hash = createHash('sha256');
  private events = 0;

  /** One event, whole. A frame's bytes are hashed as they are (they carry its items). */
  add(event: { type: string; atMs: number } & Record<string, unknown>): void {
    this.events++;
    const { frame, ...rest } = event;
    if (event.type === 'delivered' && typeof frame === 'object' && frame !== null && 'bytes' in frame) {
      const f = frame as { from: string; to: string; bytes: Uint8Array };
      this.hash.update(`${canonical(rest)}|${f.from}>${f.to}|`);
      this.hash.update(f.bytes);
      this.hash.update('\n');
      return;
    }
    this.hash.update(`${canonical(event)}\n`);
  }

  /** Hex SHA-256 of the events so far, with their count (the hash is not consumed). */
  hex(): string {
    return `${this.hash.copy().digest('hex')}:${this.events}`;
  }
}
