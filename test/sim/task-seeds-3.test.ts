// Task seeds 501..750 of the fixed slice inside `npm test` (issue 3 Tests): four files
// of 250 seeds, so vitest runs them in parallel. Replay one: npm run sim -- --tasks --seed N
import { describe } from 'vitest';
import { taskSeedSlice } from './helpers/seed-slice.ts';

describe('simulator task slice', () => taskSeedSlice(501, 250));
