// A tiny stand-in core for testing the simulator's own machinery (network, clock, scheduler,
// admission check) without the real protocol: it heartbeats every peer and sends lane-0
// notices once, with no retransmission — so loss is visible to the liveness invariant.
import type { Core, CoreEffect, CoreInput, Membership } from '../../../src/core/node.ts';
import type { ProcessId } from '../../../src/core/ports.ts';
import type { CoreFactories, ReplicaCore } from '../../../src/sim/world.ts';

export const FAKE_HEARTBEAT_MS = 10;

export function createFakeCore(id: ProcessId, membership: Membership, inc: number): ReplicaCore {
  const peers = [...membership.replicas, ...membership.agents.map((a) => a.id)].filter((p) => p !== id);
  let nextBeatMs = 0;
  let counter = 0;
  let seq = 0;
  let received = 0;
  return {
    id,
    step(input: CoreInput): CoreEffect[] {
      const out: CoreEffect[] = [];
      switch (input.type) {
        case 'tick':
          if (input.nowMs >= nextBeatMs) {
            nextBeatMs = input.nowMs + FAKE_HEARTBEAT_MS;
            counter++;
            for (const to of peers) {
              out.push({ type: 'send', to, item: { type: 'hb', inc, counter, info: { type: 'agent', gssnDelivered: 0, csnSent: 0 } } });
            }
          }
          break;
        case 'notice':
          out.push({ type: 'send', to: input.to, item: { type: 'ptp', srcInc: inc, destInc: 0, seq: ++seq, ackSeq: 0, body: { type: 'notice', text: input.text } } });
          break;
        case 'frame':
          received++;
          for (const item of input.frame.items) {
            if (item.type === 'ptp' && item.body !== null && item.body.type === 'notice') {
              out.push({ type: 'deliver.notice', from: input.frame.from, text: item.body.text });
            }
          }
          break;
        default:
          break;
      }
      return out;
    },
    nextWakeMs: () => nextBeatMs,
    digestHex: () => '00',
    rsn: () => 0,
    phase: () => 'serving' as const,
    // For tests: how many frames this incarnation accepted.
    get received() {
      return received;
    },
  } as ReplicaCore & { received: number };
}

export const fakeCores: CoreFactories = {
  replica: ({ id, membership, inc }) => createFakeCore(id, membership, inc),
  agent: ({ id, membership, inc }) => createFakeCore(id, membership, inc),
};
