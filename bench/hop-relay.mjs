// One link of bench/hops.ts's chain: a bare Node process that forwards every byte it receives
// on its TCP server to the next process (port NEXT on loopback), nothing else. Plain JavaScript,
// so it starts and runs as an ordinary Node process would. Tells its parent its port over IPC.
import { connect, createServer } from 'node:net';

const next = connect(Number(process.env.NEXT), '127.0.0.1');
next.setNoDelay(true);
const server = createServer((s) => {
  s.setNoDelay(true);
  s.on('data', (d) => next.write(d));
});
server.listen(0, '127.0.0.1', () => process.send?.(server.address().port));
process.on('disconnect', () => process.exit(0));
