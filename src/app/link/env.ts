// Reading the agent's hand-off from the environment (spec §7; set by the agent at spawn):
// where its socket is, and who this process is. Missing variables mean the program was not
// started by Trine; the error names the variable and says what to do.
import { LinkError } from './errors.ts';

export type LinkEnv = { readonly socketPath: string; readonly task: string; readonly vpid: number; readonly token: string };

export const ENV_VARS = ['TRINE_AGENT_SOCKET', 'TRINE_TASK', 'TRINE_VPID', 'TRINE_TOKEN'] as const;

const TASK_PATTERN = /^t[1-9][0-9]*$/;
const TOKEN_PATTERN = /^[0-9a-f]{32}$/;

export function readLinkEnv(env: Readonly<Record<string, string | undefined>>): LinkEnv {
  const unset = (name: string) => env[name] === undefined || env[name] === '';
  // A task submitted without --linked: its agent set the mapping variables but gave it no socket.
  if (!unset('TRINE_TASK') && unset('TRINE_AGENT_SOCKET') && unset('TRINE_TOKEN')) {
    throw new LinkError(
      'NOT_IN_TRINE',
      `TRINE_AGENT_SOCKET is not set: task ${env.TRINE_TASK} was submitted without --linked, so its agent gave this process ` +
        'no socket to connect to: submit it again with `trine submit --linked …`',
    );
  }
  for (const name of ENV_VARS) {
    if (unset(name)) {
      throw new LinkError(
        'NOT_IN_TRINE',
        `${name} is not set: this program uses the Trine application library and must be started by Trine as a linked task ` +
          `(e.g. \`trine submit --linked -n 4 -- node app.js\`), whose agent sets ${ENV_VARS.join(', ')}`,
      );
    }
  }
  const socketPath = env.TRINE_AGENT_SOCKET as string;
  const task = env.TRINE_TASK as string;
  const vpidText = env.TRINE_VPID as string;
  const token = env.TRINE_TOKEN as string;
  if (!TASK_PATTERN.test(task)) throw new LinkError('BAD_ENV', `TRINE_TASK=${JSON.stringify(task)} is not a task id (t1, t2, …)`);
  if (!/^(0|[1-9][0-9]{0,9})$/.test(vpidText) || Number(vpidText) > 0xfffffffd) {
    throw new LinkError('BAD_ENV', `TRINE_VPID=${JSON.stringify(vpidText)} is not a VPID (a non-negative integer)`);
  }
  if (!TOKEN_PATTERN.test(token)) throw new LinkError('BAD_ENV', 'TRINE_TOKEN is not 32 lowercase hex digits');
  return { socketPath, task, vpid: Number(vpidText), token };
}
