// Every limit and timeout of the application library (STYLE.md 9), each with why it has its
// value. The agent side's are in src/daemon/app-socket.ts.

/** Shared flag words (alert, invalid, and a few for G-MPI or the application). Each rule byte
 *  holds one bit per word, so eight is the most one byte can address. */
export const FLAG_WORDS = 8;
/** Delivered signals held while a critical section or a handler runs. The manager sends a few
 *  signals per epoch; only a flood of point-to-point signals from a faulty peer reaches this,
 *  and those beyond it are dropped and counted rather than growing memory without end. */
export const MAX_QUEUED_SIGNALS = 65536;
/** Pending waitSignal()/requestOutcome() promises: a loop that waits without awaiting is a bug. */
export const MAX_WAITERS = 1024;
/** Outcomes nobody has read yet. A request yields at most two (own-ack, then own-reply) and a
 *  new request discards older unread ones, so four is ample. */
export const MAX_UNREAD_OUTCOMES = 4;
/** Nested enterCs() calls; deeper nesting is a missing exitCs(). */
export const MAX_CS_DEPTH = 1024;
/** How long init waits for the mapping. The agent sends it once every member has connected,
 *  which the task's Start-TO bounds (5 s per attempt, three attempts: spec §6.1 T3–T5). */
export const INIT_TIMEOUT_MS = 60_000;
/** Dials of the agent's socket while the agent closes the connection before it says anything
 *  (issue 14 item 8): strangers filling the socket make the agent drop the oldest connections
 *  that have not said hello yet, which can be ours. Eight dials 25 ms apart doubling up to
 *  400 ms span about 1.6 s, far inside the agent's connect timeout (15 s), and a process whose
 *  agent is really gone fails 1.6 s later than it would have. */
export const APP_CONNECT_ATTEMPTS = 8;
export const APP_CONNECT_RETRY_MS = 25;
export const APP_CONNECT_RETRY_MAX_MS = 400;
/** How long finalize waits for the agent to see the finalize and the socket to close. A local
 *  socket closes in microseconds; past this the worker is stopped anyway. */
export const FINALIZE_TIMEOUT_MS = 2000;
/** A process's progress reports (PROTOCOL §13.2) reach the group at most this often: each is an
 *  ordered request, and a tight loop calling progress() must not flood the group. Ten a second
 *  is finer than any straggler judgement needs (the flags compare shares of minutes of work). */
export const PROGRESS_MIN_INTERVAL_MS = 100;
