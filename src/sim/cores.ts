// The real protocol cores as the simulator builds them: the composition root of a simulated
// cluster, the twin of what the daemons do with real drivers (DESIGN.md §3).
import { createAgent } from '../core/agent.ts';
import { createReplica } from '../core/replica.ts';
import type { CoreFactories } from './world.ts';

export const realCores: CoreFactories = {
  replica: (opts) => createReplica(opts),
  agent: (opts) => createAgent(opts),
};
