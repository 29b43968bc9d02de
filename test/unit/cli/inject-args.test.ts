// `trine inject MODE ARGS…`: the mode, its arguments and the names in them, checked against
// cluster.json before anything is signalled or sent (cli/inject-args.ts, docs/OPERATIONS.md §7).
import { describe, expect, it } from 'vitest';
import { modeList, planInject, requireMode, type InjectFlags } from '../../../cli/inject-args.ts';
import { CliError, EXIT_USAGE } from '../../../cli/errors.ts';
import { clusterIds, planCluster } from '../../../src/io/cluster-dir.ts';
import { INJECT_MODES } from '../../../src/io/inject-modes.ts';

const ids = clusterIds(4).all;
const keys = new Map(ids.map((id, i) => [id, new Uint8Array(32).fill(i + 1)]));
// One port per listener: r1..r3, the watchdog and the spare replicas.
const config = planCluster({ nodes: 4, ports: clusterIds(4).listeners.map((_, i) => 7001 + i), allowInject: true }, keys);

const plan = (mode: string, ...args: string[]) => planInject(requireMode(mode, args), args, config);
const planWith = (flags: InjectFlags, mode: string, ...args: string[]) => planInject(requireMode(mode, args), args, config, flags);

/** The CliError `fn` throws: exit code and message. */
function refusal(fn: () => unknown): { code: number; message: string } {
  try {
    fn();
  } catch (e) {
    if (e instanceof CliError) return { code: e.exitCode, message: e.message };
    throw e;
  }
  throw new Error('expected a CliError');
}

describe('inject modes and their arguments', () => {
  it('an unknown mode is refused with exit 2, listing every mode with its arguments', () => {
    const r = refusal(() => requireMode('explode', []));
    expect(r.code).toBe(EXIT_USAGE);
    expect(r.message).toBe(`unknown inject mode "explode": use one of ${modeList()}`);
    for (const m of INJECT_MODES) expect(r.message).toContain(`${m.mode} ${m.usage}`);
    expect(r.message).toContain('kill-replica R, kill-agent N, kill-node N, hang PID, resume PID, drop A B, delay A B MS, heal A B');
  });

  it('a wrong number of arguments says what the mode takes, with an example', () => {
    const none = refusal(() => requireMode('kill-replica', []));
    expect(none.code).toBe(EXIT_USAGE);
    expect(none.message).toBe('inject kill-replica takes R (SIGKILL replica R), got no arguments: e.g. `trine inject kill-replica r2`');
    const many = refusal(() => requireMode('drop', ['r1', 'r2', 'r3']));
    expect(many.message).toMatch(/^inject drop takes A B .*got r1 r2 r3: e\.g\. `trine inject drop r1 r3`$/);
    expect(refusal(() => requireMode('delay', ['r1', 'r2'])).message).toContain('takes A B MS');
  });

  it('kill-replica names a replica of the cluster', () => {
    expect(plan('kill-replica', 'r2')).toEqual({ by: 'cli', mode: 'kill-replica', replica: 'r2' });
    const r = refusal(() => plan('kill-replica', 'a2'));
    expect(r).toEqual({ code: EXIT_USAGE, message: 'inject kill-replica: "a2" is not a replica of this cluster: use one of r1, r2, r3, r4, r5, r6, r7, r8, r9' });
  });

  it('kill-agent and kill-node take a node nK or its agent aK', () => {
    expect(plan('kill-agent', 'n3')).toEqual({ by: 'cli', mode: 'kill-agent', agent: 'a3', node: 'n3' });
    expect(plan('kill-agent', 'a4')).toEqual({ by: 'cli', mode: 'kill-agent', agent: 'a4', node: 'n4' });
    expect(plan('kill-node', 'a1')).toEqual({ by: 'cli', mode: 'kill-node', node: 'n1' });
    const r = refusal(() => plan('kill-node', 'n9'));
    expect(r.code).toBe(EXIT_USAGE);
    expect(r.message).toBe('inject kill-node: "n9" is not a node of this cluster: use one of n1, n2, n3, n4 (or its agent a1, a2, …)');
  });

  it('hang and resume take a pid, a daemon id or a task process; anything else is refused', () => {
    expect(plan('hang', '4242')).toEqual({ by: 'cli', mode: 'hang', target: '4242' });
    expect(plan('resume', 't3/0')).toEqual({ by: 'cli', mode: 'resume', target: 't3/0' });
    expect(plan('hang', 'scc')).toEqual({ by: 'cli', mode: 'hang', target: 'scc' });
    for (const bad of ['0', '-5', 'r10', 't0/1', 'op', '12ab']) {
      const r = refusal(() => plan('hang', bad));
      expect(r.code).toBe(EXIT_USAGE);
      expect(r.message).toContain('is neither a pid, a daemon (r1, r2, r3, scc, r4, r5, r6, r7, r8, r9, a1, a2, a3, a4) nor a task process (t3/0)');
    }
  });

  it('drop, delay and heal go to the sender when the operator can reach it, else to the replica at the other end', () => {
    expect(plan('drop', 'r1', 'r3')).toEqual({ by: 'daemon', mode: 'drop', args: ['r1', 'r3'], target: 'r1' });
    expect(plan('drop', 'scc', 'r2')).toEqual({ by: 'daemon', mode: 'drop', args: ['scc', 'r2'], target: 'scc' });
    expect(plan('delay', 'a2', 'r3', '250')).toEqual({ by: 'daemon', mode: 'delay', args: ['a2', 'r3', '250'], target: 'r3' });
    expect(plan('heal', 'r2', 'a4')).toEqual({ by: 'daemon', mode: 'heal', args: ['r2', 'a4'], target: 'r2' });
  });

  it('drop, delay and heal need two daemons that exchange frames, and delay a sane MS', () => {
    expect(refusal(() => plan('drop', 'a1', 'a2')).message).toBe(
      'inject drop: a1 and a2 exchange no frames: one end must be a replica (replicas talk to each other, to every agent and to the watchdog)',
    );
    expect(refusal(() => plan('drop', 'a1', 'scc')).message).toContain('exchange no frames');
    expect(refusal(() => plan('drop', 'r1', 'r1')).message).toContain('exchange no frames');
    expect(refusal(() => plan('drop', 'op', 'r1')).message).toBe('inject drop: "op" is not a daemon of this cluster: use one of r1, r2, r3, scc, r4, r5, r6, r7, r8, r9, a1, a2, a3, a4');
    for (const ms of ['0', '60001', '1.5', 'soon', '-1']) {
      const r = refusal(() => plan('delay', 'r1', 'r2', ms));
      expect(r.code).toBe(EXIT_USAGE);
      expect(r.message).toBe(`inject delay: MS must be an integer from 1 to 60000, got ${JSON.stringify(ms)}`);
    }
  });

  it('corrupt-replica and byzantine-replica are sent to the replica they name', () => {
    expect(plan('corrupt-replica', 'r2')).toEqual({ by: 'daemon', mode: 'corrupt-replica', args: ['r2'], target: 'r2' });
    expect(plan('byzantine-replica', 'r3', 'bad-digest')).toEqual({ by: 'daemon', mode: 'byzantine-replica', args: ['r3', 'bad-digest'], target: 'r3' });
    expect(refusal(() => plan('corrupt-replica', 'scc')).message).toBe('inject corrupt-replica: "scc" is not a replica of this cluster: use one of r1, r2, r3, r4, r5, r6, r7, r8, r9');
  });

  it('slow T --share P [--for MS] goes to the agent of T\'s node: a node or its agent named here, a task process resolved later', () => {
    expect(planWith({ share: '25' }, 'slow', 't3/0')).toEqual({ by: 'agent', mode: 'slow', args: ['t3/0', '25'], at: { proc: 't3/0' } });
    expect(planWith({ share: '1', for: '5000' }, 'slow', 'n2')).toEqual({ by: 'agent', mode: 'slow', args: ['n2', '1', '5000'], at: { node: 'n2', agent: 'a2' } });
    expect(planWith({ share: '99', for: '100' }, 'slow', 'a4')).toEqual({ by: 'agent', mode: 'slow', args: ['a4', '99', '100'], at: { node: 'n4', agent: 'a4' } });
    expect(planWith({ share: '50', for: '3600000' }, 'slow', 't12/7')).toMatchObject({ args: ['t12/7', '50', '3600000'] });
  });

  it('heal T with one argument ends a slowness at T\'s agent; heal A B is still a link heal', () => {
    expect(plan('heal', 't3/0')).toEqual({ by: 'agent', mode: 'heal', args: ['t3/0'], at: { proc: 't3/0' } });
    expect(plan('heal', 'n3')).toEqual({ by: 'agent', mode: 'heal', args: ['n3'], at: { node: 'n3', agent: 'a3' } });
    expect(plan('heal', 'r1', 'r3')).toEqual({ by: 'daemon', mode: 'heal', args: ['r1', 'r3'], target: 'r1' });
    expect(refusal(() => plan('heal', 'r2')).message).toBe(
      'inject heal: "r2" is neither a task process (t3/0) nor a node of this cluster (n1, n2, n3, n4): e.g. `trine inject heal t3/0`',
    );
    expect(refusal(() => requireMode('heal', [])).message).toMatch(/^inject heal takes A B \| T \(.*\), got no arguments: e\.g\. `trine inject heal r1 r3`$/);
    expect(refusal(() => requireMode('heal', ['r1', 'r2', 'r3'])).code).toBe(EXIT_USAGE);
  });

  it('slow needs --share from 1 to 99 and a --for from 100 to 3600000 ms; each refusal says what to type', () => {
    const none = refusal(() => planWith({}, 'slow', 't3/0'));
    expect(none).toEqual({ code: EXIT_USAGE, message: 'inject slow needs --share P, the share of CPU t3/0 keeps, an integer from 1 to 99: e.g. `trine inject slow t3/0 --share 25`' });
    for (const share of ['0', '100', '-5', '2.5', 'half', '', '025x']) {
      const r = refusal(() => planWith({ share }, 'slow', 'n1'));
      expect(r.code).toBe(EXIT_USAGE);
      expect(r.message).toBe(`inject slow: --share must be an integer from 1 to 99 (the % of CPU n1 keeps), got ${JSON.stringify(share)}: e.g. \`--share 25\``);
    }
    for (const ms of ['99', '0', '3600001', '5s', '1e4', '-100']) {
      const r = refusal(() => planWith({ share: '25', for: ms }, 'slow', 't3/0'));
      expect(r.code).toBe(EXIT_USAGE);
      expect(r.message).toBe(
        `inject slow: --for must be an integer number of ms from 100 to 3600000, got ${JSON.stringify(ms)}: e.g. \`--for 5000\` for 5 s, or no --for to slow it until \`trine inject heal t3/0\``,
      );
    }
  });

  it('slow refuses a target that is neither a task process nor a node, and the wrong number of targets', () => {
    for (const bad of ['r1', 'scc', 'n9', 't0/1', 't3', '4242', 't3/01']) {
      const r = refusal(() => planWith({ share: '25' }, 'slow', bad));
      expect(r.code).toBe(EXIT_USAGE);
      expect(r.message).toBe(`inject slow: ${JSON.stringify(bad)} is neither a task process (t3/0) nor a node of this cluster (n1, n2, n3, n4): e.g. \`trine inject slow t3/0 --share 25\``);
    }
    expect(refusal(() => requireMode('slow', [])).message).toBe(
      "inject slow takes T --share P [--for MS] [--period MS] (run task process T (t3/0), or every task process of node T (n2), at P % CPU, by its node's agent (until heal T)), " +
        'got no arguments: e.g. `trine inject slow t3/0 --share 25`',
    );
    expect(refusal(() => requireMode('slow', ['t3/0', 't3/1'])).code).toBe(EXIT_USAGE);
  });

  it('--share, --for and --period go with slow only', () => {
    for (const flags of [{ share: '25' }, { for: '5000' }, { period: '500' }]) {
      const r = refusal(() => planWith(flags, 'hang', 't3/0'));
      expect(r).toEqual({
        code: EXIT_USAGE, message: 'inject hang takes no --share, --for or --period: they go with inject slow, e.g. `trine inject slow t3/0 --share 25 --for 5000 --period 500`',
      });
    }
    expect(refusal(() => planWith({ share: '25' }, 'heal', 't3/0')).message).toMatch(/^inject heal takes no --share, --for or --period/);
    expect(refusal(() => planWith({ period: '500' }, 'heal', 't3/0')).message).toMatch(/^inject heal takes no --share, --for or --period/);
    expect(refusal(() => planWith({ period: '500' }, 'drop', 'r1', 'r3')).code).toBe(EXIT_USAGE);
  });

  it('slow --period MS: sent after FOR (empty without --for); without it the arguments stay [T, P] or [T, P, FOR]', () => {
    expect(planWith({ share: '20', period: '500' }, 'slow', 't3/0')).toEqual({ by: 'agent', mode: 'slow', args: ['t3/0', '20', '', '500'], at: { proc: 't3/0' } });
    expect(planWith({ share: '20', for: '5000', period: '500' }, 'slow', 'n2')).toMatchObject({ args: ['n2', '20', '5000', '500'] });
    expect(planWith({ share: '20', period: '20' }, 'slow', 'n2')).toMatchObject({ args: ['n2', '20', '', '20'] });
    expect(planWith({ share: '20', period: '10000', for: '10000' }, 'slow', 'n2')).toMatchObject({ args: ['n2', '20', '10000', '10000'] });
    // The default typed out is still sent: the agent reads it the same.
    expect(planWith({ share: '20', period: '100' }, 'slow', 'n2')).toMatchObject({ args: ['n2', '20', '', '100'] });
  });

  it('slow --period must be 20 to 10000 ms, and --for at least one period; each refusal says what to type', () => {
    for (const period of ['19', '0', '10001', '2s', '1e3', '-100', '', '250.5']) {
      const r = refusal(() => planWith({ share: '25', period }, 'slow', 't3/0'));
      expect(r).toEqual({
        code: EXIT_USAGE,
        message: `inject slow: --period must be an integer number of ms from 20 to 10000 (one run + stop), got ${JSON.stringify(period)}: e.g. \`--period 2000\` to stop t3/0 for seconds at a time, or no --period for 100`,
      });
    }
    const short = refusal(() => planWith({ share: '25', period: '2000', for: '1999' }, 'slow', 'n1'));
    expect(short).toEqual({
      code: EXIT_USAGE,
      message: 'inject slow: --for must be an integer number of ms from 2000 (one --period) to 3600000, got "1999": e.g. `--for 5000` for 5 s, or no --for to slow it until `trine inject heal n1`',
    });
    // A short period lets a short --for through: one period is the floor, whatever it is.
    expect(planWith({ share: '25', period: '20', for: '20' }, 'slow', 'n1')).toMatchObject({ args: ['n1', '25', '20', '20'] });
    expect(refusal(() => planWith({ share: '25', period: '20', for: '19' }, 'slow', 'n1')).message).toContain('from 20 (one --period) to 3600000');
    // The share is checked first, then the period, then --for.
    expect(refusal(() => planWith({ share: '0', period: '5', for: '1' }, 'slow', 'n1')).message).toMatch(/^inject slow: --share/);
    expect(refusal(() => planWith({ share: '25', period: '5', for: '1' }, 'slow', 'n1')).message).toMatch(/^inject slow: --period/);
  });
});
