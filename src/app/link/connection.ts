// The main thread's handle on the link's connections to the agent: open them, exchange messages
// with their socket pumps (worker.cjs), pull what they relayed synchronously (for exitCs), decide
// whether they keep the process alive, and stop them. No protocol decisions: link.ts makes those.
//
// The handover (PROTOCOL §9.4.1). A worker thread is a whole Node environment and boots in ~25
// ms of CPU (docs/PERFORMANCE.md §5), too long to sit on a spawned process's path. So the first
// connection's pump runs on the main thread and says hello at once, and Link.init() resolves on
// the mapping it brings. When the welcome comes the worker is started, and dials a second
// connection with `attach`: it boots while the group orders the process's connect report, when
// the main thread only waits (started as trine/app loaded instead, its boot took the CPU the
// library's load, the hello and the agent needed: 7 ms more, docs/PERFORMANCE.md §5). The agent
// then writes nothing more on the first and answers on the second with `attached {replayed}`
// and, again, the frames it had sent on the first since the welcome. The main thread switches
// when it reads `attached`, which the worker relays even while the main thread is busy (exitCs
// pulls it): of the replayed frames it skips as many as it had already taken from the first
// connection (the same frames, in the same order) and takes the rest. From then on the worker
// raises the shared flags on arrival however busy the main thread is (spec §5.2). Before, a
// signal is read only when the main thread yields, or once the worker has attached and has it
// again in the replay: a wait no longer than the worker's boot.
// Every request goes on the first connection, for the process's life: the main thread calls its
// pump directly (no port message, which would wait for the event loop), so a request leaves at
// once, from a loop that never yields and before the worker has booted, and the process's
// requests travel on one connection, in order. The first connection is no longer read after the
// switch (the agent writes nothing more on it). Only if it ends (an OS error) do later requests
// go by the worker. A finalize goes the same way, and its close ends the link. The first
// connection's end before the welcome loses the link; once the worker is attaching, the replay
// brings again what it had still to bring, so the attach decides (a broken stream, WIRE, still
// loses it). A refused attach or a failed worker loses the link, with the first connection's end
// in the reason if it came first, unless a finalize is under way on the first, which then ends
// the process cleanly.
// Before the switch, exitCs() delivers only what the main thread's pump had read (or, once the
// worker has attached, its replay): spec A27's "delivered before Exit_cs returns" holds from the
// switch on, a worker's boot after the welcome.
import type { MessagePort, Worker } from 'node:worker_threads';
import { unpack } from '../../core/wire/frame.ts';
import { agentToProc, encodeAppFrame, MAX_APP_FRAME_BYTES, procToAgent, type AgentToProc, type ProcToAgent } from '../../core/wire/app-wire.ts';
import type { MainToWorker, RawWorkerToMain, WorkerData, WorkerStart, WorkerToMain } from './channel.ts';
import type { LinkEnv } from './env.ts';
import type { SharedFlagBuffers } from './flags.ts';
import { APP_CONNECT_ATTEMPTS, APP_CONNECT_RETRY_MAX_MS, APP_CONNECT_RETRY_MS } from './limits.ts';
import { threads } from './threads.ts';
// The same pump the worker thread runs; bundled into the library, so nothing is loaded at init.
import { run as runPump, type PumpPort, type PumpWrites } from './worker.cjs';

export type ConnectionEvents = {
  readonly onMessage: (m: WorkerToMain) => void;
  /** The worker itself failed (not the socket: that arrives as a 'lost' message). */
  readonly onWorkerError: (e: Error) => void;
};

type Handle = (m: WorkerToMain) => void;

/** first: everything on the main thread's connection; attaching: the worker dials its own;
 *  moved: the worker's connection carries what the agent sends (requests stay on the first). */
type Phase = 'first' | 'attaching' | 'moved';

const WORKER_URL = new URL('./worker.cjs', import.meta.url);

type RequestMessage = Extract<MainToWorker, { type: 'send' | 'finalize' }>;

/** The first pump's way to the link, on the main thread itself, in place of a MessagePort (one
 *  cost ~1.5 ms of CPU at init and an event-loop turn per frame, on a spawned process's path:
 *  docs/PERFORMANCE.md §5). What the pump relays is queued and handed over one message at a
 *  time, after the pump's current read, with the application's promise jobs all run between
 *  two messages, as between two port messages (an `await link.waitSignal()` loop sees each
 *  signal), and no event-loop turn. pull() (exitCs) takes them at once, as
 *  receiveMessageOnPort would. The queue holds at most what one read of the socket brought
 *  (MAX_APP_FRAME_BYTES per frame) plus the end: it is emptied before the next read. */
class InThreadPort implements PumpPort {
  private readonly queue: RawWorkerToMain[] = [];
  private scheduled = false;
  /** The pump ended (it relays nothing more), or the link let go of it. */
  private ended = false;

  constructor(private readonly deliver: (m: RawWorkerToMain) => void) {}

  postMessage(m: RawWorkerToMain): void {
    if (this.ended) return;
    this.queue.push(m);
    this.schedule();
  }

  private schedule(): void {
    if (this.scheduled || this.queue.length === 0) return;
    this.scheduled = true;
    // A tick queued by a microtask runs once the microtask queue is empty: every promise job the
    // last message started has run (a tick queued by a tick would run before them).
    queueMicrotask(() => process.nextTick(() => {
      this.scheduled = false;
      const m = this.queue.shift();
      try {
        if (m !== undefined) this.deliver(m);
      } finally {
        this.schedule(); // the rest, even past a handler that threw
      }
    }));
  }

  /** The pump has ended: it relays nothing more (what it relayed is still handed over). */
  close(): void {
    this.ended = true;
  }

  /** The link closed: nothing more is handed over (the queue stays empty). */
  detach(): void {
    this.ended = true;
    this.queue.length = 0;
  }

  /** The oldest message not handed over yet. */
  take(): RawWorkerToMain | undefined {
    return this.queue.shift();
  }
}

export class AgentConnection {
  /** The link's end of the first connection's pump; null once closed. */
  private first: InThreadPort | null = null;
  /** The first pump's writes, called directly: every request goes by them while that
   *  connection lasts (null once it has ended, when requests go by the worker). */
  private writes: PumpWrites | null = null;
  /** The main thread's end of the worker's pump, from the welcome on; null before, and once
   *  closed. Nothing is posted to it before: requests go to the worker only once the first
   *  connection has ended, which before the welcome loses the link, and a DGRP tester attaches
   *  after init(). */
  private second: MessagePort | null = null;
  /** Started at the welcome; null before, and once closed. */
  private worker: Worker | null = null;
  private phase: Phase = 'first';
  /** Frames taken from the first connection since the welcome (the replay repeats them). */
  private taken = 0;
  /** Replayed frames still to skip after the switch. */
  private skip = 0;
  /** The connection the finalize was written on (null: none asked for): its close ends the link. */
  private finalizeOn: 'first' | 'second' | null = null;
  /** How the first connection ended while the worker was attaching, for the reason if the
   *  attach then fails. */
  private firstEnd: string | null = null;
  /** The agent refused the worker's connection, and why. */
  private refusal: string | null = null;
  private refd = true;
  /** A bad frame arrived: nothing after it is delivered. */
  private broken = false;

  private constructor(private readonly secondData: Omit<WorkerData, 'port'>, private readonly events: ConnectionEvents) {}

  static open(env: LinkEnv, endpoint: string, flags: SharedFlagBuffers, events: ConnectionEvents): AgentConnection {
    const common = {
      // `@name`: the agent's abstract socket (src/daemon/app-socket.ts); node:net wants the NUL.
      socketPath: env.socketPath.startsWith('@') ? `\0${env.socketPath.slice(1)}` : env.socketPath,
      maxFrameBytes: MAX_APP_FRAME_BYTES,
      connectAttempts: APP_CONNECT_ATTEMPTS,
      connectRetryMs: APP_CONNECT_RETRY_MS,
      connectRetryMaxMs: APP_CONNECT_RETRY_MAX_MS,
      flags,
    };
    const secondData = {
      ...common, mainThread: false, helloFrame: encodeAppFrame(procToAgent, { type: 'attach', task: env.task, vpid: env.vpid, token: env.token }),
    };
    const conn = new AgentConnection(secondData, events);
    const first = new InThreadPort((m) => conn.fromFirst(m, events.onMessage));
    conn.first = first;
    const hello = encodeAppFrame(procToAgent, { type: 'hello', task: env.task, vpid: env.vpid, token: env.token, endpoint });
    conn.writes = runPump({ ...common, mainThread: true, helloFrame: hello }, first);
    conn.writes.ref(conn.refd);
    return conn;
  }

  send(msg: ProcToAgent): void {
    this.post({ type: 'send', bytes: encodeAppFrame(procToAgent, msg) });
  }

  /** Give a DGRP tester thread its own port to the worker (worker.cjs `attach`). */
  attach(port: MessagePort): void {
    this.second?.postMessage({ type: 'attach', port } satisfies MainToWorker, [port]);
  }

  /** Say finalize and end the socket; a 'closed' message follows. */
  finalize(): void {
    this.post({ type: 'finalize', bytes: encodeAppFrame(procToAgent, { type: 'finalize' }) });
  }

  /** What the first connection's pump relayed. */
  private fromFirst(m: RawWorkerToMain, handle: Handle): void {
    if (this.phase !== 'first' && m.type !== 'frame' && !(m.type === 'lost' && m.code === 'WIRE')) {
      // Its end once the worker is attaching: the worker's connection carries the link on (what
      // this one had still to bring comes in the replay; a failed attach loses the link). It is
      // the link's end only after a finalize said on it; otherwise requests go by the worker.
      if (this.finalizeOn === 'first') return handle(m);
      if (this.phase === 'attaching') this.firstEnd = m.type === 'lost' ? m.detail : 'closed';
      this.writes = null;
      return;
    }
    if (this.phase === 'moved') return; // its frames are in the replay
    const msg = this.decode(m, handle);
    if (msg === null) return;
    if (msg.type === 'attached') return this.protocolError('attached on the first connection', handle);
    if (this.phase === 'attaching') this.taken++;
    else if (msg.type === 'welcome' && this.finalizeOn === null) {
      this.startAttach();
      if (this.first === null) return; // the worker could not start: the link is lost
    }
    handle({ type: 'agent', msg });
  }

  /** What the worker's pump relayed: `attached` first, then the replay, then the rest. */
  private fromSecond(m: RawWorkerToMain, handle: Handle): void {
    if (this.phase === 'moved' || m.type === 'frame') {
      const msg = this.decode(m, handle);
      if (msg === null) return;
      if (this.phase !== 'moved') {
        if (msg.type === 'attached') return this.onAttached(msg.replayed, handle);
        if (msg.type !== 'refused') return this.protocolError(`${msg.type} before attached`, handle);
        this.refusal = msg.reason; // its close follows
        return;
      }
      if (msg.type === 'attached') return this.protocolError('a second attached', handle);
      if (this.skip > 0) {
        this.skip--;
        return;
      }
      return handle({ type: 'agent', msg });
    }
    // The worker's connection ended before it was attached. A finalize went on the first
    // connection, whose 'closed' then ends the link; otherwise the link is lost.
    if (this.finalizeOn === 'first') return;
    const detail = this.refusal !== null ? `the agent refused the worker's connection: ${this.refusal}` : m.type === 'lost' ? `the worker's connection: ${m.detail}` : "the worker's connection closed";
    const before = this.firstEnd === null ? '' : ` (the main thread's connection had ended first: ${this.firstEnd})`;
    handle({ type: 'lost', code: 'AGENT_CLOSED', detail: `${detail}${before}` });
  }

  private startAttach(): void {
    this.phase = 'attaching';
    const { MessageChannel, Worker } = threads();
    let worker: Worker;
    try {
      worker = new Worker(WORKER_URL, { execArgv: [] });
    } catch (e) {
      this.events.onWorkerError(e instanceof Error ? e : new Error(String(e)));
      return;
    }
    this.worker = worker;
    worker.unref(); // it never keeps the process alive by itself
    worker.on('error', (e) => this.events.onWorkerError(e));
    const { port1, port2 } = new MessageChannel();
    this.second = port1;
    port1.on('message', (m: RawWorkerToMain) => this.fromSecond(m, this.events.onMessage));
    this.applyRef();
    worker.postMessage({ type: 'start', workerData: { ...this.secondData, port: port2 } } satisfies WorkerStart, [port2]);
  }

  /** The switch: the first `taken` of the `replayed` frames were taken from the first connection
   *  already; the first connection is read no more (requests still go on it). */
  private onAttached(replayed: number, handle: Handle): void {
    if (this.taken > replayed) return this.protocolError(`${replayed} frames replayed, ${this.taken} taken already`, handle);
    this.phase = 'moved';
    this.skip = this.taken;
  }

  /** Decode and check a relayed frame (the pumps only cut the stream into frames): a body that
   *  is not a valid agent message breaks the link, as a bad frame on a stream would. Non-frames
   *  (lost, closed) go to `handle` as they are; null: nothing more to do with `m`. */
  private decode(m: RawWorkerToMain, handle: Handle): AgentToProc | null {
    if (this.broken) return null;
    if (m.type !== 'frame') {
      handle(m);
      return null;
    }
    const tree = unpack(m.body);
    const msg = tree.ok ? agentToProc.dec(tree.value, 'app') : tree;
    if (msg.ok) return msg.value;
    this.protocolError(`${msg.code}: ${msg.detail}`, handle);
    return null;
  }

  private protocolError(detail: string, handle: Handle): void {
    this.broken = true;
    this.close();
    handle({ type: 'lost', code: 'WIRE', detail });
  }

  /** Hand every message the pumps already relayed to `handle`, synchronously, in order. */
  pull(handle: Handle): void {
    for (;;) {
      const a = this.first?.take();
      if (a !== undefined) {
        this.fromFirst(a, handle);
        continue;
      }
      const b = this.second === null ? undefined : threads().receiveMessageOnPort(this.second);
      if (b === undefined) return;
      this.fromSecond(b.message as RawWorkerToMain, handle);
    }
  }

  /** Whether the link keeps the process alive (something awaits the agent). */
  keepAlive(need: boolean): void {
    if (need === this.refd) return;
    this.refd = need;
    this.applyRef();
  }

  private applyRef(): void {
    this.writes?.ref(this.refd);
    if (this.refd) this.second?.ref();
    else this.second?.unref();
  }

  /** Drop the sockets and stop the worker. Idempotent. */
  close(): void {
    this.writes?.close();
    this.second?.postMessage({ type: 'close' } satisfies MainToWorker);
    this.second?.close();
    this.first?.detach();
    this.first = null;
    this.second = null;
    this.writes = null;
    const worker = this.worker;
    this.worker = null;
    if (worker !== null) void worker.terminate();
  }

  /** Requests go on the first connection, written at once, while it lasts (see the header). */
  private post(m: RequestMessage): void {
    if (this.writes !== null) {
      if (m.type === 'send' ? this.writes.send(m.bytes) : this.writes.finalize(m.bytes)) {
        if (m.type === 'finalize') this.finalizeOn = 'first';
        return;
      }
      this.writes = null; // it has ended
    }
    if (m.type === 'finalize') this.finalizeOn = 'second';
    this.second?.postMessage(m);
  }
}
