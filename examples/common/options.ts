// Command-line and environment parameters of the examples: `--name VALUE` wins over the
// environment variable, which wins over the default. A bad value ends the process with exit
// code 2 and a line naming the parameter, before anything is started (every rank checks the
// same values, so every rank stops the same way).

function bad(program: string, what: string): never {
  process.stderr.write(`${program}: ${what}\n`);
  process.exit(2);
}

/** The raw text of `--name` (argv) or `envName` (environment), or undefined. */
function raw(name: string, envName: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  if (i >= 0) return process.argv[i + 1];
  return process.env[envName];
}

/** A non-negative integer parameter, at most `max`. */
export function intOption(program: string, name: string, envName: string, fallback: number, max: number): number {
  const text = raw(name, envName);
  if (text === undefined || text === '') return fallback;
  const v = Number(text);
  if (!Number.isSafeInteger(v) || v < 0 || v > max) bad(program, `--${name} (or ${envName}) needs an integer from 0 to ${max}, not ${JSON.stringify(text)}`);
  return v;
}

/** One of `choices`. */
export function choiceOption<C extends string>(program: string, name: string, envName: string, choices: readonly C[]): C {
  const text = raw(name, envName);
  if (text === undefined || text === '') return choices[0] as C;
  if (!(choices as readonly string[]).includes(text)) bad(program, `--${name} (or ${envName}) is one of ${choices.join(', ')}, not ${JSON.stringify(text)}`);
  return text as C;
}

/** A flag: `--name` present, or `envName` set to 1. */
export function flagOption(name: string, envName: string): boolean {
  return process.argv.includes(`--${name}`) || process.env[envName] === '1';
}

/** Ends the process with exit code 2 and `what` (a parameter check that needs several values). */
export function refuse(program: string, what: string): never {
  bad(program, what);
}
