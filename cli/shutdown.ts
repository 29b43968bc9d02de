// `trine shutdown`: stop a whole cluster, from the operator's bundle on any host (PROTOCOL
// §10.11). A signed `cluster.shutdown` goes to the replicas like any operator request; the group
// orders it, kills every task, tells every agent to stop its node and the watchdog to stand down,
// and the replicas exit once the watchdog and the agents have acknowledged. Every daemon exits
// with EXIT_SHUTDOWN, which nothing restarts (the keeper gives up, the systemd units name it in
// RestartPreventExitStatus). Then, unless --no-wait, this command waits until no replica and no
// watchdog answers any more, and says so (with --json, one `trine.shutdown/1` object at the end,
// cli/json-out.ts).
import { EXIT_SHUTDOWN } from '../src/core/constants.ts';
import { loadCluster } from '../src/io/cluster-dir.ts';
import { CliError, EXIT_FAILED, EXIT_OK } from './errors.ts';
import { emitJson, SCHEMAS } from './json-out.ts';
import { newNonce, OP_TIMEOUT_MS, requestOp } from './op-client.ts';
import { OperatorClient } from './status-client.ts';

/** How long `trine shutdown` waits for the daemons to go quiet: the replicas linger up to
 *  SHUTDOWN_LINGER_MAX_MS (5 s) for acknowledgements, the watchdog 1 s. */
export const SHUTDOWN_WAIT_MS = 15_000;
/** Each round of "does anybody still answer?". */
const PROBE_MS = 500;

export async function shutdown(opts: { dir?: string | undefined; wait?: boolean | undefined; timeoutMs?: number | undefined; json?: boolean | undefined }): Promise<number> {
  const cluster = loadCluster(opts.dir);
  const client = await OperatorClient.open(cluster);
  try {
    const startedAt = Date.now();
    const outcome = await requestOp(client, { type: 'cluster.shutdown', nonce: newNonce() }, opts.timeoutMs ?? OP_TIMEOUT_MS);
    if (!outcome.ok) throw new CliError(`the group refused the shutdown: ${outcome.text}: see \`trine status\``, EXIT_FAILED, 'REFUSED');
    const json = opts.json === true;
    const ordered = { cluster: cluster.config.cluster, rsn: outcome.rsn, agreedBy: outcome.agreedBy, answer: outcome.text };
    if (!json) process.stdout.write(`cluster ${cluster.config.cluster}: ${outcome.text} (ordered at RSN ${outcome.rsn})\n`);
    if (opts.wait === false) {
      if (json) emitJson(SCHEMAS.shutdown, { ...ordered, waited: false, elapsedMs: null });
      return EXIT_OK;
    }
    const scc = cluster.config.membership.scc;
    const deadline = Date.now() + SHUTDOWN_WAIT_MS;
    let answering: string[] = [];
    for (;;) {
      const replicas = await client.queryReplicas(PROBE_MS);
      const watchdog = await client.queryWatchdog(PROBE_MS);
      answering = [...[...replicas].filter(([, a]) => a.ok).map(([id]) => id), ...(watchdog.ok ? [scc] : [])];
      if (answering.length === 0) break;
      if (Date.now() >= deadline) {
        throw new CliError(
          `still answering ${SHUTDOWN_WAIT_MS / 1000} s after the shutdown: ${answering.join(', ')}: see \`trine status\`; stop those hosts' units (systemctl stop trine-node trine-scc)`,
          EXIT_FAILED,
          'STILL_RUNNING',
        );
      }
    }
    if (json) {
      emitJson(SCHEMAS.shutdown, { ...ordered, waited: true, elapsedMs: Date.now() - startedAt });
      return EXIT_OK;
    }
    process.stdout.write(`stopped: no replica and no watchdog answers (${((Date.now() - startedAt) / 1000).toFixed(1)} s); ` +
      `every daemon exited with ${EXIT_SHUTDOWN}, which its unit does not restart: start a host again with \`systemctl start\`\n`);
    return EXIT_OK;
  } finally {
    await client.close();
  }
}
