// `trine status`: asks the replicas (the initial three and every replica daemon running in the
// cluster dir, spares included) and the watchdog for their status with operator-signed queries,
// prints a table (or, with --json, the document of docs/OPERATIONS.md §3) of the current group,
// and exits non-zero if a member of that group did not answer.
import { loadCluster } from '../src/io/cluster-dir.ts';
import { EXIT_FAILED, EXIT_OK } from './errors.ts';
import { jsonLine, SCHEMAS } from './json-out.ts';
import { StatusClient } from './status-client.ts';
import { buildStatusDocument, formatStatus } from './status-report.ts';

/** How long `trine status` waits for answers: many heartbeat periods, yet quick to give up. */
export const STATUS_TIMEOUT_MS = 2_000;

export async function status(opts: { dir?: string | undefined; json?: boolean | undefined; timeoutMs?: number | undefined }): Promise<number> {
  const cluster = loadCluster(opts.dir);
  const client = await StatusClient.open(cluster);
  try {
    const answers = await client.query(opts.timeoutMs ?? STATUS_TIMEOUT_MS);
    const doc = buildStatusDocument(cluster.config, cluster.dir, answers, new Date());
    process.stdout.write(opts.json === true ? jsonLine(SCHEMAS.status, doc) : `${formatStatus(doc)}\n`);
    // The rows are the members of the current group: a retired replica's silence is expected.
    return doc.replicas.every((r) => r.answered) ? EXIT_OK : EXIT_FAILED;
  } finally {
    await client.close();
  }
}
