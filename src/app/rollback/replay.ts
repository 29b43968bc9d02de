// A replacement's replay (docs/PROTOCOL.md §11.3; radic-hmpl A.2.7's roll-forward): the log
// entries after its checkpoint re-enter its rank channels in log order — messages into the
// queue (a message logged as fragments joined first), determinants as the choices its wildcard
// receives must make again — and the moment its program has taken every replayed message is
// noted (it has caught up: the recovery's end, for its report).
import { concatBytes } from '../../base/bytes.ts';
import { replayDeterminant, replayMessage, type ChannelState, type Envelope } from './channels.ts';
import type { LogEntry } from './codec.ts';

export class Replayer {
  /** The fragments of a message read so far. */
  private partial: { source: number; env: Envelope; parts: Uint8Array[] } | null = null;
  /** The last log position replayed, until the program has taken every replayed message. */
  private replayedTo = 0;
  private onCaughtUp: (() => void) | null = null;

  constructor(private readonly st: ChannelState) {}

  /** Fragments of a message whose log did not complete (its receiver died while logging it)
   *  are dropped: it was never acknowledged, so its sender sends it again. */
  replay(pos: number, e: LogEntry): void {
    if (e.kind !== 'fragment') this.partial = null;
    if (e.kind === 'message') replayMessage(this.st, e.source, pos, e.env);
    else if (e.kind === 'determinant') replayDeterminant(this.st, pos, e.index, e.det);
    else {
      const p = this.partial;
      const next = p !== null && p.source === e.source && p.env.ssn === e.env.ssn && e.index === p.parts.length ? p : null;
      if (e.index !== 0 && next === null) {
        this.partial = null;
        return;
      }
      const cur = next ?? { source: e.source, env: e.env, parts: [] };
      cur.parts.push(e.env.data);
      this.partial = cur;
      if (cur.parts.length < e.total) return;
      this.partial = null;
      replayMessage(this.st, e.source, pos, { ...cur.env, data: concatBytes(cur.parts) });
    }
  }

  /** Call `f` once the program has taken every replayed message and determinant. */
  whenCaughtUp(f: () => void): void {
    this.replayedTo = this.st.logPos;
    this.onCaughtUp = f;
    this.check();
  }

  check(): void {
    if (this.onCaughtUp === null) return;
    if (this.st.replayDets.size > 0 || this.st.queue.some((m) => m.pos > 0 && m.pos <= this.replayedTo)) return;
    const f = this.onCaughtUp;
    this.onCaughtUp = null;
    f();
  }
}
