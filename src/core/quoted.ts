// Echoing input in error messages (issue 14 item 9). An error quotes what it refused, so the
// user sees which argument or value was wrong; it used to quote it whole, and a 100,000-character
// argument came back as a 100,000-character error line. quoted() and excerpt() keep the start
// and say how long the whole was; cutMiddle() bounds a finished line, keeping its start (what
// went wrong) and its end (what to do).

/** Characters of echoed input kept: a host id (63 at most), a task id, an environment variable
 *  name or a short path is shown whole; past that the start is enough to recognise it. */
export const MAX_ECHO_CHARS = 64;

/** The JSON string literal of `value` (as JSON.stringify gives it) when it is at most
 *  MAX_ECHO_CHARS characters, else its start, "…" and the length:
 *  `"aaaa…" (100000 characters)`. Escapes count toward the bound, so control characters
 *  cannot lengthen it. */
export function quoted(value: string): string {
  const whole = JSON.stringify(value);
  if (whole.length <= MAX_ECHO_CHARS + 2) return whole;
  return `"${escapedStart(value)}…" (${value.length} characters)`;
}

/** `text` itself when at most MAX_ECHO_CHARS characters, else its start, "…" and the length:
 *  `aaaa… (100000 characters)`. For text that is already quoted or is not user input alone. */
export function excerpt(text: string): string {
  if (text.length <= MAX_ECHO_CHARS) return text;
  return `${startOf(text, MAX_ECHO_CHARS)}… (${text.length} characters)`;
}

/** `line` if at most `maxChars` long, else its start and end around ` … (N characters cut) … `,
 *  within `maxChars` characters. */
export function cutMiddle(line: string, maxChars: number): string {
  if (line.length <= maxChars) return line;
  const cut = (n: number) => ` … (${n} characters cut) … `;
  const keep = maxChars - cut(line.length).length;
  if (keep < 2) return startOf(line, maxChars);
  const head = startOf(line, Math.ceil(keep * 2 / 3));
  const tail = endOf(line, keep - head.length);
  return `${head}${cut(line.length - head.length - tail.length)}${tail}`;
}

/** The JSON-escaped start of `value`, at most MAX_ECHO_CHARS characters, whole code points. */
function escapedStart(value: string): string {
  let out = '';
  for (const ch of value) {
    const escaped = JSON.stringify(ch).slice(1, -1);
    if (out.length + escaped.length > MAX_ECHO_CHARS) break;
    out += escaped;
  }
  return out;
}

const isHighSurrogate = (code: number) => code >= 0xd800 && code <= 0xdbff;
const isLowSurrogate = (code: number) => code >= 0xdc00 && code <= 0xdfff;

/** The first `n` UTF-16 units of `text`, one fewer if that would split a surrogate pair. */
function startOf(text: string, n: number): string {
  return isHighSurrogate(text.charCodeAt(n - 1)) ? text.slice(0, n - 1) : text.slice(0, n);
}

/** The last `n` UTF-16 units of `text`, one fewer if that would split a surrogate pair. */
function endOf(text: string, n: number): string {
  if (n <= 0) return '';
  const from = text.length - n;
  return isLowSurrogate(text.charCodeAt(from)) ? text.slice(from + 1) : text.slice(from);
}
