// The messages between the link's main thread and its socket pumps (worker.cjs; both our own
// code, in one process: structured clones, not a wire format). A pump owns an agent socket: the
// main thread runs one for the first connection and the worker thread one for the second (the
// handover, PROTOCOL §9.4.1); the main thread owns every decision.
import type { AgentToProc } from '../../core/wire/app-wire.ts';
import type { SharedFlagBuffers } from './flags.ts';
import type { MessagePort } from 'node:worker_threads';

/** What a pump (worker.cjs run()) needs. */
export type PumpData = {
  readonly socketPath: string;
  /** The first frame, encoded: hello (the main thread's pump) or attach (the worker's). */
  readonly helloFrame: Uint8Array;
  /** The pump runs on the main thread: it is written to by direct calls only, and its socket
   *  and timers keep the process alive only while the link asks. */
  readonly mainThread: boolean;
  readonly maxFrameBytes: number;
  /** Dials in all while the agent closes the connection before saying anything, the delay
   *  before the second, and the cap the delay doubles up to (limits.ts). */
  readonly connectAttempts: number;
  readonly connectRetryMs: number;
  readonly connectRetryMaxMs: number;
  readonly flags: SharedFlagBuffers;
};

/** The worker's pump's data, with its port to the main thread. */
export type WorkerData = PumpData & { readonly port: MessagePort };


/** The worker's first message (worker.cjs waits for it before it dials). */
export type WorkerStart = { readonly type: 'start'; readonly workerData: WorkerData };

/** The worker (worker.cjs) writes bytes the main thread encoded: it knows no message types. */
export type MainToWorker =
  | { readonly type: 'send'; readonly bytes: Uint8Array }
  /** Write this frame (finalize), end the socket, report 'closed' once it is gone. */
  | { readonly type: 'finalize'; readonly bytes: Uint8Array }
  /** Drop the socket at once. */
  | { readonly type: 'close' }
  /** A DGRP tester's port (worker.cjs): it gets every view and may send frames. */
  | { readonly type: 'attach'; readonly port: MessagePort };

/** What the worker posts: a frame body, undecoded, or the socket's end. */
export type RawWorkerToMain =
  | { readonly type: 'frame'; readonly body: Uint8Array }
  | { readonly type: 'lost'; readonly code: LostCode; readonly detail: string }
  | { readonly type: 'closed' };

/** Why the socket went away. */
export type LostCode = 'AGENT_CLOSED' | 'SOCKET_ERROR' | 'WIRE';

/** What the link sees: frames decoded and checked by the connection (connection.ts). */
export type WorkerToMain =
  /** The handover's own frame (attached) never reaches the link. */
  | { readonly type: 'agent'; readonly msg: Exclude<AgentToProc, { type: 'attached' }> }
  | { readonly type: 'lost'; readonly code: LostCode; readonly detail: string }
  /** After finalize: the socket closed. */
  | { readonly type: 'closed' };
