// Asking the replicas until f + 1 of them agree: requestOp and readClusterView run the pure
// selection of cli/replies.ts (pickOutcome, pickClusterView, viewSettled) over the operator
// client (cli/status-client.ts), which asks every replica daemon running in the cluster dir:
// after a replacement (PROTOCOL §10.6) the two agreeing replies may come from spare ids (r4, r5,
// …) as well as from the initial three.
import { randomBytes } from 'node:crypto';
import { MAX_CG_BYTES } from '../src/core/constants.ts';
import type { ProcessId } from '../src/core/ports.ts';
import type { ReplicaStatus } from '../src/core/status.ts';
import { signCG } from '../src/core/wire/frame.ts';
import type { OperatorRequest } from '../src/core/wire/messages.ts';
import { CliError, EXIT_FAILED, EXIT_USAGE } from './errors.ts';
import type { OperatorClient } from './status-client.ts';
import {
  AGREEING_REPLIES, describeReplies, pickClusterView, pickOutcome, toViewAnswer, viewSettled, type OpReply, type ViewAnswer, type ViewPick,
} from './replies.ts';

/** How long `trine submit` and `trine kill` wait for two matching replies: ordering and
 *  applying a request takes a few heartbeat periods; a primary change takes about a second. */
export const OP_TIMEOUT_MS = 5_000;
/** How long `trine ps`, `trine nodes` and `trine logs` wait for the replicas' views. */
export const VIEW_TIMEOUT_MS = 2_000;

// ---- operator requests ---------------------------------------------------------------------

/** 32 lowercase hex digits (PROTOCOL §8.1): replicas deduplicate retries by it. */
export function newNonce(): string {
  return randomBytes(16).toString('hex');
}

/** Sign `payload` as the operator and send it to every running replica until two agree on its
 *  outcome. A retired replica is silent (PROTOCOL §10.3); a member answers once it applied the
 *  request, whichever view it joined in. */
export async function requestOp(client: OperatorClient, payload: OperatorRequest, timeoutMs: number): Promise<OpReply & { agreedBy: ProcessId[] }> {
  const signed = signCG({ csn: 0, gssnAck: 0, inc: 0, client: client.id, payload }, client.signer);
  if (signed.bytes.length > MAX_CG_BYTES) {
    throw new CliError(`the request is ${signed.bytes.length} bytes, more than the ${MAX_CG_BYTES} a replica accepts: pass fewer or shorter arguments and environment entries`, EXIT_USAGE);
  }
  const { asked, replies } = await client.request(signed, timeoutMs, (r) => pickOutcome(r) !== null);
  const outcome = pickOutcome(replies);
  if (outcome !== null) return outcome;
  const what = payload.type === 'task.submit' ? 'the submit'
    : payload.type === 'cluster.shutdown' ? 'the shutdown'
      : payload.type === 'node.add' ? `the addition of ${payload.node}`
        : payload.type === 'node.remove' ? `the removal of ${payload.node}`
          : payload.type === 'node.restore' ? 'the membership restore'
            : `the ${payload.type === 'task.restart' ? 'restart' : 'kill'} of ${payload.task}`;
  throw new CliError(
    `no two replicas agreed on the outcome of ${what} within ${timeoutMs} ms (${describeReplies(asked, replies, (id) => !client.isConnected(id))}): ` +
      'it may still take effect; check `trine ps` and `trine status`',
    EXIT_FAILED,
    'NO_AGREEMENT',
  );
}

/** Pause between view queries when the answers of one did not agree. */
export const VIEW_RETRY_MS = 20;

/** Ask the replicas for their views and pick the one to show (pickClusterView). Replicas that
 *  answer a query a few ms apart may be an RSN apart — while a task timer runs, the primary
 *  orders a tick every 50 ms (PROTOCOL §8.3) — so a query whose answers do not agree is asked
 *  again until two do or `timeoutMs` has passed; only then is one replica's view shown alone. */
export async function readClusterView(client: OperatorClient, timeoutMs: number): Promise<ViewPick> {
  const toAnswers = (m: ReadonlyMap<ProcessId, ReplicaStatus>) =>
    [...m.values()].map(toViewAnswer).filter((a): a is ViewAnswer => a !== null);
  const deadline = Date.now() + timeoutMs;
  let statuses: Awaited<ReturnType<OperatorClient['queryReplicas']>>;
  let answered: Map<ProcessId, ReplicaStatus>;
  let pick: ViewPick | null;
  for (;;) {
    statuses = await client.queryReplicas(Math.max(1, deadline - Date.now()), (got, pending) => viewSettled(toAnswers(got), pending));
    answered = new Map<ProcessId, ReplicaStatus>();
    for (const [id, a] of statuses) if (a.ok) answered.set(id, a.status);
    pick = pickClusterView(toAnswers(answered));
    if (pick === null || pick.warning === null || answered.size < AGREEING_REPLIES || Date.now() + VIEW_RETRY_MS >= deadline) break;
    await new Promise((r) => setTimeout(r, VIEW_RETRY_MS));
  }
  if (pick !== null) return pick;
  if (answered.size === 0) {
    const why = [...statuses].map(([id, a]) => `${id}: ${a.ok ? 'answered' : a.error}`).join(', ');
    throw new CliError(`no replica answered within ${timeoutMs} ms (${why}): check the cluster with \`trine status\``, EXIT_FAILED, 'NO_ANSWER');
  }
  const notServing = [...answered.values()].filter((s) => s.phase === 'installing' || s.phase === 'retired');
  if (notServing.length === answered.size) {
    throw new CliError(
      `only replicas not in service answered (${notServing.map((s) => `${s.id} ${s.phase}`).join(', ')}): ` +
        'the group is changing; check `trine status` and try again',
      EXIT_FAILED,
    );
  }
  throw new CliError(
    `${[...answered.keys()].join(', ')} answered without a readable task view (they predate task support, or the view is malformed): ` +
      'restart the cluster with this version of trine (`trine down`, then `trine up`)',
    EXIT_FAILED,
  );
}

/** How long `submit --wait` and `logs --follow` keep trying when no replica answers: long
 *  enough to ride out a primary change or a replica restart, short enough not to hang a script. */
export const CONTACT_LOSS_MS = 30_000;

/** Reads views again and again for a command that follows a task: prints a warning only when
 *  the replica shown changes, and gives up after CONTACT_LOSS_MS without any view. */
export class ViewPoller {
  private lastContactMs = Date.now();
  private warnedFrom: ProcessId | null = null;

  constructor(
    private readonly client: OperatorClient,
    private readonly timeoutMs: number,
    private readonly warn: (line: string) => void,
    private readonly following: string,
  ) {}

  /** The next view, or null if none came this time (try again later). */
  async next(): Promise<ViewPick | null> {
    let pick: ViewPick;
    try {
      pick = await readClusterView(this.client, this.timeoutMs);
    } catch (e) {
      if (!(e instanceof CliError)) throw e;
      if (Date.now() - this.lastContactMs > CONTACT_LOSS_MS) {
        throw new CliError(
          `lost contact with the cluster for ${CONTACT_LOSS_MS / 1000} s while following ${this.following} (${e.message}): ` +
            `the task goes on; check \`trine status\`, then \`trine ps ${this.following}\``,
          EXIT_FAILED,
          'CONTACT_LOST',
        );
      }
      return null;
    }
    this.lastContactMs = Date.now();
    if (pick.warning === null) this.warnedFrom = null;
    else if (pick.from !== this.warnedFrom) {
      this.warnedFrom = pick.from;
      this.warn(pick.warning);
    }
    return pick;
  }
}
