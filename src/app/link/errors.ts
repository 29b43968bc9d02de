// The library's typed errors (STYLE.md 7): a stable code, and a message saying what was wrong
// and what to do. Misuse (a bad signal number, a second outstanding request) is thrown
// synchronously and nothing is sent.

export type LinkErrorCode =
  /** A TRINE_* variable is missing: the program was not started by Trine. */
  | 'NOT_IN_TRINE'
  /** A TRINE_* variable is malformed. */
  | 'BAD_ENV'
  | 'BAD_OPTION'
  /** The agent refused the hello, or disconnected us with a reason. */
  | 'REFUSED'
  /** The connection to the agent is gone. */
  | 'LINK_LOST'
  | 'INIT_TIMEOUT'
  /** The agent broke the channel's protocol (a frame out of order). */
  | 'PROTOCOL'
  | 'FINALIZED'
  /** Signal number not allowed for that destination (spec §4.2, §4.3). */
  | 'BAD_SIGNAL'
  | 'NOT_A_MEMBER'
  | 'BAD_ARG'
  /** A broadcast or group request is still outstanding (spec §4.4: at most one). */
  | 'REQUEST_OUTSTANDING'
  /** Our group request was acknowledged; no new group request until its reply (spec §4.6). */
  | 'ACK_PENDING'
  /** requestOutcome() with no request sent. */
  | 'NO_REQUEST'
  | 'BAD_FLAG'
  /** exitCs() without enterCs(). */
  | 'NOT_IN_CS'
  | 'LIMIT';

export class LinkError extends Error {
  constructor(readonly code: LinkErrorCode, message: string) {
    super(message);
    this.name = 'LinkError';
  }
}
