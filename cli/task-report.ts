// How tasks, processes and nodes look to the operator: the `trine ps` and `trine nodes` tables,
// the progress lines of `trine submit --wait`, and the exit code a finished task maps to
// (docs/OPERATIONS.md §1.1). Pure: views in, text and numbers out.
import type { ClusterEvent, ClusterView, NodeView, ProcView, TaskView } from '../src/core/status.ts';

/** FsmTask's final states (fsm/fsm-task.ts FSM_TASK_FINAL_STATES). */
const TASK_FINAL_STATES: readonly string[] = ['terminatedNormally', 'terminatedAbnormally'];
/** FsmProc's final states (fsm/fsm-proc.ts FSM_PROC_FINAL_STATES). */
const PROC_FINAL_STATES: readonly string[] = ['spawnFailed', 'terminatedNormally', 'terminatedAbnormally'];
/** Exit codes a finished task can map to: 126 and up mean "could not run" and "killed by a
 *  signal" to shells, so a task's own code is capped below them. */
export const MAX_TASK_EXIT_CODE = 125;

export function isFinished(t: TaskView): boolean {
  return t.outcome !== null || TASK_FINAL_STATES.includes(t.state);
}

function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join('  ').trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}

const processes = (n: number) => `${n} process${n === 1 ? '' : 'es'}`;

/** How a process ended: "code 1", "SIGKILL", or "-" while it has not. */
export function procExit(p: ProcView): string {
  if (p.exitCode !== null) return `code ${p.exitCode}`;
  if (p.signal !== null) return p.signal;
  return '-';
}

/** The INFO column of a task: why it waits, how it ended, or its last failed start. */
export function taskInfo(t: TaskView): string {
  if (isFinished(t)) return `${t.outcome ?? 'finished'}: ${t.reason ?? '-'}`;
  const parts: string[] = [];
  if (t.waitReason !== null) parts.push(t.waitReason);
  if (t.failure !== null) parts.push(`start attempt ${t.startAttempts} failed: ${t.failure}`);
  if (t.restarted) parts.push('restarted');
  return parts.join('; ');
}

/** The INFO column of a process: why it ended, a straggler-policy task's progress and flag
 *  ("31 % done, STRAGGLER"; PROTOCOL §13), and a DGRP task's process left out of the group
 *  ("out of the DGRP"; §12.3). */
export function procInfo(p: ProcView): string {
  const parts: string[] = [];
  if (p.progress !== null) parts.push(`${Math.floor(p.progress / 10)} % done`);
  if (p.straggler) parts.push('STRAGGLER');
  if (p.recommended === false) parts.push('out of the DGRP');
  const progress = parts.join(', ');
  return p.reason === null ? progress : progress === '' ? p.reason : `${p.reason}; ${progress}`;
}

/** The `trine ps` table: one row per task, then one per process (`t3/0`), in one set of columns. */
export function formatTasks(tasks: readonly TaskView[]): string {
  if (tasks.length === 0) return 'no tasks: submit one with `trine submit -- CMD ARGS…`';
  const rows: string[][] = [];
  for (const t of tasks) {
    rows.push([t.id, t.name, t.state, String(t.size), '', '', '', taskInfo(t)]);
    for (const p of t.procs) {
      // A rollback task's process shows its rank where a task shows its name (PROTOCOL §11.2).
      rows.push([`${t.id}/${p.vpid}`, p.rank === null ? '' : `rank ${p.rank}`, p.state, '', p.node ?? '-', p.pid === null ? '-' : String(p.pid), procExit(p), procInfo(p)]);
    }
  }
  return table(['ID', 'NAME', 'STATE', 'SIZE', 'NODE', 'PID', 'EXIT', 'INFO'], rows);
}

/** A replica's journal (`trine ps TASK`): its own wall clock, so say whose it is. */
export function formatEvents(events: readonly ClusterEvent[], from: string): string {
  if (events.length === 0) return `no events in ${from}'s journal`;
  const rows = events.map((e) => [new Date(e.atMs).toISOString().slice(11, 23), String(e.rsn), e.text]);
  return `events (${from}'s clock, UTC):\n${table(['TIME', 'RSN', 'EVENT'], rows)}`;
}

/** The `trine nodes` table. */
export function formatNodes(nodes: readonly NodeView[]): string {
  if (nodes.length === 0) return 'no nodes';
  return table(
    ['NODE', 'AGENT', 'STATE', 'SLOTS', 'INC'],
    nodes.map((n) => [n.node, n.agent, n.state, `${n.used}/${n.slots}`, String(n.inc)]),
  );
}

/** A view narrowed to one task: its row and its events (`trine ps TASK`). */
export function narrowView(view: ClusterView, task: string): ClusterView {
  return { ...view, tasks: view.tasks.filter((t) => t.id === task), events: view.events.filter((e) => e.task === task) };
}

/** One line for the state of a task, e.g. "t3 running (4 processes)". */
export function describeTask(t: TaskView): string {
  if (isFinished(t)) return `${t.id} ${t.state}${t.reason === null ? '' : `: ${t.reason}`}`;
  const live = t.procs.filter((p) => p.state === 'running').length;
  const base = t.state === 'running' ? `${t.id} running (${processes(live)})` : `${t.id} ${t.state}`;
  const info = taskInfo(t);
  return info === '' ? base : `${base}: ${info}`;
}

/** One line for a process that ended, e.g. "t3/1 terminatedAbnormally (code 2): …". */
function describeProcEnd(task: string, p: ProcView): string {
  const exit = procExit(p);
  return `${task}/${p.vpid} ${p.state}${exit === '-' ? '' : ` (${exit})`}${p.reason === null ? '' : `: ${p.reason}`}`;
}

/** One change `trine submit --wait` reports: a process that ended, or the task's new state.
 *  `text` is the line printed without --json; the rest is the `trine.task-change/1` object. */
export type TaskChange =
  | { change: 'proc'; task: string; vpid: number; state: string; node: string | null; exitCode: number | null; signal: string | null; reason: string | null; text: string }
  | { change: 'task'; task: string; state: string; running: number; info: string; text: string };

/** Follows one task across polls for `trine submit --wait`: what to print when it changed, and
 *  which process was the first seen exiting non-zero (its code becomes the exit code). */
export class TaskWatch {
  private lastLine: string | null = null;
  private readonly procEnds = new Map<number, string>();
  private firstNonZero: number | null = null;

  /** Lines to print for the task as `t` shows it now: process endings, then the task's line. */
  observe(t: TaskView): string[] {
    return this.changes(t).map((c) => c.text);
  }

  /** What changed since the last call, as `t` shows it now: process endings, then the task. */
  changes(t: TaskView): TaskChange[] {
    const out: TaskChange[] = [];
    const failed: { vpid: number; code: number }[] = [];
    for (const p of [...t.procs].sort((a, b) => a.vpid - b.vpid)) {
      if (!PROC_FINAL_STATES.includes(p.state)) {
        this.procEnds.delete(p.vpid); // restarted: its next ending is news again
        continue;
      }
      const line = describeProcEnd(t.id, p);
      if (this.procEnds.get(p.vpid) === line) continue;
      this.procEnds.set(p.vpid, line);
      out.push({ change: 'proc', task: t.id, vpid: p.vpid, state: p.state, node: p.node, exitCode: p.exitCode, signal: p.signal, reason: p.reason, text: line });
      if (p.exitCode !== null && p.exitCode !== 0) failed.push({ vpid: p.vpid, code: p.exitCode });
    }
    if (this.firstNonZero === null && failed[0] !== undefined) this.firstNonZero = failed[0].code;
    const line = describeTask(t);
    if (line !== this.lastLine) {
      this.lastLine = line;
      out.push({ change: 'task', task: t.id, state: t.state, running: t.procs.filter((p) => p.state === 'running').length, info: taskInfo(t), text: line });
    }
    return out;
  }

  /** The exit code of `trine submit --wait` for a finished task, and the reason to print. */
  exitFor(t: TaskView): { code: number; reason: string | null } {
    if (t.outcome === 'normal' || (t.outcome === null && t.state === 'terminatedNormally')) return { code: 0, reason: null };
    const fromView = [...t.procs].sort((a, b) => a.vpid - b.vpid).find((p) => p.exitCode !== null && p.exitCode !== 0)?.exitCode ?? null;
    const code = this.firstNonZero ?? fromView;
    const reason = `${t.id} terminated abnormally: ${t.reason ?? 'no reason given'}${t.failure !== null && !(t.reason ?? '').includes(t.failure) ? ` (last start: ${t.failure})` : ''}`;
    return { code: code === null ? 1 : Math.min(Math.max(code, 1), MAX_TASK_EXIT_CODE), reason };
  }
}
