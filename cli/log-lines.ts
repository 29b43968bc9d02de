// The part of `trine logs` both of its sources share (cli/logs.ts): one task output file read
// as a stream of chunks from where the last one stopped, turned into complete lines prefixed
// `[t3/0] ` (stdout) or `[t3/0 err] ` (stderr). A partial last line waits for its end, or for
// flush() once the file is complete. The chunks come from the file itself on a one-host cluster
// (the spawner's files, shared by every node) or from the agent that holds it on a cluster of
// several hosts (`logs.data`, PROTOCOL §7.1): the offsets, the restart of a replaced file and
// the line handling are the same. With --json each line is a `trine.log/1` object instead
// (cli/json-out.ts): the task, the VPID, the stream and the line without its prefix.
import { jsonLine, SCHEMAS } from './json-out.ts';

/** Bytes read from one local file per read, and the longest line held back waiting for its
 *  end: bounds memory whatever a process writes. */
export const LOG_READ_BYTES = 1024 * 1024;

export type Stream = 'out' | 'err';

export class LineReader {
  /** Where the next chunk starts in the file. */
  private position = 0;
  private partial: Buffer = Buffer.alloc(0);
  readonly prefix: string;

  constructor(
    readonly task: string,
    readonly vpid: number,
    readonly stream: Stream,
    /** Lines as `trine.log/1` JSON objects (without their newline) instead of prefixed text. */
    private readonly json = false,
  ) {
    this.prefix = `[${task}/${vpid}${stream === 'err' ? ' err' : ''}] `;
  }

  /** One line of output as printed. */
  private render(bytes: Buffer): string {
    const line = bytes.toString('utf8');
    return this.json ? jsonLine(SCHEMAS.log, { task: this.task, vpid: this.vpid, stream: this.stream, line }).slice(0, -1) : `${this.prefix}${line}`;
  }

  get offset(): number {
    return this.position;
  }

  /** The file is `size` bytes now: smaller than what was read means it was replaced, so the
   *  next chunk starts over from its beginning. */
  resize(size: number): void {
    if (size < this.position) this.position = 0;
  }

  /** The bytes of the file at `offset`: the complete lines they end, prefixed. */
  take(chunk: Uint8Array): string[] {
    const out: string[] = [];
    this.position += chunk.length;
    let data = Buffer.concat([this.partial, chunk]);
    let nl = data.indexOf(0x0a);
    while (nl >= 0) {
      out.push(this.render(data.subarray(0, nl)));
      data = data.subarray(nl + 1);
      nl = data.indexOf(0x0a);
    }
    // A line longer than the read size is printed in pieces rather than held forever.
    if (data.length >= LOG_READ_BYTES) {
      out.push(this.render(data));
      data = Buffer.alloc(0);
    }
    this.partial = data;
    return out;
  }

  /** A last line without a newline, once the file is complete. */
  flush(): string[] {
    if (this.partial.length === 0) return [];
    const line = this.render(this.partial);
    this.partial = Buffer.alloc(0);
    return [line];
  }
}
