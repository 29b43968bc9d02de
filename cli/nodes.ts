// `trine nodes`: every node's agent, state, slots in use and incarnation, as two replicas agree
// on them (cli/op-client.ts; docs/OPERATIONS.md §1.1).
import { EXIT_OK } from './errors.ts';
import { jsonLine, SCHEMAS } from './json-out.ts';
import { agreedView, type ViewOptions } from './ps.ts';
import { formatNodes } from './task-report.ts';

export async function nodes(opts: ViewOptions): Promise<number> {
  const pick = await agreedView(opts.dir, opts.timeoutMs);
  process.stdout.write(
    opts.json === true
      ? jsonLine(SCHEMAS.nodes, { rsn: pick.rsn, shownFrom: pick.from, agreedBy: pick.agreedBy, nodes: pick.view.nodes })
      : `${formatNodes(pick.view.nodes)}\n`,
  );
  return EXIT_OK;
}
