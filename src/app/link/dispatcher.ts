// The delivery queue of the main thread (spec §4.2, §5.4): handlers run one at a time, in
// delivery order, never concurrently and never re-entered; a critical section holds deliveries
// and exitCs() delivers what was held before it returns. Pure: the caller feeds items and
// supplies `deliver`, which must not throw: the link runs each handler under runGuarded.
import { assert } from '../../base/result.ts';

export class Dispatcher<T> {
  private items: T[] = [];
  private head = 0;
  private depth = 0;
  private running = false;
  private droppedCount = 0;

  constructor(private readonly deliver: (item: T) => void, private readonly maxQueued: number) {}

  get queued(): number {
    return this.items.length - this.head;
  }

  get dropped(): number {
    return this.droppedCount;
  }

  get csDepth(): number {
    return this.depth;
  }

  /** True while a handler runs (a nested delivery would be queued, not run). */
  get delivering(): boolean {
    return this.running;
  }

  /** Queue one item; false (and counted) when the queue is full. Call drain() to deliver. */
  push(item: T): boolean {
    if (this.queued >= this.maxQueued) {
      this.droppedCount++;
      return false;
    }
    this.items.push(item);
    return true;
  }

  enter(): void {
    this.depth++;
  }

  exit(): void {
    assert(this.depth > 0, 'exit without enter');
    this.depth--;
  }

  /** Deliver queued items in order until the queue is empty or a critical section starts.
   *  Inside a delivery it does nothing: the outer loop goes on with the rest. */
  drain(): void {
    if (this.running) return;
    this.running = true;
    try {
      while (this.depth === 0 && this.head < this.items.length) {
        const item = this.items[this.head] as T;
        this.items[this.head] = undefined as T;
        this.head++;
        this.deliver(item);
      }
    } finally {
      this.running = false;
      if (this.head === this.items.length) {
        this.items = [];
        this.head = 0;
      } else if (this.head > 1024 && this.head * 2 > this.items.length) {
        this.items = this.items.slice(this.head);
        this.head = 0;
      }
    }
  }
}

/** Run a handler (or hook) for delivery `s`: what it throws goes to `onError` (default
 *  console.error) and no further, so later deliveries go on. */
export function runGuarded<S extends { readonly signum: number }>(s: S, fn: () => void, onError: ((error: unknown, s: S) => void) | null): void {
  try {
    fn();
  } catch (e) {
    try {
      if (onError !== null) onError(e, s);
      else console.error(`trine/app: handler for signal ${s.signum} threw:`, e);
    } catch {
      // A throwing error hook must not stop deliveries either.
    }
  }
}
