// A node agent's state record (src/core/agent-state.ts) for the tests that step its parts by hand
// (agent-requests.test.ts, agent-gmb.test.ts, agent-group.test.ts).
import { createAgentState, type AgentState } from '../../../src/core/agent-state.ts';
import { DEFAULT_TIMING } from '../../../src/core/constants.ts';
import type { Membership } from '../../../src/core/node.ts';
import type { GroupCommand, GroupMsgGC } from '../../../src/core/wire/messages.ts';
import { hmacSigner } from './harness.ts';

export const agentMembership: Membership = {
  cluster: 'c1', replicas: ['r1', 'r2', 'r3'], replicaNodes: ['n1', 'n2', 'n3'], spareReplicas: ['r4'],
  agents: [{ id: 'a1', node: 'n1' }], scc: 'scc', operators: ['op'], timing: DEFAULT_TIMING,
};
/** Agent a1, incarnation 1, before its first step. */
export const freshAgent = (): AgentState => createAgentState({ id: 'a1', membership: agentMembership, inc: 1, slots: 4, signer: hmacSigner('a1') });
export const terminateCmd = (vpid: number): GroupCommand => ({ type: 'proc.terminate', task: 't1', vpid });
/** A copy of GSSN `gssn` for a1/1, chained from the one before. */
export const copyOf = (gssn: number, payload: GroupCommand, csnAck = 0): GroupMsgGC => ({ gssn, prevGssn: gssn - 1, csnAck, destInc: 1, payload, dest: 'a1' });
