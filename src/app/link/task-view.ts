// The task as this process sees it through its link, and the rules a call must pass before the
// link acts on it. The view: the mapping received at init, the members now (the mapping's, less
// GSIG_NTF_DIED's, plus GSIG_REP_SPAWNED's, spec §5.5) and the quorum (GSIG_REP_QUORUMSET), as a
// typed record (createTaskView) updated by the manager's broadcasts. The rules (spec §4.2,
// §4.4, §4.6, §5.2): which signal may go where, which argument, flag word and rule signal is
// valid; each refusal a LinkError naming what was wrong. link.ts holds the view and calls these.
import {
  GSIG, GSIG_BROADCAST, GSIG_CM, isAppSignal, isGroupRequest, isSignalArg, MAX_SIGNAL, MIN_APP_SIGNAL,
} from '../../core/signals.ts';
import type { Mapping, Member } from '../../core/wire/app-wire.ts';
import { LinkError } from './errors.ts';
import { isFlagWord, isRuleSignal } from './flags.ts';
import { FLAG_WORDS } from './limits.ts';
import type { RequestTracker } from './requests.ts';

export type TaskView = {
  /** The mapping as received at init (null until then). */
  mapping: Mapping | null;
  readonly members: Map<number, Member>;
  quorum: number;
};

export function createTaskView(): TaskView {
  return { mapping: null, members: new Map(), quorum: 0 };
}

export function adoptMapping(v: TaskView, mapping: Mapping): void {
  v.mapping = mapping;
  v.quorum = mapping.quorum;
  for (const m of mapping.members) v.members.set(m.vpid, m);
}

/** A broadcast from the cluster manager, delivered: membership and quorum follow it. */
export function applyManagerBroadcast(v: TaskView, s: { readonly signum: number; readonly arg: number; readonly node: string; readonly data: string }): void {
  if (s.signum === GSIG.NTF_DIED || s.signum === GSIG.NTF_FINISHED) v.members.delete(s.arg);
  else if (s.signum === GSIG.REP_SPAWNED) v.members.set(s.arg, { vpid: s.arg, node: s.node, endpoint: s.data });
  else if (s.signum === GSIG.REP_QUORUMSET) v.quorum = s.arg;
}

export function memberList(v: TaskView): readonly Member[] {
  return [...v.members.values()].sort((a, b) => a.vpid - b.vpid);
}

/** G_Signal's rules (spec §4.2, §4.4, §4.6): group requests go to GSIG_CM, application signals
 *  to a member or GSIG_BROADCAST, the argument is an int32, and at most one request is
 *  outstanding. Throws the LinkError that says which rule failed. */
export function checkSignalToSend(v: TaskView, task: string, tracker: RequestTracker, signum: number, dest: number, arg: number): void {
  if (dest === GSIG_CM) {
    if (!isGroupRequest(signum)) {
      throw new LinkError('BAD_SIGNAL', `signal ${signum} to GSIG_CM: only group requests (GSIG.REQ_*) go to the cluster manager`);
    }
  } else {
    if (!isAppSignal(signum)) {
      throw new LinkError('BAD_SIGNAL', `signal ${signum}: application signals are numbered ${MIN_APP_SIGNAL}..${MAX_SIGNAL}`);
    }
    if (dest !== GSIG_BROADCAST && !v.members.has(dest)) {
      throw new LinkError('NOT_A_MEMBER', `destination ${dest} is not a member of task ${task}`);
    }
  }
  checkSignalArg(arg);
  const refusal = tracker.refusal(dest);
  if (refusal === 'REQUEST_OUTSTANDING') {
    throw new LinkError('REQUEST_OUTSTANDING', 'a broadcast or group request is still outstanding: wait for requestOutcome() (spec §4.4: at most one)');
  }
  if (refusal === 'ACK_PENDING') {
    throw new LinkError('ACK_PENDING', 'our group request was acknowledged: no new group request until its reply (spec §4.6)');
  }
}

export function checkSignalArg(arg: number): void {
  if (!isSignalArg(arg)) throw new LinkError('BAD_ARG', `argument ${arg} is not a signed 32-bit integer`);
}

export function checkRuleSignal(signum: number): void {
  if (!isRuleSignal(signum)) throw new LinkError('BAD_SIGNAL', `signal ${signum} is not in 1..${MAX_SIGNAL}`);
}

export function checkRuleSignals(signums: readonly number[]): readonly number[] {
  for (const s of signums) checkRuleSignal(s);
  return signums;
}

export function checkFlagWord(word: number): number {
  if (!isFlagWord(word)) throw new LinkError('BAD_FLAG', `flag word ${word} is not in 0..${FLAG_WORDS - 1}`);
  return word;
}
