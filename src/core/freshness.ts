// Fresh requests only (docs/PROTOCOL.md §7): a daemon answers a status query or a read of task
// output only when it carries a challenge the daemon issued moments ago and nobody used yet.
//
// Why. A status query is a signed (or MAC'd) frame with no session around it, so before this a
// captured one replayed by anyone, on any connection, got the whole status document back:
// 86 bytes in, about 20 KB out (issue 14 item 7), and a captured `logs.read` got a task's output.
// The frame's authenticator proves who asked, never when. Three ways to prove "now" were weighed:
//   - the requester's clock in the request, within a bound: needs the hosts' clocks to agree,
//     and a starting agent asks for the group this way (§10.7), so a skewed clock would keep a
//     node out of its cluster;
//   - a handshake per connection both sides put fresh randomness into: the transport binds a
//     connection by the first verified frame and sessions outlive connections (§3.2), so it
//     would be a transport change, and it would still not cover replays on the same connection;
//   - a challenge from the answerer (this file), as DTLS's HelloVerifyRequest and QUIC's Retry
//     do: one more round trip (milliseconds), no shared clock, and issuing costs no state.
//
// A challenge is (incarnation, serial, issuer's clock). The issuer remembers nothing when it
// issues one. It remembers the serials each sender used, until they expire, and takes each at
// most once per sender, so a replayed request finds its serial used (or expired, or from an
// earlier incarnation): dropped as REPLAYED, before any answer is built. That costs a map
// lookup. A replayed `challenge.ask` gets a challenge back (a small reply, not a document),
// which only the requester's key can turn into a request. The challenge is no secret: it only
// has to be new. Pure (STYLE.md 1): the driver's clock comes in as `nowMs`.
import type { ProcessId } from './ports.ts';
import { assert, type DropCode } from '../base/result.ts';
import type { Challenge } from './wire/messages.ts';

/** How long a challenge stays good. It is issued and used within one round trip: milliseconds
 *  on a LAN. 5 s also covers a requester or daemon that stalls for seconds (a loaded 2-core CI
 *  host, a long GC). A request later than that is dropped and its requester asks again, which
 *  costs one more round trip. It is also how long used serials are remembered. */
export const CHALLENGE_TTL_MS = 5_000;
/** Serials one sender may have used within CHALLENGE_TTL_MS. A correct requester uses one per
 *  attempt: `trine status` retries every 100 ms while unanswered and `trine logs --follow` reads
 *  every 100 ms, about 20 a second or 100 per TTL together; 256 leaves room for a few commands
 *  at once. Beyond it that sender's requests are dropped (OUT_OF_WINDOW) until its oldest
 *  expire: a faulty member fills its own quota, never another's. It bounds the table at 256
 *  entries per member. */
export const MAX_CHALLENGES_PER_SENDER = 256;

export type Freshness = {
  /** The issuer's incarnation (a daemon's `inc`; a driver's own random epoch). */
  readonly inc: number;
  /** The next serial to issue: every issued one is below it. */
  nextSerial: number;
  /** By sender: the serials it used, each with when it expires. Senders are verified members. */
  readonly used: Map<ProcessId, Map<number, number>>;
};

/** Fresh: answer it. Otherwise the drop code to count it by. */
export type FreshVerdict = 'fresh' | Extract<DropCode, 'REPLAYED' | 'OUT_OF_WINDOW' | 'UNEXPECTED'>;

export function createFreshness(inc: number): Freshness {
  assert(Number.isSafeInteger(inc) && inc >= 0, `freshness: bad incarnation ${inc}`);
  return { inc, nextSerial: 0, used: new Map() };
}

/** A new challenge, for a `challenge` item. Keeps no state but the serial counter. */
export function issueChallenge(f: Freshness, nowMs: number): Challenge {
  assert(Number.isFinite(nowMs) && nowMs >= 0, `freshness: bad clock ${nowMs}`);
  const serial = f.nextSerial++;
  // Whole milliseconds: the wire carries unsigned integers.
  return { inc: f.inc, serial, atMs: Math.floor(nowMs) };
}

/** Whether `from` may be answered on challenge `c`: issued by this incarnation, not older than
 *  CHALLENGE_TTL_MS, not used by `from` before. A fresh one is now used. At most
 *  MAX_CHALLENGES_PER_SENDER steps of pruning, whatever the peer sends. */
export function admitChallenge(f: Freshness, from: ProcessId, c: Challenge, nowMs: number): FreshVerdict {
  // Issued by an earlier incarnation (or another daemon's): a replay across a restart.
  if (c.inc !== f.inc) return 'REPLAYED';
  // Never issued: a correct requester only echoes what it was given.
  if (c.serial >= f.nextSerial || c.atMs > nowMs) return 'UNEXPECTED';
  if (nowMs - c.atMs > CHALLENGE_TTL_MS) return 'REPLAYED';
  let used = f.used.get(from);
  if (used === undefined) f.used.set(from, (used = new Map()));
  if (used.has(c.serial)) return 'REPLAYED';
  pruneExpired(used, nowMs);
  if (used.size >= MAX_CHALLENGES_PER_SENDER) return 'OUT_OF_WINDOW';
  used.set(c.serial, c.atMs + CHALLENGE_TTL_MS);
  assert(used.size <= MAX_CHALLENGES_PER_SENDER, 'freshness: a sender over its quota');
  return 'fresh';
}

/** Serials whose challenge expired can no longer be presented (the age check refuses them). */
function pruneExpired(used: Map<number, number>, nowMs: number): void {
  for (const [serial, expiresAtMs] of used) if (expiresAtMs < nowMs) used.delete(serial);
}
