// The messages between the link's main thread and its worker (both our own code, in one
// process: structured clones, not a wire format). The worker owns the agent socket; the main
// thread owns every decision.
import type { AgentToProc, ProcToAgent } from '../../core/wire/app-wire.ts';
import type { SharedFlagBuffers } from './flags.ts';
import type { MessagePort } from 'node:worker_threads';

export type WorkerData = {
  readonly socketPath: string;
  readonly hello: Extract<ProcToAgent, { type: 'hello' }>;
  readonly flags: SharedFlagBuffers;
  readonly port: MessagePort;
};

export type MainToWorker =
  | { readonly type: 'send'; readonly msg: ProcToAgent }
  /** Send finalize, end the socket, report 'closed' once it is gone. */
  | { readonly type: 'finalize' }
  /** Drop the socket at once. */
  | { readonly type: 'close' };

/** Why the socket went away. */
export type LostCode = 'AGENT_CLOSED' | 'SOCKET_ERROR' | 'WIRE';

export type WorkerToMain =
  | { readonly type: 'agent'; readonly msg: AgentToProc }
  | { readonly type: 'lost'; readonly code: LostCode; readonly detail: string }
  /** After finalize: the socket closed. */
  | { readonly type: 'closed' };
