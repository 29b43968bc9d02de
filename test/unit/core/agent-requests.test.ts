// A node agent's own requests (src/core/agent-requests.ts; spec §3.6 G6, PROTOCOL §5.6),
// stepped by hand on its state record the way test/unit/core/link.test.ts steps two links: each
// kept until f+1 replicas acknowledge it, timed for the fallback, sent to the backups and then
// to every member when that takes too long.
import { describe, expect, it } from 'vitest';
import { onCsnAck, requestTimers, sendRequest } from '../../../src/core/agent-requests.ts';
import { unreceivedFallbackMs, type AgentState } from '../../../src/core/agent-state.ts';
import { DEFAULT_TIMING, MAX_FALLBACK_MS } from '../../../src/core/constants.ts';
import type { CoreEffect } from '../../../src/core/node.ts';
import { freshAgent as fresh } from './agent-state-fixture.ts';

const events = (out: CoreEffect[]) => out.flatMap((e) => (e.type === 'log' ? [e.event] : []));
const join = { type: 'node.join', slots: 4, resync: false } as const;

function stepTimers(s: AgentState, nowMs: number): CoreEffect[] {
  const out: CoreEffect[] = [];
  requestTimers(s, nowMs, out);
  return out;
}

describe('agent requests (spec §3.6 G6)', () => {
  it('a request is kept until f+1 = 2 replicas acknowledge it, and the first acknowledgement times the group', () => {
    const s = fresh();
    sendRequest(s, join, 0, []);
    expect([s.csnSent, s.pending.size]).toEqual([1, 1]);
    onCsnAck(s, 'r1', 1, 30);
    expect([s.csnAcked, s.pending.size]).toEqual([0, 1]);
    onCsnAck(s, 'r2', 1, 50);
    expect([s.csnAcked, s.pending.size, s.ackTimeMs]).toEqual([1, 0, 50]);
  });

  it('an acknowledgement of a CSN never sent, or not above the last from that replica, counts for nothing', () => {
    const s = fresh();
    sendRequest(s, join, 0, []);
    onCsnAck(s, 'r1', 2, 10);
    onCsnAck(s, 'r2', 2, 10);
    expect(s.csnAckBy.size).toBe(0);
    expect(s.csnAcked).toBe(0);
  });

  it('falls back to the backups after three retransmissions to the primary, then resends to every member, less and less often', () => {
    const s = fresh();
    sendRequest(s, join, 0, []);
    const fallbackAt = unreceivedFallbackMs(s);
    expect(fallbackAt).toBe(4 * DEFAULT_TIMING.retransmitMs);
    expect(events(stepTimers(s, fallbackAt - 1))).toEqual([]);
    expect(events(stepTimers(s, fallbackAt))).toEqual(['agent.fallback']);
    const p = s.pending.get(1);
    expect(p?.fellBack).toBe(true);
    expect(p?.retryAtMs).toBe(fallbackAt + MAX_FALLBACK_MS / 4);
    expect(events(stepTimers(s, fallbackAt + MAX_FALLBACK_MS / 4))).toEqual(['agent.resend']);
    expect(s.pending.get(1)?.retryAtMs).toBe(fallbackAt + MAX_FALLBACK_MS / 4 + Math.min(MAX_FALLBACK_MS, 2 * (fallbackAt + MAX_FALLBACK_MS / 4)));
  });
});
