// src/daemon/supervisor.ts: the rules the agents' keeper and the watchdog's supervisor share
// (issue 14 item 4; docs/OPERATIONS.md §6): the first replacement is immediate, further ones back
// off from 100 ms doubling to 2 s and start over once a child was healthy; exit 2 (configuration)
// and exit 4 (stopped on purpose, PROTOCOL §10.11) are never replaced; what a supervised child
// learns of its supervisor from its environment.
import { afterEach, describe, expect, it } from 'vitest';
import { EXIT_SHUTDOWN } from '../../../src/core/constants.ts';
import {
  createBackoff, describeExit, exitVerdict, nextDelay, resetBackoff, RESTART_BACKOFF_MAX_MS, RESTART_BACKOFF_MIN_MS, SUPERVISED_ENV, takeSupervisedEnv,
} from '../../../src/daemon/supervisor.ts';
import { EXIT_CONFIG, EXIT_CRASH, EXIT_TERMINATED } from '../../../src/daemon/run-core.ts';

afterEach(() => {
  delete process.env[SUPERVISED_ENV];
});

describe('issue 14 item 4: the shared supervision rules', () => {
  it('replacement back-off: immediate, then 100 ms doubling to 2 s; immediate again after a healthy run', () => {
    const b = createBackoff(RESTART_BACKOFF_MIN_MS, RESTART_BACKOFF_MAX_MS);
    const delays = Array.from({ length: 8 }, () => nextDelay(b));
    expect(delays).toEqual([0, 100, 200, 400, 800, 1600, 2000, 2000]);
    resetBackoff(b);
    expect([nextDelay(b), nextDelay(b)]).toEqual([0, 100]);
    expect(() => createBackoff(0, 10)).toThrow(RangeError);
  });

  it('exit 2 and exit 4 end the supervision with the same code; a crash, a terminate, a signal or exit 0 is replaced', () => {
    expect(exitVerdict('the watchdog', EXIT_CONFIG)).toEqual({ kind: 'give-up', code: EXIT_CONFIG, why: 'the watchdog exited with a configuration error' });
    expect(exitVerdict('the watchdog', EXIT_SHUTDOWN)).toMatchObject({ kind: 'give-up', code: EXIT_SHUTDOWN });
    for (const code of [0, 1, EXIT_TERMINATED, EXIT_CRASH, null]) expect(exitVerdict('the watchdog', code)).toEqual({ kind: 'replace' });
    expect(describeExit(null, 'SIGKILL', null)).toBe('killed by SIGKILL');
    expect(describeExit(70, null, null)).toBe('exited with code 70');
    expect(describeExit(null, null, 'spawn ENOENT')).toBe('could not start: spawn ENOENT');
  });

  it('a supervised child reads what its supervisor said, and takes it out of the environment of what it starts; garbage still means supervised', () => {
    expect(takeSupervisedEnv()).toBeNull();
    process.env[SUPERVISED_ENV] = JSON.stringify({ restarts: 2, lastExit: 'killed by SIGKILL' });
    expect(takeSupervisedEnv()).toEqual({ restarts: 2, lastExit: 'killed by SIGKILL' });
    expect(process.env[SUPERVISED_ENV]).toBeUndefined();
    process.env[SUPERVISED_ENV] = '{not json';
    expect(takeSupervisedEnv()).toEqual({ restarts: 0, lastExit: null });
    process.env[SUPERVISED_ENV] = JSON.stringify({ restarts: -1, lastExit: 'x'.repeat(1000) });
    expect(takeSupervisedEnv()).toEqual({ restarts: 0, lastExit: 'x'.repeat(200) });
  });
});
