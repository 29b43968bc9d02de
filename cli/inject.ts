// `trine inject MODE ARGS…` (issue 5 item 5; docs/OPERATIONS.md §7): injects a fault into a
// live local cluster started with `trine up --allow-inject`. Process-level faults are done here,
// with signals to the pids the cluster's run dir records (local cluster: same host): SIGKILL a
// replica, an agent (its keeper replaces it) or a whole node (src/io/reset-driver.ts
// powerOffNode, the power-off half of a node reset, replica included); SIGSTOP / SIGCONT one of
// the cluster's own processes. Every other mode is sent to the daemon it names over the operator
// channel (`inject` → `inject.reply`, cli/status-client.ts) and its answer printed. `slow T` and
// `heal T` go to the agent of T's node, which does the slowing on its own host: the node named,
// or for a task process the node the cluster view (two agreeing replicas) says it runs on. An
// agent listens where cluster.json says (several hosts) or, on a one-host cluster, on the
// loopback port it recorded in run/<agent>.inject-port.
//
// Refused, with what to do, when: the mode or its arguments are wrong (exit 2); no cluster is
// running, it was started without --allow-inject, the named process is not running, the daemon
// refused or did not answer in time, or a kill did not take (exit 1).
//
// What was done is one line, or with --json one `trine.inject/1` object (cli/json-out.ts): the
// mode, who did it (cli, daemon, agent), the target, its pid, and the line as `message`.
import type { ProcessId } from '../src/core/ports.ts';
import {
  isClusterProcess, loadCluster, LOOPBACK_HOST, readPidFiles, runningProcesses, type Cluster,
} from '../src/io/cluster-dir.ts';
import { powerOffNode, ResetError } from '../src/io/reset-driver.ts';
import {
  listKeeperChildPids, listProcsFiles, listSupervisedPids, liveRecordedProcs, readInjectPort, readKeeperChildPid, signalGroup, waitGone,
} from '../src/io/run-records.ts';
import { CliError, EXIT_FAILED, EXIT_OK, EXIT_USAGE } from './errors.ts';
import { emitJson, SCHEMAS } from './json-out.ts';
import { PID_PATTERN, planInject, requireMode, TASK_PROC_PATTERN, type InjectFlags, type InjectPlan } from './inject-args.ts';
import { readClusterView } from './op-client.ts';
import { agentListeners, OperatorClient } from './status-client.ts';
import { INJECT_MODES } from '../src/io/inject-modes.ts';

/** How long `trine inject` waits for a daemon's answer: it answers within a turn of its event
 *  loop; a second is already a hung or overloaded daemon, 3 s leaves room on a loaded host. */
export const INJECT_TIMEOUT_MS = 3_000;
/** Time a SIGKILLed process gets to disappear before the kill is reported as failed. */
export const INJECT_KILL_WAIT_MS = 2_000;

export type InjectOptions = { dir?: string | undefined; mode: string; args: string[]; timeoutMs?: number | undefined; flags?: InjectFlags; json?: boolean | undefined };

/** What an inject did: who did it, to what (a daemon id, a node, `t3/0`, a pid), the pid it
 *  signalled if any, what kill-node killed, and the line printed without --json. */
export type InjectResult = { by: 'cli' | 'daemon' | 'agent'; target: string; pid: number | null; killed: string[]; message: string };

const done = (by: InjectResult['by'], target: string, pid: number | null, message: string, killed: string[] = []): InjectResult => ({ by, target, pid, killed, message });
const daemonModes = (): string => INJECT_MODES.filter((m) => m.by === 'daemon').map((m) => m.mode).join(', ');

export async function inject(opts: InjectOptions): Promise<number> {
  const result = await performInject(opts);
  if (opts.json === true) emitJson(SCHEMAS.inject, { mode: opts.mode, args: opts.args, ...result });
  else process.stdout.write(`${result.message}\n`);
  return EXIT_OK;
}

async function performInject(opts: InjectOptions): Promise<InjectResult> {
  const spec = requireMode(opts.mode, opts.args);
  const cluster = loadCluster(opts.dir);
  const dir = cluster.dir;
  // An operator bundle of a cluster of several hosts (OPERATIONS §8.4): its daemons run on other
  // hosts, so no pid file is here, and only the daemon modes reach them (over the network).
  const remote = readPidFiles(dir).length === 0 && Object.keys(agentListeners(cluster)).length > 0;
  if (!remote && runningProcesses(dir).length === 0) {
    throw new CliError(`no cluster is running in ${dir}: start one with \`trine up --allow-inject --dir ${dir}\``, EXIT_FAILED, 'NOT_RUNNING');
  }
  if (cluster.config.allowInject !== true) {
    throw new CliError(
      `the cluster in ${dir} was started without --allow-inject, so it accepts no injected faults: restart it with \`trine down --dir ${dir}\` and \`trine up --allow-inject --dir ${dir}\``,
      EXIT_FAILED,
      'INJECT_NOT_ALLOWED',
    );
  }
  const plan = planInject(spec, opts.args, cluster.config, opts.flags ?? {});
  switch (plan.by) {
    case 'cli':
      if (remote) {
        throw new CliError(
          `inject ${plan.mode} signals a local process, and the daemons of this cluster run on other hosts: do it on the host itself ` +
            `(kill -9, kill -STOP, or a power cycle or \`ip link set … down\` for a whole node); from here the daemon modes work: ${daemonModes()}`,
          EXIT_USAGE,
        );
      }
      return performLocally(cluster, plan);
    case 'daemon':
      return askDaemon(cluster, plan, opts.timeoutMs ?? INJECT_TIMEOUT_MS, remote);
    case 'agent':
      return askAgent(cluster, plan, opts.timeoutMs ?? INJECT_TIMEOUT_MS, remote);
  }
}

// ---- process-level faults -------------------------------------------------------------------

/** A live process of the cluster: what it is, and the names `hang`/`resume` know it by. */
export type ClusterProcess = { what: string; pid: number; names: string[] };

/** Every live process of the cluster in `cluster.dir`, from its run-dir records: the daemons
 *  `trine up` started (replicas, watchdog, keepers), the keepers' agents and standbys, and the
 *  task processes the agents recorded (same pid and start time). */
export function clusterProcesses(cluster: Cluster): ClusterProcess[] {
  const dir = cluster.dir;
  const kindOf = (id: ProcessId) => cluster.config.processes.find((p) => p.id === id)?.kind ?? null;
  const out: ClusterProcess[] = [];
  for (const { id, pid } of runningProcesses(dir)) {
    const kind = kindOf(id);
    if (kind === 'agent') out.push({ what: `${id}'s keeper`, pid, names: [] });
    else if (kind === 'watchdog') out.push({ what: `watchdog ${id}'s supervisor`, pid, names: [] });
    else out.push({ what: `replica ${id}`, pid, names: [id] });
  }
  // The watchdog itself runs under its supervisor (src/daemon/supervisor.ts), recorded apart.
  for (const { id, pid } of listSupervisedPids(dir)) {
    if (pid !== null && isClusterProcess(pid, dir, id)) out.push({ what: `watchdog ${id}`, pid, names: [id] });
  }
  for (const { id, role, pid } of listKeeperChildPids(dir)) {
    if (pid !== null && isClusterProcess(pid, dir, id)) out.push({ what: `${id}'s ${role}`, pid, names: role === 'agent' ? [id] : [] });
  }
  for (const f of listProcsFiles(dir)) {
    for (const p of liveRecordedProcs(dir, f.id)) out.push({ what: `task process ${p.task}/${p.vpid}`, pid: p.pid, names: [`${p.task}/${p.vpid}`] });
  }
  return out;
}

/** The live cluster process `target` names (a pid, a daemon id, or `t3/0`). */
export function resolveTarget(cluster: Cluster, mode: string, target: string): ClusterProcess {
  const all = clusterProcesses(cluster);
  const byPid = PID_PATTERN.test(target);
  const found = all.find((p) => (byPid ? p.pid === Number(target) : p.names.includes(target)));
  if (found !== undefined) return found;
  if (byPid) {
    throw new CliError(
      `pid ${target} is not a process of the cluster in ${cluster.dir}: inject ${mode} acts only on its daemons (pids in run/*.pid, run/*.supervised-pid, ` +
        'run/*.agent-pid) and the task processes its agents run (`trine ps`)',
      EXIT_USAGE,
    );
  }
  const what = TASK_PROC_PATTERN.test(target) ? `task process ${target}` : target;
  throw new CliError(`${what} is not running in the cluster in ${cluster.dir}: see \`trine status\` and \`trine ps\``, EXIT_FAILED);
}

async function sigkill(pid: number, what: string): Promise<void> {
  signalGroup(pid, 'SIGKILL');
  const left = await waitGone([pid], INJECT_KILL_WAIT_MS);
  if (left.length > 0) throw new CliError(`${what} (pid ${pid}) is still running ${INJECT_KILL_WAIT_MS} ms after SIGKILL: check it with ps`, EXIT_FAILED);
}

async function performLocally(cluster: Cluster, plan: Extract<InjectPlan, { by: 'cli' }>): Promise<InjectResult> {
  const dir = cluster.dir;
  switch (plan.mode) {
    case 'kill-replica': {
      const pid = readPidFiles(dir).find((r) => r.id === plan.replica)?.pid ?? null;
      if (pid === null || !isClusterProcess(pid, dir, plan.replica)) {
        throw new CliError(`replica ${plan.replica} is not running (no live process in run/${plan.replica}.pid): nothing to kill; see \`trine status\``, EXIT_FAILED);
      }
      await sigkill(pid, `replica ${plan.replica}`);
      return done('cli', plan.replica, pid, `killed replica ${plan.replica} (pid ${pid}) with SIGKILL`);
    }
    case 'kill-agent': {
      const pid = readKeeperChildPid(dir, plan.agent, 'agent');
      if (pid === null || !isClusterProcess(pid, dir, plan.agent)) {
        throw new CliError(`${plan.node}'s agent ${plan.agent} is not running (no live process in run/${plan.agent}.agent-pid): see \`trine status\``, EXIT_FAILED);
      }
      const keeper = readPidFiles(dir).find((r) => r.id === plan.agent)?.pid ?? null;
      const kept = keeper !== null && isClusterProcess(keeper, dir, plan.agent);
      await sigkill(pid, `agent ${plan.agent}`);
      return done('cli', plan.agent, pid, `killed ${plan.node}'s agent ${plan.agent} (pid ${pid}) with SIGKILL; ${kept ? `its keeper (pid ${keeper}) replaces it` : 'its keeper is not running: nothing replaces it'}`);
    }
    case 'kill-node': {
      let killed: string[];
      try {
        ({ killed } = await powerOffNode(dir, cluster.config, plan.node, { replicas: true }));
      } catch (e) {
        if (e instanceof ResetError) throw new CliError(`kill-node ${plan.node}: ${e.message}: check with ps`, EXIT_FAILED);
        throw e;
      }
      if (killed.length === 0) throw new CliError(`nothing of node ${plan.node} was running: see \`trine status\``, EXIT_FAILED);
      return done('cli', plan.node, null, `killed node ${plan.node} with SIGKILL: ${killed.join(', ')}`, killed);
    }
    case 'hang':
    case 'resume': {
      const p = resolveTarget(cluster, plan.mode, plan.target);
      const signal = plan.mode === 'hang' ? 'SIGSTOP' : 'SIGCONT';
      try {
        process.kill(p.pid, signal);
      } catch (e) {
        throw new CliError(`could not send ${signal} to ${p.what} (pid ${p.pid}): ${(e as Error).message}`, EXIT_FAILED);
      }
      return done('cli', plan.target, p.pid, plan.mode === 'hang'
        ? `hung ${p.what} (pid ${p.pid}) with SIGSTOP: resume it with \`trine inject resume ${p.pid}\``
        : `resumed ${p.what} (pid ${p.pid}) with SIGCONT`);
    }
  }
}

// ---- daemon modes ------------------------------------------------------------------------------

async function askDaemon(cluster: Cluster, plan: Extract<InjectPlan, { by: 'daemon' }>, timeoutMs: number, remote: boolean): Promise<InjectResult> {
  const pid = remote ? null : readPidFiles(cluster.dir).find((r) => r.id === plan.target)?.pid ?? null;
  if (!remote && (pid === null || !isClusterProcess(pid, cluster.dir, plan.target))) {
    throw new CliError(`${plan.target} is not running, so it cannot take inject ${plan.mode}: see \`trine status\``, EXIT_FAILED, 'NOT_RUNNING');
  }
  const client = await OperatorClient.open(cluster);
  let answer: { ok: boolean; text: string } | null;
  try {
    answer = await client.inject(plan.target, plan.mode, plan.args, timeoutMs);
  } finally {
    await client.close();
  }
  return daemonAnswer('daemon', plan, answer, timeoutMs);
}

function daemonAnswer(by: 'daemon' | 'agent', plan: { mode: string; target: ProcessId }, answer: { ok: boolean; text: string } | null, timeoutMs: number): InjectResult {
  if (answer === null) {
    throw new CliError(
      `${plan.target} did not answer inject ${plan.mode} within ${timeoutMs} ms: it may be hung or overloaded (see \`trine status\`), ` +
        'or running since before cluster.json allowed injection (restart the cluster with `trine up --allow-inject`)',
      EXIT_FAILED,
      'NO_ANSWER',
    );
  }
  if (!answer.ok) throw new CliError(`${plan.target} refused inject ${plan.mode}: ${answer.text}`, EXIT_FAILED, 'REFUSED');
  return done(by, plan.target, null, answer.text);
}

// ---- modes the target's node agent performs ----------------------------------------------------

/** `cluster` with every agent given an address the operator can dial: cluster.json's (several
 *  hosts), else the loopback port a live agent of this one-host cluster recorded. */
function withAgentListeners(cluster: Cluster, remote: boolean): Cluster {
  if (remote) return cluster;
  const processes = cluster.config.processes.map((p) => {
    if (p.kind !== 'agent' || p.listen !== null) return p;
    const pid = readKeeperChildPid(cluster.dir, p.id, 'agent');
    const port = pid !== null && isClusterProcess(pid, cluster.dir, p.id) ? readInjectPort(cluster.dir, p.id) : null;
    return port === null ? p : { ...p, listen: { host: LOOPBACK_HOST, port } };
  });
  return { ...cluster, config: { ...cluster.config, processes } };
}

/** The node and agent of `plan`: named, or where the agreed cluster view says the process runs. */
async function nodeOfTarget(client: OperatorClient, cluster: Cluster, plan: Extract<InjectPlan, { by: 'agent' }>, timeoutMs: number): Promise<{ node: string; agent: ProcessId }> {
  if (!('proc' in plan.at)) return plan.at;
  const [task, vpid] = plan.at.proc.split('/') as [string, string];
  const pick = await readClusterView(client, timeoutMs);
  if (pick.warning !== null) process.stderr.write(`trine: ${pick.warning}\n`);
  const proc = pick.view.tasks.find((t) => t.id === task)?.procs.find((p) => p.vpid === Number(vpid));
  if (proc === undefined) throw new CliError(`task process ${plan.at.proc} is not in the cluster view: see \`trine ps\``, EXIT_FAILED);
  if (proc.node === null) throw new CliError(`task process ${plan.at.proc} is on no node (${proc.state}): nothing to ${plan.mode}; see \`trine ps ${task}\``, EXIT_FAILED);
  const agent = cluster.config.membership.agents.find((a) => a.node === proc.node);
  if (agent === undefined) throw new CliError(`task process ${plan.at.proc} is on node ${proc.node}, which has no agent in ${cluster.dir}/cluster.json: see \`trine nodes\``, EXIT_FAILED);
  return { node: agent.node, agent: agent.id };
}

async function askAgent(cluster: Cluster, plan: Extract<InjectPlan, { by: 'agent' }>, timeoutMs: number, remote: boolean): Promise<InjectResult> {
  const reachable = withAgentListeners(cluster, remote);
  const client = await OperatorClient.open(reachable);
  let answer: { ok: boolean; text: string } | null;
  let agent: ProcessId;
  try {
    const at = await nodeOfTarget(client, cluster, plan, timeoutMs);
    agent = at.agent;
    const listens = reachable.config.processes.some((p) => p.id === agent && p.listen !== null);
    if (!listens) {
      throw new CliError(
        `${at.node}'s agent ${agent} is not running, or records no port for injections (run/${agent}.inject-port), so it cannot take inject ${plan.mode}: ` +
          'see `trine status`; an agent started before cluster.json allowed injection takes none (restart the cluster with `trine up --allow-inject`)',
        EXIT_FAILED,
      );
    }
    answer = await client.inject(agent, plan.mode, plan.args, timeoutMs);
  } finally {
    await client.close();
  }
  return daemonAnswer('agent', { mode: plan.mode, target: agent }, answer, timeoutMs);
}
