// The link's socket pump, and the worker thread that runs it: it owns a Unix socket to the agent
// (spec §7: the source's two named pipes and SIGINT). The same code runs twice per process
// (the handover, PROTOCOL §9.4.1): first on the main thread (run(), called by connection.ts),
// which says hello at once and writes every request, and then in the worker thread, which dials
// again with `attach` and reads what the agent sends from `attached` on (and writes a DGRP
// tester's reports). So a spawned process is connected without
// waiting ~25 ms of CPU for a worker to boot. Plain JavaScript, so a worker starts in tens of milliseconds instead
// of registering a TypeScript loader first (docs/PERFORMANCE.md §5: ~250 ms per init and per
// spawned process). It does only what must happen off the main thread:
//   - write the frames the link encoded (hello or attach; on the main thread, signals and
//     finalize; in the worker, a tester's reports);
//   - cut the agent's byte stream into frames (4-byte big-endian length ‖ body, at most
//     workerData.maxFrameBytes; more is a broken stream) and relay each body, in order;
//   - raise the shared flags a signal's number calls for, the moment it arrives, before the main
//     thread (however busy) handles anything (spec §5.2). The rules are the ones of flags.ts:
//     rules[signum] is a bit mask of flag words; raising a word stores 1 and notifies waiters.
// The main thread decodes and checks every body (src/app/link/connection.ts): this file trusts
// nothing it reads, and only peeks at a signal's number.
// A connection that ends before the agent sent a single byte is dialled again, up to
// workerData.connectAttempts times with doubling delays (limits.ts APP_CONNECT_ATTEMPTS): the
// agent drops the oldest connections that have not said hello when strangers fill its socket
// (src/daemon/app-socket.ts, issue 14 item 8), and a process must not fail for that. Once the
// agent has spoken (welcome or refused), a close is final.
// A DGRP task's tester thread (src/app/dgrp/tester-worker.ts) gets a port of its own ('attach'):
// every `dgrp` view is copied to it (the last one at once, as it may predate the port), and it
// sends its reports through here, so neither waits for a busy main thread (PROTOCOL §12.2).
// The worker waits for its start message, { type: 'start', workerData }, and only then dials. On the main thread
// (workerData.mainThread) the pump relays to an in-thread queue instead of a MessagePort
// (connection.ts InThreadPort), is written to by direct calls only, and its socket and retry
// timer keep the process alive only while the link asks (ref(), connection.ts keepAlive).
// CommonJS, because a worker thread boots in ~31 ms of CPU from a CommonJS file against ~39 from
// an ES module (docs/PERFORMANCE.md §5): CPU a spawned process's other work shares two cores with.
'use strict';
const { connect } = require('node:net');

// Started as a worker thread: wait for the start message. Imported (the main thread, where
// node:worker_threads is loaded only when the worker starts): only run().
if (require.main === module) {
  const { parentPort } = require('node:worker_threads');
  if (parentPort !== null) parentPort.once('message', (m) => run(m.workerData, m.workerData.port));
}
module.exports = { run };

function run(workerData, port) {
  const { socketPath, helloFrame, maxFrameBytes, connectAttempts, connectRetryMs, connectRetryMaxMs, mainThread } = workerData;
  /** Whether the socket and the retry timer keep the process alive: in the worker, always (the
   *  worker itself is unref'd); on the main thread, while the link asks (ref() below). */
  let refd = !mainThread;
  const words = new Int32Array(workerData.flags.words);
  const rules = new Uint8Array(workerData.flags.rules);
  /** The handover (PROTOCOL §9.4.1): frames since the welcome whose flag rules were applied,
   *  shared by both pumps, so a frame read by the main thread and again in the worker's replay
   *  raises its flags once (a flag the application cleared meanwhile stays clear). */
  const applied = new Int32Array(workerData.flags.seq);
  /** This connection's frames after its first (the welcome, or attached: the same numbering, as
   *  the replay starts from the welcome). */
  let index = -1;
  /** Sends written on a connection the agent has not answered yet: written again if it closes
   *  unanswered and is dialled again; queued while no socket is open. */
  let unanswered = [];
  /** The current socket; null while waiting to dial again. */
  let socket = null;
  let attempts = 0;
  let retryTimer = null;
  /** The agent sent something on the current socket: its close is no longer retried. */
  let heard = false;
  /** The current socket's read side ended (the agent closed it). */
  let ended = false;
  let buf = Buffer.alloc(0);
  let finalizing = false;
  /** The main thread asked to drop the socket. */
  let closing = false;
  let lost = null;
  let done = false;
  /** The tester's port, and the last `dgrp` view body for a tester not attached yet. */
  let tester = null;
  let lastView = null;

  const post = (m, transfer) => port.postMessage(m, transfer);

  /** agentToProc's `signal` is the union's code 4 with 7 fields: canonical msgpack starts
   *  0x98 (an 8-array), 0x04, then the signal number as a uint. Anything else is not a signal. */
  function signalNumber(body) {
    if (body.length < 3 || body[0] !== 0x98 || body[1] !== 0x04) return -1;
    const b = body[2];
    if (b <= 0x7f) return b;
    if (b === 0xcc && body.length >= 4) return body[3];
    if (b === 0xcd && body.length >= 5) return body.readUInt16BE(3);
    if (b === 0xce && body.length >= 7) return body.readUInt32BE(3);
    return -1;
  }

  function applyRules(signum) {
    if (signum < 1 || signum >= rules.length) return;
    const mask = Atomics.load(rules, signum);
    for (let word = 0; word < words.length; word++) {
      if ((mask & (1 << word)) === 0) continue;
      Atomics.store(words, word, 1);
      Atomics.notify(words, word);
    }
  }

  /** agentToProc's `dgrp` view is the union's code 5 with 3 fields: 0x94 (a 4-array), 0x05. */
  const isView = (body) => body.length >= 2 && body[0] === 0x94 && body[1] === 0x05;

  function attach(p) {
    tester = p;
    p.on('message', (m) => {
      if (m.type !== 'send' || finalizing || done) return;
      if (socket !== null && !socket.destroyed) socket.write(m.bytes);
      if (!heard) unanswered.push(m.bytes);
    });
    if (lastView !== null) p.postMessage({ type: 'frame', body: lastView });
  }

  /** Between dials: no socket will close, so end here. */
  function stopRetrying() {
    if (retryTimer !== null) clearTimeout(retryTimer);
    retryTimer = null;
    finish();
  }

  function finish() {
    if (done) return;
    done = true;
    if (finalizing && lost === null) post({ type: 'closed' });
    else post({ type: 'lost', ...(lost ?? { code: 'AGENT_CLOSED', detail: 'the agent closed the connection' }) });
    port.close();
  }

  /** Dial the agent and say hello; a close before it said anything dials again (see above). */
  function dial() {
    retryTimer = null;
    attempts++;
    heard = false;
    ended = false;
    lost = null;
    index = -1;
    buf = Buffer.alloc(0);
    const s = connect(socketPath);
    if (!refd) s.unref();
    socket = s;
    // Written at once (a connecting socket queues writes in order): hello or attach first, then
    // what was sent before the agent answered.
    s.write(helloFrame);
    for (const bytes of unanswered) s.write(bytes);
    s.on('data', (chunk) => onData(s, chunk));
    // The agent's end of it is gone: nothing written from here on would be read.
    s.on('end', () => {
      if (s === socket) ended = true;
    });
    s.on('error', (e) => {
      if (lost === null && !finalizing) lost = { code: 'SOCKET_ERROR', detail: `${e.code ?? ''} ${e.message}`.trim() };
    });
    s.on('close', () => {
      if (s !== socket) return;
      if (!heard && !finalizing && !closing && attempts < connectAttempts) {
        socket = null;
        retryTimer = setTimeout(dial, Math.min(connectRetryMs * 2 ** (attempts - 1), connectRetryMaxMs));
        if (!refd) retryTimer.unref();
        return;
      }
      finish();
    });
  }

  function onData(s, chunk) {
    if (s !== socket || lost !== null) return;
    heard = true;
    unanswered = [];
    buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
    while (buf.length >= 4) {
      const len = buf.readUInt32BE(0);
      if (len > maxFrameBytes) {
        lost = { code: 'WIRE', detail: `WIRE_LIMIT: frame of ${len} bytes > ${maxFrameBytes}` };
        socket.destroy();
        return;
      }
      if (buf.length < 4 + len) return;
      const body = new Uint8Array(len);
      body.set(buf.subarray(4, 4 + len));
      buf = buf.subarray(4 + len);
      if (index >= 0 && Atomics.compareExchange(applied, 0, index, index + 1) === index) {
        applyRules(signalNumber(Buffer.from(body.buffer, body.byteOffset, body.length)));
      }
      index++;
      if (isView(body)) {
        lastView = body.slice();
        tester?.postMessage({ type: 'frame', body: lastView });
      }
      post({ type: 'frame', body }, [body.buffer]);
    }
  }

  /** This pump can write no more: it has ended, or its socket broke after the agent spoke (a
   *  socket that never answered is dialled again, and writes wait in `unanswered`). */
  const gone = () => done || (heard && (socket === null || socket.destroyed || ended || lost !== null));

  /** Write a frame the link encoded (a request); false once this pump can write no more. */
  function send(bytes) {
    if (gone()) return false;
    if (finalizing) return true;
    if (socket !== null && !socket.destroyed) socket.write(bytes);
    if (!heard) unanswered.push(bytes);
    return true;
  }

  /** Write the finalize frame and end the socket; 'closed' follows once it is gone. */
  function finalize(bytes) {
    if (gone()) return false;
    if (finalizing) return true;
    finalizing = true;
    if (socket !== null && !socket.destroyed) socket.end(bytes);
    else stopRetrying();
    return true;
  }

  /** Drop the socket at once (the link is closing). */
  function close() {
    if (done) return;
    tester?.close();
    closing = true;
    if (lost === null && !finalizing) lost = { code: 'AGENT_CLOSED', detail: 'closed by the application' };
    if (socket !== null) socket.destroy();
    else stopRetrying();
  }

  /** Keep the process alive while `on` (the main thread's link awaits the agent). */
  function ref(on) {
    refd = on;
    for (const h of [socket, retryTimer]) {
      if (h === null) continue;
      if (on) h.ref();
      else h.unref();
    }
  }

  dial();

  // On the main thread the link calls these directly (connection.ts): a request leaves at once,
  // even from a loop that never yields, where a message would wait for the event loop. The
  // worker's pump gets them as messages from the main thread.
  if (mainThread) return { send, finalize, close, ref };
  port.on('message', (m) => {
    if (done) return;
    switch (m.type) {
      case 'send':
        send(m.bytes);
        return;
      case 'finalize':
        finalize(m.bytes);
        return;
      case 'attach':
        attach(m.port);
        return;
      case 'close':
        close();
        return;
    }
  });
  return { send, finalize, close, ref };
}
