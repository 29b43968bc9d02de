// A communicator's operations (spec §5.1–§5.2): point to point and the collectives on one
// communicator, each run through the caller's guard (Gmpi's: finalized, the flags, and the
// layers' errors mapped to G-MPI's codes). The world communicator's are Gmpi's own methods; a
// DGRP round's communicator of the recommended members is one of these (PROTOCOL §12.5).
import * as coll from './collectives.ts';
import type { Comm, CommLayer, CommMessage } from './comm.ts';

export type Guard = <T>(op: () => Promise<T>) => Promise<T>;

export class CommOps {
  constructor(private readonly layer: CommLayer, readonly comm: Comm, private readonly guard: Guard) {}

  rank(): number {
    return this.layer.rank(this.comm);
  }

  size(): number {
    return this.layer.size(this.comm);
  }

  /** The VPID of a rank here (BAD_RANK for no such rank). */
  vpidOf(rank: number): number {
    return this.layer.vpidOf(this.comm, rank);
  }

  send(dest: number, tag: number, data: unknown): Promise<void> {
    return this.guard(() => this.layer.send(this.comm, dest, tag, data));
  }

  recv<T = unknown>(source: number, tag: number): Promise<CommMessage<T>> {
    return this.guard(() => this.layer.recv<T>(this.comm, source, tag));
  }

  barrier(): Promise<void> {
    return this.guard(() => coll.barrier(this.layer, this.comm));
  }

  bcast<T>(root: number, value?: T): Promise<T> {
    return this.guard(() => coll.bcast(this.layer, this.comm, root, value));
  }

  reduce<T>(root: number, value: T, op: coll.ReduceOp<T>): Promise<T | undefined> {
    return this.guard(() => coll.reduce(this.layer, this.comm, root, value, op));
  }

  allreduce<T>(value: T, op: coll.ReduceOp<T>): Promise<T> {
    return this.guard(() => coll.allreduce(this.layer, this.comm, value, op));
  }

  gather<T>(root: number, value: T): Promise<T[] | undefined> {
    return this.guard(() => coll.gather(this.layer, this.comm, root, value));
  }

  scatter<T>(root: number, values?: readonly T[]): Promise<T> {
    return this.guard(() => coll.scatter(this.layer, this.comm, root, values));
  }

  allgather<T>(value: T): Promise<T[]> {
    return this.guard(() => coll.allgather(this.layer, this.comm, value));
  }
}
