// The main thread's handle on the link worker (worker.ts), which owns the agent socket: start
// it, exchange messages with it, pull what it relayed synchronously (for exitCs), decide
// whether it keeps the process alive, and stop it. No protocol decisions: link.ts makes those.
import { MessageChannel, receiveMessageOnPort, Worker, type MessagePort } from 'node:worker_threads';
import type { ProcToAgent } from '../../core/wire/app-wire.ts';
import type { MainToWorker, WorkerData, WorkerToMain } from './channel.ts';
import type { LinkEnv } from './env.ts';
import type { SharedFlagBuffers } from './flags.ts';

export type ConnectionEvents = {
  readonly onMessage: (m: WorkerToMain) => void;
  /** The worker itself failed (not the socket: that arrives as a 'lost' message). */
  readonly onWorkerError: (e: Error) => void;
};

export class AgentConnection {
  private port: MessagePort | null;
  private worker: Worker | null;
  private refd = true;

  private constructor(port: MessagePort, worker: Worker) {
    this.port = port;
    this.worker = worker;
  }

  static open(env: LinkEnv, endpoint: string, flags: SharedFlagBuffers, events: ConnectionEvents): AgentConnection {
    const { port1, port2 } = new MessageChannel();
    const workerData: WorkerData = {
      socketPath: env.socketPath,
      hello: { type: 'hello', task: env.task, vpid: env.vpid, token: env.token, endpoint },
      flags,
      port: port2,
    };
    port1.on('message', (m: WorkerToMain) => events.onMessage(m));
    // execArgv: the parent's loader flags do not work in a worker; the entry registers tsx.
    const worker = new Worker(new URL('./worker-entry.mjs', import.meta.url), { workerData, transferList: [port2], execArgv: [] });
    // The worker never keeps the process alive by itself; the port does, when asked (keepAlive).
    worker.unref();
    worker.on('error', (e) => events.onWorkerError(e));
    return new AgentConnection(port1, worker);
  }

  send(msg: ProcToAgent): void {
    this.post({ type: 'send', msg });
  }

  /** Ask the worker to send finalize and end the socket; a 'closed' message follows. */
  finalize(): void {
    this.post({ type: 'finalize' });
  }

  /** Hand every message the worker already relayed to `handle`, synchronously. */
  pull(handle: (m: WorkerToMain) => void): void {
    for (;;) {
      const port = this.port;
      if (port === null) return;
      const r = receiveMessageOnPort(port);
      if (r === undefined) return;
      handle(r.message as WorkerToMain);
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
