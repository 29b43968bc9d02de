// The main thread's handle on the link worker (worker.cjs), which owns the agent socket: start
// it, exchange messages with it, pull what it relayed synchronously (for exitCs), decide
// whether it keeps the process alive, and stop it. No protocol decisions: link.ts makes those.
import { MessageChannel, receiveMessageOnPort, type MessagePort, type Worker } from 'node:worker_threads';
import { unpack } from '../../core/wire/frame.ts';
import { agentToProc, encodeAppFrame, MAX_APP_FRAME_BYTES, procToAgent, type ProcToAgent } from '../../core/wire/app-wire.ts';
import type { MainToWorker, RawWorkerToMain, WorkerData, WorkerStart, WorkerToMain } from './channel.ts';
import type { LinkEnv } from './env.ts';
import type { SharedFlagBuffers } from './flags.ts';
import { APP_CONNECT_ATTEMPTS, APP_CONNECT_RETRY_MAX_MS, APP_CONNECT_RETRY_MS } from './limits.ts';
import { startLinkWorker, takeLinkWorker } from './prestart.ts';

export type ConnectionEvents = {
  readonly onMessage: (m: WorkerToMain) => void;
  /** The worker itself failed (not the socket: that arrives as a 'lost' message). */
  readonly onWorkerError: (e: Error) => void;
};

export class AgentConnection {
  private port: MessagePort | null;
  private worker: Worker | null;
  private refd = true;
  /** A bad frame arrived: nothing after it is delivered. */
  private broken = false;

  private constructor(port: MessagePort, worker: Worker) {
    this.port = port;
    this.worker = worker;
  }

  static open(env: LinkEnv, endpoint: string, flags: SharedFlagBuffers, events: ConnectionEvents): AgentConnection {
    const { port1, port2 } = new MessageChannel();
    const workerData: WorkerData = {
      // `@name`: the agent's abstract socket (src/daemon/app-socket.ts); node:net wants the NUL.
      socketPath: env.socketPath.startsWith('@') ? `\0${env.socketPath.slice(1)}` : env.socketPath,
      helloFrame: encodeAppFrame(procToAgent, { type: 'hello', task: env.task, vpid: env.vpid, token: env.token, endpoint }),
      maxFrameBytes: MAX_APP_FRAME_BYTES,
      connectAttempts: APP_CONNECT_ATTEMPTS,
      connectRetryMs: APP_CONNECT_RETRY_MS,
      connectRetryMaxMs: APP_CONNECT_RETRY_MAX_MS,
      flags,
      port: port2,
    };
    let conn: AgentConnection | null = null;
    port1.on('message', (m: RawWorkerToMain) => conn?.deliver(m, events.onMessage));
    // Plain JavaScript (worker.cjs), usually started while trine/app loaded (prestart.ts); it
    // dials once it has this start message. It never keeps the process alive by itself; the
    // port does, when asked (keepAlive).
    const worker = takeLinkWorker() ?? startLinkWorker();
    worker.on('error', (e) => events.onWorkerError(e));
    worker.postMessage({ type: 'start', workerData } satisfies WorkerStart, [port2]);
    conn = new AgentConnection(port1, worker);
    return conn;
  }

  send(msg: ProcToAgent): void {
    this.post({ type: 'send', bytes: encodeAppFrame(procToAgent, msg) });
  }

  /** Give a DGRP tester thread its own port to the worker (worker.cjs `attach`). */
  attach(port: MessagePort): void {
    this.port?.postMessage({ type: 'attach', port } satisfies MainToWorker, [port]);
  }

  /** Ask the worker to send finalize and end the socket; a 'closed' message follows. */
  finalize(): void {
    this.post({ type: 'finalize', bytes: encodeAppFrame(procToAgent, { type: 'finalize' }) });
  }

  /** Decode and check what the worker relayed (it only cut the stream into frames): a body
   *  that is not a valid agent message breaks the channel, as a bad frame on a stream would. */
  private deliver(m: RawWorkerToMain, handle: (m: WorkerToMain) => void): void {
    if (this.broken) return;
    if (m.type !== 'frame') {
      handle(m);
      return;
    }
    const tree = unpack(m.body);
    const msg = tree.ok ? agentToProc.dec(tree.value, 'app') : tree;
    if (msg.ok) {
      handle({ type: 'agent', msg: msg.value });
      return;
    }
    this.broken = true;
    this.post({ type: 'close' });
    handle({ type: 'lost', code: 'WIRE', detail: `${msg.code}: ${msg.detail}` });
  }

  /** Hand every message the worker already relayed to `handle`, synchronously. */
  pull(handle: (m: WorkerToMain) => void): void {
    for (;;) {
      const port = this.port;
      if (port === null) return;
      const r = receiveMessageOnPort(port);
      if (r === undefined) return;
      this.deliver(r.message as RawWorkerToMain, handle);
    }
  }

  /** Whether the link keeps the process alive (something awaits the agent). */
  keepAlive(need: boolean): void {
    const port = this.port;
    if (port === null || need === this.refd) return;
    this.refd = need;
    if (need) port.ref();
    else port.unref();
  }

  /** Drop the socket and stop the worker. Idempotent. */
  close(): void {
    this.post({ type: 'close' });
    this.port?.close();
    this.port = null;
    const worker = this.worker;
    this.worker = null;
    if (worker !== null) void worker.terminate();
  }

  private post(m: MainToWorker): void {
    this.port?.postMessage(m);
  }
}
