// Echoed input in error messages is cut short (issue 14 item 9, src/core/quoted.ts): a
// 100,000-character argument comes back as its start and its length, and a finished line is
// bounded keeping what went wrong (its start) and what to do (its end).
import { describe, expect, it } from 'vitest';
import { cutMiddle, excerpt, MAX_ECHO_CHARS, quoted } from '../../../src/core/quoted.ts';

describe('issue 14 item 9: quoted() and excerpt() cut echoed input', () => {
  it('short input is quoted whole, exactly as JSON.stringify quotes it', () => {
    for (const v of ['', 't3', 'a b', 'tab\there', '"q"', 'x'.repeat(MAX_ECHO_CHARS)]) expect(quoted(v)).toBe(JSON.stringify(v));
  });

  it('a 100,000-character argument: its first characters, "…" and the length', () => {
    const text = quoted('a'.repeat(100_000));
    expect(text).toBe(`"${'a'.repeat(MAX_ECHO_CHARS)}…" (100000 characters)`);
    expect(text.length).toBeLessThan(100);
  });

  it('escapes count toward the bound: control characters cannot lengthen it', () => {
    const text = quoted('\u0001'.repeat(10_000));
    expect(text.length).toBeLessThanOrEqual(MAX_ECHO_CHARS + 30);
    expect(text).toMatch(/^"(\\u0001)+…" \(10000 characters\)$/);
  });

  it('never splits a character made of two UTF-16 units', () => {
    const text = quoted('😀'.repeat(1_000));
    expect(text).toMatch(/^"(😀)+…" \(2000 characters\)$/u);
    expect(excerpt(`a${'😀'.repeat(100)}`)).toMatch(/^a(😀)+… \(201 characters\)$/u);
  });

  it('excerpt: short text unchanged, long text cut with its length and no quotes added', () => {
    expect(excerpt('/tmp/x')).toBe('/tmp/x');
    expect(excerpt('b'.repeat(500))).toBe(`${'b'.repeat(MAX_ECHO_CHARS)}… (500 characters)`);
  });
});

describe('issue 14 item 9: cutMiddle() bounds a finished error line', () => {
  it('a line within the bound is unchanged', () => {
    expect(cutMiddle('trine: no task t9: see `trine ps`', 100)).toBe('trine: no task t9: see `trine ps`');
  });

  it('a longer line keeps its start and its end within the bound, and says how much was cut', () => {
    const line = `trine: no cluster at /${'d'.repeat(50_000)}: run \`trine up\` first`;
    const cut = cutMiddle(line, 1_000);
    expect(cut.length).toBeLessThanOrEqual(1_000);
    expect(cut.startsWith('trine: no cluster at /ddd')).toBe(true);
    expect(cut.endsWith(': run `trine up` first')).toBe(true);
    const [, n] = / … \((\d+) characters cut\) … /.exec(cut) ?? [];
    expect(Number(n)).toBe(line.length - cut.length + ` … (${n} characters cut) … `.length);
  });
});
