// What both rollback message layers (rank-channels.ts over the P2P mesh, cm-channels.ts through
// channel memories; docs/PROTOCOL.md §11.3, §11.6) give CommLayer alike: ranks for VPIDs, every
// send copied into an envelope and posted, every receive a pattern, no communicator ever
// discarded (ranks outlive their processes), and CLOSED once finalize or a fatal error closed
// the layer. Each layer says how a message is posted and how a receive is matched.
import type { Message } from '../gmpi/matching.ts';
import { P2PError } from '../gmpi/p2p-types.ts';
import type { ChannelState, Envelope, Pattern } from './channels.ts';

export abstract class RankLayer {
  abstract readonly st: ChannelState;
  /** Why the layer closed (finalize, or a failure that ends the process), or null. */
  protected closed: Error | null = null;

  protected abstract post(dest: number, m: Omit<Envelope, 'ssn' | 'epoch'>): Promise<void>;
  protected abstract receive(pattern: Pattern): Promise<Message>;

  size(): number {
    return this.st.size;
  }
  send(dest: number, tag: number, data: Uint8Array, comm = 0, structured = false): Promise<void> {
    return this.post(dest, { comm, tag, structured, data: data.slice() });
  }
  sendLib(dest: number, tag: number, data: Uint8Array, comm: number, structured = false): Promise<void> {
    return this.post(dest, { comm, tag, structured, data: data.slice() });
  }
  recv(source: number, tag: number, comm = 0): Promise<Message> {
    return this.receive({ source, tag, comm });
  }
  recvLib(source: number, tag: number, comm: number): Promise<Message> {
    return this.receive({ source, tag, comm });
  }
  isDiscarded(): boolean {
    return false; // rollback tasks never replace a communicator: ranks outlive their processes
  }
  discardComm(): void {}
  callError(): P2PError | null {
    return this.closed === null ? null : new P2PError('CLOSED', this.closed.message);
  }
}
