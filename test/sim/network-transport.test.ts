// The simulated network's Transport (src/sim/network.ts) passes the shared Transport contract
// with its faults off, on the simulated clock.
import { NO_NETWORK_FAULTS, SimNetwork } from '../../src/sim/network.ts';
import { SeededRandom } from '../../src/sim/random.ts';
import { Scheduler } from '../../src/sim/scheduler.ts';
import { transportContract, type Delivery, type TransportRig } from '../unit/io/transport-contract.ts';
import { simWait } from './helpers/sim-wait.ts';

transportContract('simulated network', async (): Promise<TransportRig> => {
  const scheduler = new Scheduler();
  const network = new SimNetwork({
    scheduler, rng: new SeededRandom(11), timing: { baseLatencyMs: 1, jitterMeanMs: 2 }, faults: NO_NETWORK_FAULTS,
  });
  const ids = ['r1', 'a1'] as const;
  const received: Delivery[] = [];
  for (const id of ids) network.attach(id, { receive: (bytes, from) => received.push({ to: id, from, bytes }) });
  return {
    ids,
    transport: (id) => network.transport(id, () => []),
    received,
    frame: (from, to, n) => new TextEncoder().encode(`${from}>${to}#${n}`),
    ready: async () => {},
    ...simWait(scheduler),
    close: async () => {},
  };
});
