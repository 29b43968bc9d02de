// The shared contract every Transport passes (STYLE.md 3): what the node shell observes when it
// sends frames. Run against the WebSocket transport on loopback (test/integration/
// ws-transport-contract.test.ts) and the simulator's network with its faults off
// (test/sim/network-transport.test.ts). Not a test file itself.
//
// Not covered, because only one implementation can express it (each has its own tests): ordering
// (the simulated network's jitter may reorder frames; a WebSocket keeps them in order), loss,
// duplication, corruption and partitions (simulator), reconnects, binding and bounds (WebSocket).
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ProcessId, Transport } from '../../../src/core/ports.ts';

export type Delivery = { to: ProcessId; from: ProcessId; bytes: Uint8Array };

export type TransportRig = {
  /** Two processes whose transports reach each other once `ready` resolves. */
  readonly ids: readonly [ProcessId, ProcessId];
  transport(id: ProcessId): Transport;
  /** Everything delivered so far, in delivery order. */
  readonly received: Delivery[];
  /** The bytes of a frame `from` sends `to` (distinct for every `n`). */
  frame(from: ProcessId, to: ProcessId, n: number): Uint8Array;
  ready(): Promise<void>;
  /** Lets the world run until `done()`; throws if it never does. */
  until(done: () => boolean): Promise<void>;
  /** Lets everything already under way happen, so a late or duplicate delivery would show. */
  settle(): Promise<void>;
  close(): Promise<void>;
};

const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');

export function transportContract(name: string, make: () => Promise<TransportRig>): void {
  describe(`Transport contract: ${name}`, () => {
    let rig: TransportRig;
    beforeEach(async () => {
      rig = await make();
      await rig.ready();
    });
    afterEach(async () => {
      await rig.close();
    });

    it('frames sent both ways arrive unchanged, once each, attributed to their sender', async () => {
      const [a, b] = rig.ids;
      const sent: Delivery[] = [];
      for (let n = 0; n < 5; n++) {
        for (const [from, to] of [[a, b], [b, a]] as const) {
          const bytes = rig.frame(from, to, n);
          sent.push({ to, from, bytes });
          rig.transport(from).send(to, bytes);
        }
      }
      await rig.until(() => rig.received.length >= sent.length);
      await rig.settle();
      const key = (d: Delivery): string => `${d.from}>${d.to}:${hex(d.bytes)}`;
      expect(rig.received.map(key).sort()).toEqual(sent.map(key).sort());
    });

    it('send never delivers from within the call (the shell is mid-step when it sends)', async () => {
      const [a, b] = rig.ids;
      rig.transport(a).send(b, rig.frame(a, b, 1));
      expect(rig.received).toHaveLength(0);
      await rig.until(() => rig.received.length === 1);
    });

    it('a frame for a process the transport does not know is dropped: no throw, no delivery', async () => {
      const [a, b] = rig.ids;
      expect(() => rig.transport(a).send('x9', rig.frame(a, 'x9', 1))).not.toThrow();
      rig.transport(a).send(b, rig.frame(a, b, 2));
      await rig.until(() => rig.received.length === 1);
      await rig.settle();
      expect(rig.received.map((d) => d.to)).toEqual([b]);
    });
  });
}
