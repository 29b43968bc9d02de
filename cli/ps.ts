// `trine ps [TASK]`: the tasks and their processes as two replicas agree on them (f + 1,
// cli/op-client.ts), as a table or, with --json, the ClusterView (docs/OPERATIONS.md §1.1).
import { loadCluster } from '../src/io/cluster-dir.ts';
import { CliError, EXIT_FAILED, EXIT_OK } from './errors.ts';
import { jsonLine, SCHEMAS } from './json-out.ts';
import { readClusterView, VIEW_TIMEOUT_MS } from './op-client.ts';
import type { ViewPick } from './replies.ts';
import { OperatorClient } from './status-client.ts';
import { parseTaskId } from './task-args.ts';
import { formatEvents, formatTasks, narrowView } from './task-report.ts';

export type ViewOptions = { dir?: string | undefined; json?: boolean | undefined; timeoutMs?: number | undefined };

/** Open the operator client on the cluster in `dir`, read the agreed view, close. Warnings
 *  ("views differ; showing r1's") go to stderr. */
export async function agreedView(dir: string | undefined, timeoutMs: number | undefined): Promise<ViewPick> {
  const client = await OperatorClient.open(loadCluster(dir));
  try {
    const pick = await readClusterView(client, timeoutMs ?? VIEW_TIMEOUT_MS);
    if (pick.warning !== null) process.stderr.write(`trine: ${pick.warning}\n`);
    return pick;
  } finally {
    await client.close();
  }
}

/** The JSON form (`trine.ps/1`): the ClusterView, with where it came from. */
export const viewJson = (pick: ViewPick, view = pick.view) => jsonLine(SCHEMAS.ps, { rsn: pick.rsn, shownFrom: pick.from, agreedBy: pick.agreedBy, ...view });

export async function ps(opts: ViewOptions & { task?: string | undefined }): Promise<number> {
  const task = opts.task === undefined ? null : parseTaskId(opts.task);
  const pick = await agreedView(opts.dir, opts.timeoutMs);
  let view = pick.view;
  if (task !== null) {
    if (!view.tasks.some((t) => t.id === task)) {
      const older = view.omittedTasks > 0 ? ` (or it finished long ago: the view leaves out the ${view.omittedTasks} oldest finished tasks)` : '';
      throw new CliError(`no task ${task}${older}: see \`trine ps\``, EXIT_FAILED, 'NO_TASK');
    }
    view = narrowView(view, task);
  }
  if (opts.json === true) process.stdout.write(viewJson(pick, view));
  else if (task === null) process.stdout.write(`${formatTasks(view.tasks)}\n`);
  else process.stdout.write(`${formatTasks(view.tasks)}\n\n${formatEvents(view.events, pick.from)}\n`);
  return EXIT_OK;
}
