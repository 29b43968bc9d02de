// N-Queens as work units (examples/nqueens/nqueens-core.ts, the rollback version's kernel; issue
// 17 item 4): the units are nqueens.ts's, and their counts add up to the known answers.
import { describe, expect, it } from 'vitest';
import { countCompletions, KNOWN_SOLUTIONS, workUnits } from '../../../examples/nqueens/nqueens-core.ts';

describe('N-Queens work units (issue 17 item 4)', () => {
  it('n = 12 splits into nqueens.ts\'s 110 units at depth 2 and 756 at depth 3', () => {
    expect(workUnits(12, 2)).toHaveLength(110);
    // nqueens.ts's header says 980 at depth 3; its own prefixes() makes 756, as here.
    expect(workUnits(12, 3)).toHaveLength(756);
    expect(workUnits(12, 2)[0]).toEqual([0, 2]);
  });

  it('the units\' counts add up to the known number of solutions, n = 1 … 10, at every depth', () => {
    for (let n = 1; n <= 10; n++) {
      for (let depth = 1; depth <= Math.min(n, 3); depth++) {
        const total = workUnits(n, depth).reduce((sum, u) => sum + countCompletions(n, u), 0);
        expect(total, `n=${n} depth=${depth}`).toBe(KNOWN_SOLUTIONS[n]);
      }
    }
  });

  it('n = 12 gives 14,200', () => {
    expect(workUnits(12, 2).reduce((sum, u) => sum + countCompletions(12, u), 0)).toBe(14200);
  });

  it('a prefix whose queens attack each other has no completion', () => {
    expect(countCompletions(8, [0, 1])).toBe(0);
    expect(countCompletions(8, [3, 3])).toBe(0);
    expect(countCompletions(8, [])).toBe(92);
  });
});
