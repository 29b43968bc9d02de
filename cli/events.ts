// `trine events [--follow] [--json]`: the cluster's event log — every replica's journal of what
// it applied, merged (one event is in every journal), with the replicas' self-diagnosis records
// and, once settled, each episode of a fault: its detection and recovery with their latencies
// (cli/timeline.ts). --follow asks again every EVENTS_POLL_MS and prints only what is new, in
// order, whichever replicas answer: a dead replica's part is in the others' journals, and a
// primary change changes nothing here. Ctrl-C ends it with exit 0 (docs/OPERATIONS.md §10).
import type { ReplicaStatus } from '../src/core/status.ts';
import { loadCluster } from '../src/io/cluster-dir.ts';
import { CliError, EXIT_FAILED, EXIT_OK } from './errors.ts';
import { SCHEMAS } from './json-out.ts';
import { StopSignal } from './stop-signal.ts';
import { parseClusterView } from './replies.ts';
import { STATUS_TIMEOUT_MS } from './status.ts';
import { OperatorClient, type StatusAnswers } from './status-client.ts';
import { formatItem, journalsOf, LogFollower, type LogItem } from './timeline.ts';

/** --follow asks the replicas this often: new events show within about this plus a query's
 *  round trip (a few ms), well under a second. */
export const EVENTS_POLL_MS = 400;
/** --follow gives up after this long without any replica answering (as `logs --follow`). */
export const EVENTS_CONTACT_LOSS_MS = 30_000;

/** The replicas that answered, as status replies. */
export const answeredStatuses = (a: StatusAnswers): ReplicaStatus[] =>
  [...a.replicas.values()].flatMap((x) => (x.ok ? [x.status] : []));

/** One line of `trine events --json` (docs/OPERATIONS.md §10 documents each type). */
export function itemJson(item: LogItem): Record<string, unknown> {
  switch (item.type) {
    case 'event': {
      const { from, ...e } = item.event;
      return { schema: SCHEMAS.event, type: 'event', time: new Date(e.atMs).toISOString(), ...e, from };
    }
    case 'diagnosis':
      return { schema: SCHEMAS.diagnosis, type: 'diagnosis', time: new Date(item.diagnosis.atMs).toISOString(), ...item.diagnosis };
    case 'episode':
      return { schema: SCHEMAS.episode, type: 'episode', ...item.episode };
    default: {
      const never: never = item;
      return never;
    }
  }
}


export async function events(opts: { dir?: string | undefined; follow?: boolean | undefined; json?: boolean | undefined; timeoutMs?: number | undefined }): Promise<number> {
  const cluster = loadCluster(opts.dir);
  const client = await OperatorClient.open(cluster);
  const follower = new LogFollower();
  const print = (items: readonly LogItem[]) => {
    if (items.length === 0) return;
    process.stdout.write(`${items.map((i) => (opts.json === true ? JSON.stringify(itemJson(i)) : formatItem(i))).join('\n')}\n`);
  };
  const stop = new StopSignal();
  let lastContactMs = Date.now();
  let warned = false;
  try {
    for (;;) {
      const answers = await client.query(opts.timeoutMs ?? STATUS_TIMEOUT_MS);
      const statuses = answeredStatuses(answers);
      if (statuses.length === 0) {
        const why = [...answers.replicas].map(([id, a]) => `${id}: ${a.ok ? 'answered' : a.error}`).join(', ');
        if (opts.follow !== true) throw new CliError(`no replica answered (${why}): check the cluster with \`trine status\``, EXIT_FAILED);
        if (Date.now() - lastContactMs > EVENTS_CONTACT_LOSS_MS) {
          throw new CliError(`no replica answered for ${EVENTS_CONTACT_LOSS_MS / 1000} s (${why}): check the cluster with \`trine status\``, EXIT_FAILED);
        }
        if (!warned) process.stderr.write(`trine: no replica answered (${why}); still trying\n`);
        warned = true;
      } else {
        lastContactMs = Date.now();
        warned = false;
        print(follower.take(journalsOf(statuses, parseClusterView)));
      }
      if (opts.follow !== true || stop.requested) return EXIT_OK;
      await stop.pause(EVENTS_POLL_MS);
      if (stop.requested) return EXIT_OK;
    }
  } finally {
    stop.release();
    await client.close();
  }
}
