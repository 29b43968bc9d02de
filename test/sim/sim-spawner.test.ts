// The simulator's Spawner (src/sim/sim-spawner.ts) passes the shared Spawner contract on the
// simulated clock: `until` advances the scheduler, never the wall clock.
import { SeededRandom } from '../../src/sim/random.ts';
import { Scheduler } from '../../src/sim/scheduler.ts';
import { SimSpawner } from '../../src/sim/sim-spawner.ts';
import { spawnerContract, type SpawnerRig } from '../unit/io/spawner-contract.ts';
import { simWait } from './helpers/sim-wait.ts';

spawnerContract('simulator', (): SpawnerRig => {
  const scheduler = new Scheduler();
  const spawner = new SimSpawner('a1', scheduler, new SeededRandom(7), { next: 100 });
  return {
    spawner,
    exits: (code) => ({ file: 'sim-work', args: ['20', String(code)] }),
    runs: () => ({ file: 'sim-forever', args: [] }),
    missing: () => ({ file: 'no-such-program', args: [] }),
    spec: (program, vpid) => ({ ...program, vpid, taskId: 't1', cwd: '/', env: {}, logDir: '/logs' }),
    ...simWait(scheduler),
    close: async () => {},
  };
});
