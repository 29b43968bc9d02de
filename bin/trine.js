#!/usr/bin/env node
// The `trine` executable: registers tsx so the TypeScript CLI runs without a build step, then
// hands over to cli/main.ts (which parses argv and exits with the command's code).
import { register } from 'tsx/esm/api';

register();
await import('../cli/main.ts');
