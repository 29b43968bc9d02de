// What the daemons say of themselves in their status replies (issue 14 item 4; src/core/status.ts
// DaemonReport): log lines and records they could not write to disk, and the watchdog's restarts
// by its supervisor. Read defensively (a replica may be faulty) and turned into the `warnings` of
// the `trine status` document (cli/status-report.ts; docs/OPERATIONS.md §3.4). Pure.
import type { DaemonReport, RecordWrites } from '../src/core/status.ts';

/** Error codes or records read from one daemon's report, and the characters of each name or
 *  message: a faulty replica may send anything, and a correct one sends a few short ones. */
export const MAX_REPORT_KEYS = 16;
export const MAX_REPORT_TEXT_CHARS = 200;
const MAX_REPORT_NAME_CHARS = 32;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const text = (v: unknown): string | null => (typeof v === 'string' ? v.slice(0, MAX_REPORT_TEXT_CHARS) : null);

/** Counts by short name, at most MAX_REPORT_KEYS of them; null if `v` is anything else. */
function readCounts(v: unknown): Record<string, number> | null {
  if (!isObject(v)) return null;
  const entries = Object.entries(v);
  const fits = entries.length <= MAX_REPORT_KEYS && entries.every(([k, n]) => k.length <= MAX_REPORT_NAME_CHARS && Number.isSafeInteger(n) && (n as number) >= 0);
  return fits ? Object.fromEntries(entries) as Record<string, number> : null;
}

function readRecordWrites(v: unknown): RecordWrites | null {
  if (!isObject(v)) return null;
  const failures = readCounts(v['failures']);
  const superseded = v['superseded'];
  if (failures === null || typeof v['pending'] !== 'boolean' || !Number.isSafeInteger(superseded)) return null;
  return { failures, pending: v['pending'], lastError: text(v['lastError']), superseded: superseded as number };
}

/** A daemon's report as its status reply carried it (src/core/status.ts DaemonReport), checked
 *  and bounded: a replica may be faulty. Null when absent (an older release) or malformed. */
export function readDaemonReport(v: unknown): DaemonReport | null {
  if (!isObject(v)) return null;
  const logDrops = readCounts(v['logDrops']);
  const records = isObject(v['records']) ? Object.entries(v['records']) : null;
  if (logDrops === null || records === null || records.length > MAX_REPORT_KEYS) return null;
  const read = records.map(([name, r]) => [name.slice(0, MAX_REPORT_NAME_CHARS), readRecordWrites(r)] as const);
  if (read.some(([, r]) => r === null)) return null;
  const s = v['supervisor'] ?? null;
  const restarts = isObject(s) ? s['restarts'] : null;
  if (s !== null && !Number.isSafeInteger(restarts)) return null;
  return {
    logDrops, records: Object.fromEntries(read) as Record<string, RecordWrites>,
    supervisor: isObject(s) ? { restarts: restarts as number, lastExit: text(s['lastExit']) } : null,
  };
}

/** What the records are to an operator. */
const RECORD_NAMES: Record<string, string> = { tasks: 'task journal (PROTOCOL §10.9)', inc: 'incarnation record' };
const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;
const sum = (counts: Record<string, number>) => Object.values(counts).reduce((a, b) => a + b, 0);
const byCode = (counts: Record<string, number>) => Object.entries(counts).map(([code, n]) => `${code} ${n}`).join(', ');

/** The warnings a daemon's report raises (OPERATIONS §3.4): counts are since the daemon started. */
export function daemonWarnings(who: string, d: DaemonReport | null): string[] {
  if (d === null) return [];
  const out: string[] = [];
  const dropped = sum(d.logDrops);
  if (dropped > 0) out.push(`${who} could not write ${plural(dropped, 'log line')} (${byCode(d.logDrops)}): its disk is full or failing`);
  for (const [name, r] of Object.entries(d.records)) {
    const what = RECORD_NAMES[name] ?? `${name} record`;
    const failed = `${plural(sum(r.failures), 'failed write')} (${byCode(r.failures)})`;
    out.push(r.pending ? `${who} has not written its ${what}: ${failed}, retrying; last: ${r.lastError ?? '?'}` : `${who} wrote its ${what} after ${failed}`);
  }
  const sup = d.supervisor;
  if (sup !== null && sup.restarts > 0) out.push(`${who} was restarted ${plural(sup.restarts, 'time')} by its supervisor (last: ${sup.lastExit ?? '?'})`);
  return out;
}
