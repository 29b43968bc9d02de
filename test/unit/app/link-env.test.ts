// Reading the agent's hand-off (src/app/link/env.ts; spec §7): outside Trine, init fails with
// a typed error that names the missing variable and says what to do.
import { describe, expect, it } from 'vitest';
import { Link, LinkError } from '../../../src/app/index.ts';
import { readLinkEnv } from '../../../src/app/link/env.ts';

const GOOD = { TRINE_AGENT_SOCKET: '/tmp/x.sock', TRINE_TASK: 't3', TRINE_VPID: '2', TRINE_TOKEN: 'a'.repeat(32) };

describe('readLinkEnv', () => {
  it('reads the four variables', () => {
    expect(readLinkEnv(GOOD)).toEqual({ socketPath: '/tmp/x.sock', task: 't3', vpid: 2, token: 'a'.repeat(32) });
  });

  for (const name of Object.keys(GOOD)) {
    it(`names ${name} when it is missing`, () => {
      const env: Record<string, string | undefined> = { ...GOOD, [name]: undefined };
      const e = (() => {
        try {
          readLinkEnv(env);
        } catch (x) {
          return x;
        }
        return null;
      })();
      expect(e).toBeInstanceOf(LinkError);
      expect(e).toMatchObject({ code: 'NOT_IN_TRINE' });
      expect((e as Error).message).toContain(`${name} is not set`);
      expect((e as Error).message).toContain('started by Trine');
    });
  }

  it('a task submitted without --linked is told to submit again with --linked (issue 19: the hint named a `trine run` that does not exist)', () => {
    const plain = { TRINE_TASK: 't4', TRINE_VPID: '0', TRINE_SIZE: '2' };
    expect(() => readLinkEnv(plain)).toThrow(expect.objectContaining({
      code: 'NOT_IN_TRINE', message: expect.stringContaining('task t4 was submitted without --linked'),
    }));
    expect(() => readLinkEnv({})).toThrow(expect.objectContaining({ message: expect.stringContaining('`trine submit --linked -n 4 -- node app.js`') }));
  });

  it('rejects malformed values with BAD_ENV', () => {
    expect(() => readLinkEnv({ ...GOOD, TRINE_VPID: '-1' })).toThrow(expect.objectContaining({ code: 'BAD_ENV' }));
    expect(() => readLinkEnv({ ...GOOD, TRINE_VPID: '4294967295' })).toThrow(expect.objectContaining({ code: 'BAD_ENV' }));
    expect(() => readLinkEnv({ ...GOOD, TRINE_TASK: 'x' })).toThrow(expect.objectContaining({ code: 'BAD_ENV' }));
    expect(() => readLinkEnv({ ...GOOD, TRINE_TOKEN: 'zz' })).toThrow(expect.objectContaining({ code: 'BAD_ENV' }));
  });

  it('Link.init outside Trine rejects with NOT_IN_TRINE and starts nothing', async () => {
    await expect(Link.init({ env: {} })).rejects.toMatchObject({ code: 'NOT_IN_TRINE', message: expect.stringContaining('TRINE_AGENT_SOCKET is not set') });
  });
});

describe('Link.init options', () => {
  it('refuses a malformed endpoint before connecting', async () => {
    const env = { ...GOOD, TRINE_AGENT_SOCKET: '/nonexistent/agent.sock' };
    await expect(Link.init({ env, endpoint: 'x'.repeat(65) })).rejects.toMatchObject({ code: 'BAD_OPTION' });
    await expect(Link.init({ env, endpoint: 'host name:1' })).rejects.toMatchObject({ code: 'BAD_OPTION' });
  });

  it('an agent socket that is not there fails init with LINK_LOST naming the path', async () => {
    const env = { ...GOOD, TRINE_AGENT_SOCKET: '/nonexistent/agent.sock' };
    await expect(Link.init({ env })).rejects.toMatchObject({ code: 'LINK_LOST', message: expect.stringContaining('/nonexistent/agent.sock') });
  });
});
