// The catalogue of `trine inject` modes (docs/OPERATIONS.md §7), shared by the CLI (usage,
// argument counts, who performs a mode) and the daemons (which links exist). Pure data.
//
// A mode is performed either by the CLI itself — process-level faults on a local cluster,
// which are signals to pids this host can see — or by a daemon, which the CLI asks over the
// operator channel (`inject` → `inject.reply`) and whose handler is registered in
// src/daemon/inject-handlers.ts. A daemon mode listed here but registered by no daemon answers
// "not available yet".
import type { ProcessId } from '../core/ports.ts';
import type { ClusterConfig } from './cluster-dir.ts';

export type InjectModeSpec = {
  mode: string;
  /** Arguments as typed: `R`, `A B MS`. */
  usage: string;
  summary: string;
  /** `cli`: the command does it; `daemon`: the daemon named by the arguments does (for `slow`
   *  and a one-argument `heal`, the agent of the target's node). */
  by: 'cli' | 'daemon';
  minArgs: number;
  maxArgs: number;
};

export const INJECT_MODES: readonly InjectModeSpec[] = [
  { mode: 'kill-replica', usage: 'R', summary: 'SIGKILL replica R', by: 'cli', minArgs: 1, maxArgs: 1 },
  { mode: 'kill-agent', usage: 'N', summary: "SIGKILL node N's agent (N: a node nK or its agent aK); its keeper replaces it", by: 'cli', minArgs: 1, maxArgs: 1 },
  {
    mode: 'kill-node', usage: 'N', summary: "SIGKILL node N's keeper, agent, standby, task processes and replica", by: 'cli', minArgs: 1, maxArgs: 1,
  },
  { mode: 'hang', usage: 'PID', summary: 'SIGSTOP a process of the cluster (a pid, a daemon id, or a task process t3/0)', by: 'cli', minArgs: 1, maxArgs: 1 },
  { mode: 'resume', usage: 'PID', summary: 'SIGCONT a process hung with hang', by: 'cli', minArgs: 1, maxArgs: 1 },
  { mode: 'drop', usage: 'A B', summary: 'drop every frame A sends to B (until heal)', by: 'daemon', minArgs: 2, maxArgs: 2 },
  { mode: 'delay', usage: 'A B MS', summary: 'delay every frame A sends to B by MS ms (until heal)', by: 'daemon', minArgs: 3, maxArgs: 3 },
  { mode: 'heal', usage: 'A B | T', summary: 'undo drop or delay from A to B, or end slow T', by: 'daemon', minArgs: 1, maxArgs: 2 },
  { mode: 'corrupt-replica', usage: 'R [slots|csn|chain]', summary: "corrupt replica R's replicated state (a node's slot count by default)", by: 'daemon', minArgs: 1, maxArgs: 2 },
  { mode: 'byzantine-replica', usage: 'R MODE', summary: 'make replica R misbehave: equivocate, wrong-command, skip-rsn, silent-heartbeating or drop-agent-messages', by: 'daemon', minArgs: 2, maxArgs: 2 },
  {
    mode: 'slow', usage: 'T --share P [--for MS] [--period MS]', summary: "run task process T (t3/0), or every task process of node T (n2), at P % CPU, by its node's agent (until heal T)",
    by: 'daemon', minArgs: 1, maxArgs: 1,
  },
];

export function injectModeSpec(mode: string): InjectModeSpec | null {
  return INJECT_MODES.find((m) => m.mode === mode) ?? null;
}

/** Whether `a` and `b` exchange frames (docs/OPERATIONS.md §2, who dials whom): replicas with
 *  each other, with every agent and with the watchdog. Agents talk to no one else. */
export function linked(config: ClusterConfig, a: ProcessId, b: ProcessId): boolean {
  if (a === b) return false;
  const kind = (id: ProcessId) => config.processes.find((p) => p.id === id)?.kind ?? null;
  const ka = kind(a);
  const kb = kind(b);
  if (ka === null || kb === null || ka === 'operator' || kb === 'operator') return false;
  return ka === 'replica' || kb === 'replica';
}
