// Simulator seeds 1..250 of the fixed slice inside `npm test` (issue 2 Tests): four
// files of 250 seeds each, so vitest runs them in parallel. Replay one: npm run sim -- --seed N
import { describe } from 'vitest';
import { seedSlice } from './helpers/seed-slice.ts';

describe('simulator fixed slice', () => seedSlice(1, 250));
