// `trine agent`: runs one node agent (DESIGN.md §1; spec §1.4) — the agent core on the shared
// daemon runtime, dialing every replica — and its process driver (src/daemon/proc-driver.ts):
// the group's delivered `proc.*` commands go to the pure process table (src/core/agent-procs.ts),
// whose effects the driver executes with the real Spawner, and whose reports go back to the group
// as `proc.report` requests; the driver keeps the procs file a later incarnation reads to adopt
// survivors and kill orphans (PROTOCOL §8.6). This file also heartbeats its
// keeper over the IPC channel when it has one (src/daemon/keeper.ts). On a cluster of several
// hosts it listens, and answers the operator's reads of its node's task output
// (src/daemon/logs-server.ts, PROTOCOL §7.1). It also runs the node's protector (PROTOCOL §11.4,
// src/daemon/protector.ts): a TCP service on the node's address where the task processes of the
// previous node of the ring store their ranks' logs and checkpoints. Neither the protector nor
// the keeper serves metrics of its own: with metrics on, the agent's endpoint shows the
// protector's counts and the keeper's restarts (told with `go`), docs/OPERATIONS.md §9.
//
// Standby mode (AGENT_STANDBY_ENV=1, only under a keeper): the process loads all its code — the
// costly part of a start, TypeScript through tsx — then waits on its IPC channel for `go`. Only
// then does it become the agent: it takes its incarnation, opens its log, reads the procs file
// and dials the replicas. Before `go` it has no identity in the cluster: it does not connect,
// log as the agent or touch the run dir, so a standby that is never used leaves no trace. A
// standby whose keeper goes away (the channel closes) exits: nobody can promote it.
import { randomBytes } from 'node:crypto';
import { createAgent, type AgentCore } from '../core/agent.ts';
import type { CoreInput } from '../core/node.ts';
import type { ProcessId } from '../core/ports.ts';
import type { AgentRequest, GroupCommand, Item } from '../core/wire/messages.ts';
import { keepAddedReplicas } from '../io/added-replicas.ts';
import { DEFAULT_AGENT_SLOTS, LOOPBACK_HOST, paths, replicaPool, type ClusterConfig } from '../io/cluster-dir.ts';
import { createProcessLog } from '../io/log.ts';
import { writeFilePrivate } from '../io/private-files.ts';
import { ownerMark } from '../io/proc-scan.ts';
import { trace, tracing } from '../io/trace.ts';
import { agentSocketName } from './app-socket.ts';
import { startGroupLearner, type GroupLearner } from './group-learner.ts';
import { createLogsServer, type LogsServer } from './logs-server.ts';
import { AGENT_STANDBY_ENV, KEEPER_HEARTBEAT_MS, readGo, type AgentToKeeper, type KeeperRestarts } from './keeper.ts';
import { agentSample } from './metrics-sample.ts';
import { ProcDriver } from './proc-driver.ts';
import { createProtector, type Protector } from './protector.ts';
import { EXIT_CONFIG, EXIT_SHUTDOWN, runCore, type RunHooks } from './run-core.ts';

// The procs file and start-time helpers moved to src/io/run-records.ts (the keeper, `trine
// down` and the reset driver read them too); re-exported for existing importers.
export {
  isSameProcess, listProcsFiles, procStartTime, PROCS_FILE_FORMAT, readProcsFile, removeProcsFile, writeProcsFile,
  type ProcsFileEntry,
} from '../io/run-records.ts';

// ---- the keeper's channel -----------------------------------------------------------------------

/** A message to the keeper; with a callback, a channel closing mid-send is reported there instead
 *  of as an 'error' event, which would otherwise crash the agent: losing the keeper is no reason
 *  to stop. */
function tellKeeper(message: AgentToKeeper): void {
  if (process.connected) process.send?.(message, undefined, {}, () => {});
}

/** Standby mode (see the header): say that the code is loaded, then wait for the keeper's `go`;
 *  returns the keeper's restarts it carries (for the metrics). Exits if the keeper goes away
 *  first. */
function waitForGo(): Promise<KeeperRestarts> {
  if (typeof process.send !== 'function' || !process.connected) {
    process.stderr.write(`trine: ${AGENT_STANDBY_ENV}=1 is the keeper's standby mode and needs its IPC channel: run \`trine keeper\`, or unset it\n`);
    process.exit(EXIT_CONFIG);
  }
  return new Promise((resolve) => {
    const onDisconnect = (): void => process.exit(0);
    const onMessage = (m: unknown): void => {
      const go = readGo(m);
      if (go === null) return;
      process.off('message', onMessage);
      process.off('disconnect', onDisconnect);
      // Not inherited by anything this agent starts (task processes get an explicit environment
      // anyway, src/io/spawner.ts).
      delete process.env[AGENT_STANDBY_ENV];
      resolve(go.restarts);
    };
    // The listener keeps the channel referenced, and so this process alive, while it waits.
    process.on('message', onMessage);
    process.once('disconnect', onDisconnect);
    tellKeeper({ type: 'standby.ready' });
  });
}

/** Under a keeper (an IPC channel exists), tell it every KEEPER_HEARTBEAT_MS that this event
 *  loop still turns. Sent from a timer, so a wedged loop stops them and the keeper acts. */
function heartbeatKeeper(): void {
  if (typeof process.send !== 'function') return;
  const beat = (): void => tellKeeper({ type: 'heartbeat' });
  beat();
  const timer = setInterval(beat, KEEPER_HEARTBEAT_MS);
  timer.unref();
  process.once('disconnect', () => clearInterval(timer));
  // The channel alone must not keep the agent alive.
  process.channel?.unref();
}

// ---- the daemon ---------------------------------------------------------------------------------

/** Starting and stopping a manager replica on this node for the group (PROTOCOL §10.6): how
 *  depends on the cluster (a local one spawns `trine manager`, cli/daemons.ts). Returns the pid,
 *  or null when there was nothing to stop. */
export type ReplicaControl = {
  start(id: ProcessId, join: { view: number; primary: ProcessId; replicas: readonly ProcessId[] }): number;
  stop(id: ProcessId): number | null;
  /** Called once the agent runs, with its log: a local cluster loads its warm standby replica
   *  then (src/daemon/replica-standby.ts). */
  attach?(log: (level: 'info' | 'warn' | 'error', event: string, fields: Record<string, unknown>) => void): void;
};

/** The address a node's task processes bind (ProcDriverOptions.nodeHost), if the cluster has
 *  several hosts. */
const nodeHostOf = (config: ClusterConfig, node: string | null): { nodeHost?: string } => {
  const address = node === null ? undefined : config.nodeAddresses?.[node];
  return address === undefined ? {} : { nodeHost: address };
};

export async function runAgent(
  dir: string | undefined, id: ProcessId, hooks: RunHooks = {}, replicas?: ReplicaControl,
): Promise<void> {
  /** Its keeper's replacements of agents, as `go` said (null: not under a keeper). */
  const keeperRestarts = process.env[AGENT_STANDBY_ENV] === '1' ? await waitForGo() : null;
  heartbeatKeeper();
  let driver: ProcDriver | null = null;
  let agent: AgentCore | null = null;
  let feed: ((make: (nowMs: number) => CoreInput) => void) | null = null;
  /** Reports produced before the transport ran (the core takes inputs only after). */
  const backlog: AgentRequest[] = [];
  const send = (request: AgentRequest): void => {
    if (tracing()) trace(`agent.send ${request.type}`);
    if (feed === null) backlog.push(request);
    else feed((nowMs) => ({ type: 'request', nowMs, request }));
  };
  let log: ReturnType<typeof createProcessLog>['logger'] | null = null;
  /** Serves the operator's `logs.read` items from this node's task output (PROTOCOL §7.1). */
  let logsServer: LogsServer | null = null;
  /** Asks the replicas for the group as it is now, on this agent's transport (PROTOCOL §10.7). */
  let learner: GroupLearner | null = null;
  let sendItem: ((to: ProcessId, item: Item) => void) | null = null;
  let exitAgent: ((code: number, why: string) => void) | null = null;
  let clusterDir: string | null = null;
  let pool: ProcessId[] = [];
  /** The node's protector (PROTOCOL §11.4), once it listens: its endpoint goes to the group
   *  (`node.protector`), which puts it in the rollback tasks' mappings, and the group's
   *  `rollback.guard` and `rollback.release` commands reach it from `deliver.command` below. */
  let protector: Protector | null = null;
  /** The group's commands about replicas on this node, carried out once each. */
  const onReplicaCommand = (command: GroupCommand): void => {
    if (command.type !== 'replica.spawn' && command.type !== 'replica.kill') return;
    try {
      if (replicas === undefined) {
        log?.warn({ event: 'replica.command.ignored', command: command.type, replica: command.id, why: 'this agent cannot start or stop replicas' });
      } else if (command.type === 'replica.spawn') {
        const pid = replicas.start(command.id, command);
        log?.warn({ event: 'replica.started', replica: command.id, replicaPid: pid, view: command.view, primary: command.primary, replicas: command.replicas });
      } else {
        const pid = replicas.stop(command.id);
        log?.warn({ event: 'replica.killed', replica: command.id, replicaPid: pid });
      }
    } catch (e) {
      log?.error({ event: 'replica.command.failed', command: command.type, replica: command.id, error: (e as Error).message });
    }
  };
  return runCore({
    dir,
    id,
    kind: 'agent',
    tasks: { live: () => driver?.liveProcesses() ?? [] },
    makeCore: ({ cluster, entry, inc, signer }) => {
      const logger = createProcessLog(cluster.dir, id).logger;
      clusterDir = cluster.dir;
      log = logger;
      replicas?.attach?.((level, event, fields) => logger[level]({ event, ...fields }));
      driver = new ProcDriver({
        dir: cluster.dir,
        id,
        timing: cluster.config.membership.timing,
        send,
        appSocketPath: agentSocketName(cluster.config.cluster, id),
        owner: ownerMark(cluster.config.cluster, id),
        ...(cluster.config.taskUser === undefined ? {} : { taskUser: cluster.config.taskUser }),
        ...nodeHostOf(cluster.config, entry.node),
        // Every line already carries the agent's own `pid`: a task process's goes as `procPid`.
        log: (level, event, { pid, ...fields }) => logger[level]({ event, ...fields, ...(pid === undefined ? {} : { procPid: pid }) }),
      });
      logsServer = createLogsServer({
        logDir: paths.taskLogs(cluster.dir),
        operators: cluster.config.membership.operators,
        log: (level, event, fields) => logger[level]({ event, ...fields }),
      });
      driver.start();
      void driver.listen().catch((e: Error) => logger.error({ event: 'app.socket.failed', error: e.message }));
      // The protector listens on the node's address (its task processes' host), any free port.
      void createProtector({
        host: nodeHostOf(cluster.config, entry.node).nodeHost ?? LOOPBACK_HOST,
        port: 0,
        log: (level, event, fields) => logger[level]({ event, ...fields }),
      }).then((p) => {
        protector = p;
        send({ type: 'node.protector', endpoint: p.endpoint });
      }, (e: Error) => logger.error({ event: 'protector.failed', error: e.message }));
      // A predecessor left processes on record: ask the group which are still ours (PROTOCOL §8.6).
      const resync = driver.procs.recovered.length > 0;
      pool = replicaPool(cluster.config.membership);
      agent = createAgent({ id, membership: cluster.config.membership, inc, slots: entry.slots ?? DEFAULT_AGENT_SLOTS, signer, resync });
      return agent;
    },
    // The protector's counts ride the agent's metrics (it has no endpoint of its own); before it
    // listens, or if it could not, its series read 0 or are absent.
    sample: (nowMs) => (agent === null ? {} : agentSample(agent.status(nowMs), driver?.liveProcesses().length ?? 0, {
      protector: protector?.stats() ?? null, keeperRestarts,
    })),
    intercept: (frame, nowMs, reply) => {
      const rest = learner === null ? frame : learner.intercept(frame);
      return rest === null || logsServer === null ? rest : logsServer.intercept(rest, nowMs, reply);
    },
    onTransport: (ctl) => {
      sendItem = ctl.send;
      exitAgent = ctl.exit;
    },
    onEffect: (effect, nowMs) => {
      // Spares of added nodes, learnt from two replicas (PROTOCOL §10.12): kept on this node's
      // disk before the command that may start one of them is carried out (the core emits the
      // keys first), so the replica started here knows them too (src/io/added-replicas.ts).
      if (effect.type === 'keys' && clusterDir !== null) {
        const learnt = effect.keys.flatMap((k) => (k.replica === undefined ? [] : [{ id: k.id, publicKey: k.publicKey, ...k.replica }]));
        try {
          if (learnt.length > 0) keepAddedReplicas(clusterDir, learnt);
        } catch (e) {
          log?.error({ event: 'added-replicas.write-failed', error: (e as Error).message });
        }
      }
      if (effect.type === 'deliver.command') {
        driver?.onCommand(effect.command);
        onReplicaCommand(effect.command);
        onProtectorCommand(protector, effect.command, log);
        if (effect.command.type === 'node.shutdown' && driver !== null && clusterDir !== null) {
          const { rsn, removed } = effect.command;
          const why = removed ? 'the operator removed this node' : 'the operator shut the cluster down';
          log?.warn({ event: 'node.shutdown', rsn, removed }, `${why}: stopping this node`);
          const dir = clusterDir;
          void protector?.close();
          void driver.shutdown(rsn).then((left) => {
            try {
              writeFilePrivate(paths.shutdownFile(dir, id), `${JSON.stringify({ rsn, removed, atMs: Date.now() })}\n`);
            } catch (e) {
              log?.error({ event: 'node.shutdown.record-failed', error: (e as Error).message });
            }
            exitAgent?.(EXIT_SHUTDOWN, `${why} (RSN ${rsn})${left === 0 ? '' : `; ${left} processes would not die`}`);
          });
        }
      }
      hooks.onEffect?.(effect, nowMs);
    },
    onReady: (f) => {
      feed = f;
      for (const request of backlog.splice(0)) send(request);
      // Meanwhile learn the group as it is now (PROTOCOL §10.7): this incarnation started from
      // cluster.json's, which after two replacements holds only one member.
      if (sendItem !== null) {
        learner = startGroupLearner({
          pool,
          send: sendItem,
          nonce: () => randomBytes(4).readUInt32BE(0) >>> 1,
          log: (level, event, fields) => log?.[level]({ event, ...fields }),
          onLearnt: (group) => {
            log?.info({ event: 'agent.group.learnt', ...group, added: group.added.map((x) => x.id) });
            f((nowMs) => ({ type: 'group', nowMs, view: group.view, primary: group.primary, replicas: [...group.replicas], ports: [...group.ports], added: [...group.added] }));
          },
        });
      }
      hooks.onReady?.(f);
    },
  });
}

/** The group's orders about rollback tasks for this node's protector (PROTOCOL §11.4). A guard
 *  that arrives before the protector listens is not lost: the group guards again when the
 *  protector's `node.protector` is applied. */
function onProtectorCommand(protector: Protector | null, command: GroupCommand, log: { warn: (o: object) => void } | null): void {
  if (protector === null) return;
  if (command.type === 'rollback.guard') {
    const r = protector.guard(command.task, command.taskKey, command.maxStateBytes);
    if (!r.ok) log?.warn({ event: 'protector.guard.refused', task: command.task, code: r.code, detail: r.detail });
  } else if (command.type === 'rollback.release') {
    protector.release(command.task);
  }
}
