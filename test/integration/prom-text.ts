// A total parser of the Prometheus text exposition format (version 0.0.4), for the metrics tests
// (test/integration/metrics.test.ts, test/e2e/metrics.test.ts): what a scraper would read from a
// daemon. Every line is a comment (`# HELP name text`, `# TYPE name type`, others ignored), blank,
// or a sample `name{label="value",…} value`. Anything else comes back as a typed reason with
// the line number; nothing throws.

export type MetricType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';
export type Sample = { name: string; labels: Record<string, string>; value: number };
export type Exposition = { help: Map<string, string>; types: Map<string, MetricType>; samples: Sample[] };
export type ParseError = { ok: false; code: 'TOO_LARGE' | 'BAD_COMMENT' | 'BAD_TYPE' | 'BAD_SAMPLE' | 'BAD_LABELS' | 'BAD_VALUE'; line: number; detail: string };

/** A daemon's exposition is tens of kB; a scrape this large is not one. */
export const MAX_EXPOSITION_BYTES = 4 * 1024 * 1024;
const TYPES: readonly MetricType[] = ['counter', 'gauge', 'histogram', 'summary', 'untyped'];
const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

export function parseExposition(text: string): { ok: true; value: Exposition } | ParseError {
  if (text.length > MAX_EXPOSITION_BYTES) return { ok: false, code: 'TOO_LARGE', line: 0, detail: `${text.length} bytes` };
  const out: Exposition = { help: new Map(), types: new Map(), samples: [] };
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] as string;
    const n = i + 1;
    if (line.trim() === '') continue;
    if (line.startsWith('#')) {
      const m = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(line);
      if (m === null) continue; // another comment
      const [, kind, name, rest] = m as unknown as [string, string, string, string];
      if (!NAME.test(name)) return { ok: false, code: 'BAD_COMMENT', line: n, detail: `bad metric name ${name}` };
      if (kind === 'HELP') out.help.set(name, rest);
      else if (TYPES.includes(rest as MetricType)) out.types.set(name, rest as MetricType);
      else return { ok: false, code: 'BAD_TYPE', line: n, detail: `unknown type ${rest}` };
      continue;
    }
    const sample = parseSample(line, n);
    if (!sample.ok) return sample;
    out.samples.push(sample.value);
  }
  return { ok: true, value: out };
}

function parseSample(line: string, n: number): { ok: true; value: Sample } | ParseError {
  const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)( -?\d+)?$/.exec(line);
  if (m === null) return { ok: false, code: 'BAD_SAMPLE', line: n, detail: line.slice(0, 80) };
  const labels = m[2] === undefined ? {} : parseLabels(m[2].slice(1, -1));
  if (labels === null) return { ok: false, code: 'BAD_LABELS', line: n, detail: (m[2] as string).slice(0, 80) };
  // Go's ParseFloat, which Prometheus uses, takes NaN and Inf in any case (prom-client writes "Nan").
  const raw = m[3] as string;
  const word = raw.toLowerCase();
  const value = word === '+inf' || word === 'inf' ? Infinity : word === '-inf' ? -Infinity : word === 'nan' ? NaN : Number(raw);
  if (Number.isNaN(value) && word !== 'nan') return { ok: false, code: 'BAD_VALUE', line: n, detail: raw.slice(0, 40) };
  return { ok: true, value: { name: m[1] as string, labels, value } };
}

/** `a="x",b="y\"z"` → { a: 'x', b: 'y"z' }; null if malformed. */
function parseLabels(text: string): Record<string, string> | null {
  const labels: Record<string, string> = {};
  let i = 0;
  while (i < text.length) {
    const eq = text.indexOf('=', i);
    if (eq < 0) return null;
    const name = text.slice(i, eq);
    if (!LABEL_NAME.test(name) || text[eq + 1] !== '"') return null;
    let j = eq + 2;
    let value = '';
    for (;;) {
      const ch = text[j];
      if (ch === undefined) return null;
      if (ch === '"') break;
      if (ch === '\\') {
        const next = text[j + 1];
        if (next === 'n') value += '\n';
        else if (next === '\\' || next === '"') value += next;
        else return null;
        j += 2;
        continue;
      }
      value += ch;
      j++;
    }
    if (name in labels) return null;
    labels[name] = value;
    i = j + 1;
    if (text[i] === ',') i++;
    else if (i !== text.length) return null;
  }
  return labels;
}

/** The samples of `name` whose labels include `match`. */
export function samples(e: Exposition, name: string, match: Record<string, string> = {}): Sample[] {
  return e.samples.filter((s) => s.name === name && Object.entries(match).every(([k, v]) => s.labels[k] === v));
}

/** The sum of the samples of `name` matching `match` (0 when there are none). */
export function total(e: Exposition, name: string, match: Record<string, string> = {}): number {
  return samples(e, name, match).reduce((a, s) => a + s.value, 0);
}
