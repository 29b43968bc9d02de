// Every limit, period and count of the core in one place (STYLE.md 9). Each says why it has
// the value it has; timing defaults cite spec §1.7 where the source paper gives a number.

/** Wire format version of a frame signed with Ed25519 (docs/PROTOCOL.md §2.1); a frame of
 *  another version than these two is dropped. */
export const WIRE_VERSION = 1;
/** Wire format version of a frame authenticated by its link's MAC instead (PROTOCOL §2.4). */
export const WIRE_VERSION_MAC = 2;
/** HMAC-SHA256 tag of a MAC'd frame. */
export const MAC_BYTES = 32;

/** Largest frame accepted on any transport. Also the `ws` maxPayload, so an oversized frame
 *  never reaches the decoder. 1 MiB holds a coalesced batch of several hundred messages. */
export const MAX_FRAME_BYTES = 1024 * 1024;
/** Smallest possible frame: version, id length, a one-char id, a one-byte body, the 4-byte
 *  CRC and the 64-byte signature (docs/PROTOCOL.md §2.1). */
export const MIN_FRAME_BYTES = 1 + 1 + 1 + 1 + 4 + 64;
/** The same for a MAC'd frame: a 32-byte tag in place of the signature. */
export const MIN_MAC_FRAME_BYTES = 1 + 1 + 1 + 1 + 4 + 32;
/** Ed25519 signature and public-key sizes. */
export const SIGNATURE_BYTES = 64;
export const PUBLIC_KEY_BYTES = 32;
/** Process identifiers ('r1', 'a4', 'scc', 'op') are short; a longer one is an attack. */
export const MAX_ID_CHARS = 32;
/** Cluster ids are hex of 16 random bytes. */
export const MAX_CLUSTER_ID_CHARS = 64;
/** Items coalesced into one frame. Bounds the work a single frame can cause. */
export const MAX_ITEMS_PER_FRAME = 1024;
/** Items in one frame that carry an agent-signed CG (lane-1 CGs and wrappers): each costs a
 *  signature check (~0.12 ms), so this bounds one frame's verification work to ~8 ms. */
export const MAX_SIGNED_ITEMS_PER_FRAME = 64;
/** Any string inside a payload (reasons, tags, log text). */
export const MAX_TEXT_CHARS = 4096;
/** Opaque application bytes inside one group-message payload. */
export const MAX_PAYLOAD_BYTES = 256 * 1024;
/** Members of a replica set, nodes in a cluster, entries of any list in a payload. */
export const MAX_LIST_ENTRIES = 4096;
/** Replicas an error report may name: the whole replica set (f = 1, |R| = 3). */
export const MAX_SUSPECTS = 3;
/** An agent's or operator's signed CG's canonical bytes: its payload plus the fixed fields and
 *  their msgpack framing, which take well under 4 KiB. */
export const MAX_SUBMIT_CG_BYTES = MAX_PAYLOAD_BYTES + 4096;
/** A task's G-MPI key (PROTOCOL §9.5): 256 random bits the operator draws at submit, carried in
 *  `task.submit` and `proc.spawn` and handed to each process over its agent's socket. */
export const TASK_KEY_BYTES = 32;
/** The nonce a listener sends on each new connection, which the dialer's `bind.proof` must
 *  carry (PROTOCOL §2.5): 128 random bits never repeat, so no captured proof binds again. */
export const BIND_NONCE_BYTES = 16;
/** Any signed CG: the above, or the watchdog's `task.restore`, which carries one such submit
 *  whole (PROTOCOL §10.9) plus its own few hundred bytes. */
export const MAX_CG_BYTES = MAX_SUBMIT_CG_BYTES + 4096;
/** A status reply's JSON: a replica's view of 64 nodes with their counters fits in ~40 KiB;
 *  512 KiB leaves room for the clusters issue 3 adds without nearing the frame limit. */
export const MAX_STATUS_CHARS = 512 * 1024;
/** Copies one `echo` request may ask for: bounds the fan-out one agent message can cause (a
 *  faulty agent cannot make the group flood the cluster). */
export const MAX_BURST_COUNT = 1000;

/** Processes in one task: the endpoints list of a mapping message (spec §7) must fit in one
 *  group message with room to spare (~40 B per endpoint). */
export const MAX_TASK_PROCS = 1024;

// ---- rollback recovery (docs/PROTOCOL.md §11.1, §11.2) ---------------------------------------
/** The least `intervalMs` between two checkpoints of a rank: below it a rank would spend more
 *  time writing state to its protector than computing (RADIC takes minutes, FTI seconds). */
export const ROLLBACK_MIN_INTERVAL_MS = 100;
/** The most `intervalMs`: one day. A longer interval is no protection at all, and a typo of a
 *  few extra digits should be refused rather than silently mean "never". */
export const ROLLBACK_MAX_INTERVAL_MS = 86_400_000;
/** The largest checkpoint of one rank a task may declare: the protector keeps two per rank it
 *  guards (§11.4), so this bounds what one rank can make another node hold. */
export const ROLLBACK_MAX_STATE_BYTES = 64 * 1024 * 1024;
/** Replacements of one rank in a task's life (§11.2). A rank whose replacement keeps crashing
 *  (a deterministic bug, a poisoned checkpoint) would otherwise be respawned for ever; past
 *  this the task ends abnormally, naming the rank. Each spawn counts, failed ones too. */
export const ROLLBACK_MAX_REPLACEMENTS = 16;
/** `trine submit --recovery rollback` without `--checkpoint-interval`: every 2 s, the interval
 *  RADIC's experiments and FTI's examples use for iterative codes. */
export const ROLLBACK_DEFAULT_INTERVAL_MS = 2000;
/** `trine submit --recovery rollback` without `--max-state`: 16 MiB, room for a stencil's grid
 *  or N-Queens' counters with a wide margin, a quarter of the hard limit. */
export const ROLLBACK_DEFAULT_STATE_BYTES = 16 * 1024 * 1024;

// ---- The dynamic group of recommended processes (docs/PROTOCOL.md §12; spec 2.2) -------------
/** The least testing interval: each tester tests every other process once per interval, so below
 *  this the tests of a 64-process task would cost more than the work they watch. */
export const DGRP_MIN_INTERVAL_MS = 50;
/** The most: one minute; a slow process would then stay in the group for minutes. */
export const DGRP_MAX_INTERVAL_MS = 60_000;
/** The paper's experiments test every 1 s (spec 2.2.1). */
export const DGRP_DEFAULT_INTERVAL_MS = 1000;
/** ζ, consecutive passes before a rejoin is asked for (spec 2.2.5: 5 in the experiments). */
export const DGRP_DEFAULT_ZETA = 5;
export const DGRP_MAX_ZETA = 100;
/** The multiplicative margin on Algorithm 1's timeout, in percent (spec 2.2.2: ×2.5). Below 100
 *  the threshold would sit under the mean reply and condemn correct processes. */
export const DGRP_DEFAULT_FACTOR_PERCENT = 250;
export const DGRP_MIN_FACTOR_PERCENT = 100;
export const DGRP_MAX_FACTOR_PERCENT = 10_000;
/** The additive margin (Algorithm 1's getFactor()), ms: on a node whose load average is three
 *  times its cores, a reply of 0.2 ms waited for a core for tens of ms (docs/PERFORMANCE.md §10);
 *  a stalled process (a loaded core, a stopped process) is late by hundreds. */
export const DGRP_DEFAULT_MARGIN_MS = 20;
export const DGRP_MAX_MARGIN_MS = 60_000;
/** The threshold before the first reply (spec 2.2.2: 8 s). */
export const DGRP_DEFAULT_INITIAL_THRESHOLD_MS = 8000;
export const DGRP_MAX_INITIAL_THRESHOLD_MS = 60_000;
/** Distinct group members whose latest verdict must say "not recommended" before a member is
 *  removed (PROTOCOL §12.3): f + 1 with f = 1, so one lying tester removes no one. The paper
 *  removes on one verdict (spec 2.2.4), which lets one faulty process evict anyone. */
export const DGRP_ACCUSERS = 2;

/** Bytes of task output one `logs.data` reply carries (PROTOCOL §7.1): a quarter of a frame, so a
 *  reply with its header, fields and authenticator always fits MAX_FRAME_BYTES, and the operator
 *  reads a large file in a few round trips. */
export const LOGS_CHUNK_BYTES = 256 * 1024;

// ---- The protector (PROTOCOL §11.4; radic-hmpl A.1, A.2.5, B.1) ---------------------------------
// A node's agent stores the checkpoints and message logs of the ranks on the previous node of the
// ring. All of it is kept in memory (RADIC A.1 recommends memory while it suffices), so every
// byte a process can make it hold is bounded here; past a bound the store refuses with a typed
// reason (src/core/protector-store.ts), never drops silently.

/** The largest checkpoint the protector accepts whatever the task says: PROTOCOL §11.1's
 *  `ROLLBACK_MAX_STATE_BYTES` (64 MiB); a task's own `maxStateBytes` may only be lower. */
export const PROTECTOR_MAX_CHECKPOINT_BYTES = 64 * 1024 * 1024;
/** Log bytes one rank may hold since its older checkpoint. A rank that reaches it is refused
 *  LOG_FULL and must checkpoint (HMPL's logger "can command a checkpoint because a memory limit
 *  was exceeded", radic-hmpl B.1): 128 MiB is two thousand 64 KiB stencil messages. */
export const PROTECTOR_MAX_LOG_BYTES = 128 * 1024 * 1024;
/** Every byte one agent's protector holds, over all tasks and ranks: it shares its node's memory
 *  with that node's own task processes. 1 GiB holds eight ranks at the largest checkpoints
 *  (two each) with room for their logs. */
export const PROTECTOR_MAX_TOTAL_BYTES = 1024 * 1024 * 1024;
/** What one log entry costs beyond its bytes, so even empty entries bound the entry count. */
export const PROTECTOR_ENTRY_OVERHEAD_BYTES = 64;
/** Tasks one protector guards at once: far more rollback tasks than a node runs ranks of. */
export const PROTECTOR_MAX_TASKS = 256;
/** The largest frame on a protector connection (either way): a checkpoint travels in chunks of
 *  PROTECTOR_CHUNK_BYTES, so no frame makes either side buffer more than this. */
export const PROTECTOR_MAX_FRAME_BYTES = 1024 * 1024;
/** A checkpoint or fetch chunk: half a frame, leaving room for its fields. */
export const PROTECTOR_CHUNK_BYTES = 512 * 1024;
/** The largest log entry: one frame less room for its fields. A larger message is the library's
 *  to split into several entries. */
export const PROTECTOR_MAX_ENTRY_BYTES = PROTECTOR_MAX_FRAME_BYTES - 4096;
/** Entries in one `appendBatch` frame (their bytes are bounded by the frame). */
export const PROTECTOR_MAX_BATCH_ENTRIES = 1024;
/** A task journal a replica sends the watchdog (PROTOCOL §10.9) fits one frame with room for
 *  the header and a heartbeat beside it. A journal is ~1 KiB per live task, so this holds
 *  hundreds; a larger one is not sent (the replica logs `tasks.journal.too-large`) and the
 *  watchdog keeps the last one that fit. */
export const MAX_JOURNAL_ITEM_BYTES = 768 * 1024;
/** A replica sends its task journal to the watchdog again this often: the send is one frame
 *  with no retransmission, and a lost one must not leave the watchdog a stale journal for long. */
export const JOURNAL_RESEND_MS = 2_000;
/** Replicas in a manager group (DESIGN.md §1): f = 1 needs three. The pool lists them first,
 *  then the spares. */
export const REPLICA_COUNT = 3;
/** Replicas that must say the same for anyone to act on it: f + 1 (f = 1, DESIGN.md §2), so
 *  one faulty replica never decides alone. Two matching copies of a command at an agent; two
 *  members vouching for a transferred state; two accusations condemning a member; two replicas
 *  asking the watchdog to reset a node or the cluster, to stand down, or settling a restore. */
export const QUORUM = 2;
/** The one-host default address (DESIGN.md §6): `trine up` daemons and G-MPI listeners bind it
 *  when no node address is configured, so a local cluster is not reachable from the network. */
export const LOOPBACK_HOST = '127.0.0.1';
/** A replica shutting down (PROTOCOL §10.11) sends the watchdog its notice again this often until
 *  the watchdog acknowledges: a notice is one frame with no retransmission. */
export const SHUTDOWN_NOTICE_MS = 250;
/** A daemon's exit code when the operator shut the cluster down (PROTOCOL §10.11): nothing
 *  restarts a daemon that exits with it (the keeper gives up, `trine node run` exits with it,
 *  and the systemd units name it in RestartPreventExitStatus). */
export const EXIT_SHUTDOWN = 4;
/** The longest a replica shutting down waits before it exits: for the watchdog's acknowledgement
 *  and for every agent to acknowledge its copies (a node needs two to stop). An agent or a
 *  watchdog that is unreachable then does not keep the group up forever. */
export const SHUTDOWN_LINGER_MAX_MS = 5_000;
/** `logs.read` items an agent serves from one frame (PROTOCOL §7.1): every output file of a
 *  well-filled node (32 processes, stdout and stderr) in one round trip. The operator's reads
 *  beyond it are answered with an error, never read. */
export const MAX_LOGS_READS_PER_FRAME = 64;
/** Bytes of task output an agent sends back for one frame of reads, in all: reads beyond it are
 *  answered with no bytes (the operator asks again). A quarter of the transport's per-socket
 *  buffer (ws-transport MAX_BUFFERED_BYTES, 8 MiB), so the answers to a read and to two resends
 *  of it never overflow the socket and get dropped. */
export const LOGS_BYTES_PER_FRAME = 2 * 1024 * 1024;
/** Process reports one agent request carries: a node's burst of spawns or exits in one request
 *  (one signature, one RSN); 64 × the 4 KiB reason limit stays within MAX_CG_BYTES. */
export const MAX_REPORTS_PER_REQUEST = 64;
/** Arguments of a task's command, and characters of one argument or environment value. */
export const MAX_ARGS = 256;
export const MAX_ARG_CHARS = 4096;
/** Environment entries a task may set. */
export const MAX_ENV_ENTRIES = 256;
/** An executable path or working directory (Linux PATH_MAX). */
export const MAX_PATH_CHARS = 4096;
/** Tasks the replicated state keeps: live ones always; finished ones are forgotten oldest first
 *  beyond this, so `trine ps` shows recent history without the state growing forever. */
export const MAX_FINISHED_TASKS = 256;
/** Live (not finished) tasks the group accepts; a submit beyond it is refused with a reason. */
export const MAX_LIVE_TASKS = 1024;
/** Operator request outcomes remembered for deduplication and replies (PROTOCOL §8.1): a
 *  retried request within the last this-many is answered again, never applied twice. */
export const MAX_OPERATOR_OUTCOMES = 4096;
/** Membership changes (`node.add`, `node.remove`, PROTOCOL §10.12) the group applies between
 *  two cluster resets; one beyond it is refused with a reason. Each rides, signed, in every task
 *  journal (§10.9): a thousand take about 400 KiB, inside MAX_JOURNAL_ITEM_BYTES. A reset keeps
 *  only their net effect (a node added and removed is neither), which frees the room again. */
export const MAX_MEMBER_CHANGES = 1024;
/** An operator's signed `node.add` or `node.remove` CG, as journalled (§10.9, §10.12): fixed
 *  fields, two names, an address of at most 64 characters and a 32-byte key take a few hundred
 *  bytes; this leaves room and bounds what a restore may carry. */
export const MAX_MEMBER_CG_BYTES = 2048;
/** Spare replica ids one `node.add` may bring (PROTOCOL §10.12): as many as `trine init` gives
 *  a host at most (src/io/hosts-file.ts MAX_SPARES_PER_HOST). Eight take about 400 bytes of the
 *  request, inside MAX_MEMBER_CG_BYTES. */
export const MAX_ADDED_NODE_SPARES = 8;

/** Live process entries one agent keeps. A node offers a handful of slots (cluster.json); this
 *  bounds what a group bug could make the agent hold, far above any real placement. A spawn
 *  beyond it is refused with spawnFailed. */
export const MAX_AGENT_PROCS = 4096;
/** Backups judge the rate of the primary's task-clock ticks over this window, allowing twice
 *  the nominal count plus this slack (PROTOCOL §8.3). */
export const TICK_RATE_WINDOW_MS = 1000;
export const TICK_RATE_SLACK = 10;
/** The tasks of a status reply's cluster view, in JSON characters: the reply's limit less room
 *  for the rest (replicas, agents, the journal). Older finished tasks beyond it are left out of
 *  the view (counted in `omittedTasks`), never the live ones. */
export const MAX_VIEW_TASK_CHARS = MAX_STATUS_CHARS - 192 * 1024;
/** Task events a replica keeps in its (non-replicated) journal for `trine ps`. */
export const MAX_JOURNAL_EVENTS = 512;

/** Out-of-order window of a reliable lane (spec §3.4 P3 leaves `window` open). Also bounds
 *  the OMB per peer and lane. 512 messages cover a full coalesced burst in flight. */
export const RECEIVE_WINDOW = 512;
/** Unacknowledged messages a lane keeps for retransmission before the sender applies
 *  backpressure (queues in the caller). Bounded so a dead peer cannot exhaust memory. */
export const MAX_UNACKED_PER_LANE = 4096;
/** Messages queued for a peer beyond the unacknowledged window: while it is not connected
 *  (spec §3.4 P1.1), behind backpressure, or waiting for its next incarnation. Group messages
 *  already carry a GSSN when they are queued, so a refusal breaks that agent's chain; the bound
 *  is therefore large (64 Ki messages, ~10 MB of typical commands per peer) and only a peer
 *  that is gone for good reaches it (docs/FAULT-MODEL.md, limits). */
export const MAX_QUEUED_WHILE_DISCONNECTED = 65536;
/** A backup's proposals and confirmations ahead of what it executed (PROTOCOL §5.8): bounds
 *  what a stalled dispute or a lying backup can make it hold. */
export const MAX_ORDER_AHEAD = 4096;
/** Messages retransmitted per lane per timer expiry: bounds a retransmission burst. */
export const MAX_RETRANSMIT_BATCH = 256;
/** Delayed acknowledgement (as TCP's): an ack for in-order data waits up to this long for
 *  outgoing data to carry it, or for more arrivals to cover, so a burst is acknowledged once
 *  rather than once per frame. Far below the 40 ms retransmission timeout; duplicates and gaps
 *  are still answered at once (they drive retransmission). Measured: one ack frame per arrival
 *  cost ~20 signed frames per request and most of the replicas' CPU (bench/group.ts). */
export const ACK_DELAY_MS = 5;
/** Retransmission timeout backoff: each expiry without progress doubles the timeout up to this
 *  factor (40 ms → 320 ms): resending to a peer that is down every 40 ms only burns CPU. Also
 *  the cap of the handshake retry backoff (50 ms → 400 ms). */
export const MAX_RETRANSMIT_BACKOFF = 8;
/** Upper bound of the agent's adaptive fallback deadline (PROTOCOL §5.6): however slow the
 *  group has been, a request the primary sits on reaches the backups within 2 s. */
export const MAX_FALLBACK_MS = 2000;
/** Spec §3.6 G6 / §3.4 P6: a request not acknowledged by f+1 replicas after this many
 *  retransmission periods beyond the first is also sent to both backups (PROTOCOL §5.6). */
export const PRIMARY_RETRIES_BEFORE_FALLBACK = 3;
/** Spec §3.5 G5: ReplicaTimeout fires at most this many times per GSSN before a purge. */
export const REPLICA_TIMEOUT_FIRINGS = 3;
/** Undelivered group-message entries one replica may open in an agent's GMB (PROTOCOL §5.2).
 *  Beyond it, that replica's next new copy is not admitted at lane 1 (flow control: it is
 *  retransmitted later), so a correct replica running ahead is throttled, never loses a copy,
 *  and a faulty one flooding copies nobody else sends exhausts only its own quota. */
export const MAX_GMB_ENTRIES = 4096;
/** Agent messages the primary holds back while an earlier CSN is missing: the agent's FIFO
 *  lane and its bounded window keep honest gaps far below this. */
export const MAX_HOLDBACK_PER_AGENT = 512;
/** Entries of the delivered-message log L kept per replica (spec §3.3): enough for a
 *  lagging replica to catch up; older entries are covered by state transfer (issue 5). */
export const MAX_DELIVERED_LOG = 4096;

/** Replicas a replica set or a `replicas` command may list: the three of the group and one
 *  joining (PROTOCOL §10). */
export const MAX_REPLICAS = 4;
/** A signed accusation's canonical bytes: four short fields. */
export const MAX_ACCUSATION_BYTES = 256;
/** A frame forwarded as evidence of equivocation (PROTOCOL §10.2). Frames carrying a wrapper
 *  are usually a few KiB; a larger one is not forwarded and the dispute falls to the watchdog. */
export const MAX_EVIDENCE_FRAME_BYTES = 256 * 1024;
/** State transfer moves the canonical state in chunks of at most this (PROTOCOL §10.6), well
 *  inside a frame. */
export const MAX_STATE_CHUNK_BYTES = 256 * 1024;
/** Chunks of one state transfer: 64 MiB of state is far beyond MAX_LIVE_TASKS of tasks. */
export const MAX_STATE_CHUNKS = 256;
/** Own checkpoint digests kept for comparison with peers that lag behind. */
export const MAX_CHECKPOINTS = 64;

/** Default timing in milliseconds. All are configurable per cluster (cluster.json). */
export const DEFAULT_TIMING = {
  /** Spec §1.7: replica↔replica heartbeat every 75 ms. */
  replicaHeartbeatMs: 75,
  /** Spec §1.7: each replica checks replica heartbeats every 150 ms. */
  replicaCheckMs: 150,
  /** Each agent heartbeats one backup, alternating (spec §1.3). The paper's 75 ms / 225 ms check
   *  declare a dead node after ≈ 525 ms on average; 50 / 110 keep the ratios (a backup hears an
   *  agent every 100 ms; a check is a little longer) and declare it after ≈ 350 ms, within the
   *  400 ms target of issue 3 (docs/PROTOCOL.md §6). */
  agentHeartbeatMs: 50,
  /** Backups check agent heartbeats this often; two missed checks start a probe (spec §1.3). */
  agentCheckMs: 110,
  /** Replicas heartbeat the watchdog; the paper leaves the period open (§1.6), we use 75 ms. */
  sccHeartbeatMs: 75,
  /** Retransmission timeout of a reliable lane. Not in the paper (§1.7); 40 ms is many
   *  loopback round trips yet well under one heartbeat check. */
  retransmitMs: 40,
  /** Handshake retry while a peer is not connected. */
  handshakeRetryMs: 50,
  /** Spec §3.5 G5 ReplicaTimeout, not in the paper. Under a flood on 2 cores a backup's copy
   *  can trail the primary's by a few hundred ms; shorter values turned load into error reports
   *  (bench/group.ts). Also the period of aggregated error reports. */
  replicaTimeoutMs: 500,
  /** How long a backup waits for the other backup's confirmation of the primary's order when
   *  that backup still heartbeats but does not confirm (PROTOCOL §5.8). Safety against an
   *  equivocating primary rests on this bound (3 replicas cannot do without one), so it is far
   *  above lane-0 retransmission under heavy loss; a silent backup is waived sooner. */
  orderConfirmMs: 1000,
  /** Spec §3.6 G8 PrimaryProgressTimeout, not in the paper. Since issue 5 its expiry accuses the
   *  primary (PROTOCOL §10.2), so it must exceed the worst round trip a correct primary can
   *  take within the fault model's bounds: forward and wrapper each with two retransmissions
   *  (40 + 80 ms) and a latency spike (< 100 ms). 150 ms condemned correct primaries in the
   *  simulator and would on a loaded machine. */
  primaryProgressMs: 500,
  /** How long after its own start a daemon does not judge a peer it has no session with: a
   *  backup does not count its PrimaryProgressTimeouts against it (PROTOCOL §5.6), an agent
   *  does not time out the copies only it owes (§5.3). A peer not met may still be booting; one that has
   *  not come in this time has crashed or never started, and is judged. Not in the paper. The
   *  daemons of one cluster start within about a second of each other on this machine under
   *  load (13 at once after a cluster reset: about 3 s), so 5 s. */
  startGraceMs: 5000,
  /** The group's task clock (PROTOCOL §8.3): the primary orders a tick this often while a task
   *  timer runs. Start-TO and Terminate-TO count these ticks. */
  taskTickMs: 50,
  /** FsmTask Start-TO (spec §6.1 T3–T5, not in the paper): submit → every process running.
   *  Linked processes count as running once their library connected: a Node application with
   *  TypeScript loading takes 1–3 s to get there on a loaded 2-core machine (measured), so the
   *  bound is generous. */
  startTimeoutMs: 20000,
  /** FsmTask Terminate-TO (T8, T17, not in the paper). */
  terminateTimeoutMs: 2000,
  /** Start attempts before a task is given up (T5) and Terminate sends before it is abandoned
   *  (T17); not in the paper. */
  maxStartAttempts: 3,
  maxTerminateAttempts: 3,
  /** Spec §1.3 / §1.7: a probe unanswered this long declares the node failed. */
  probeTimeoutMs: 120,
  /** A linked process must connect to its agent within this (FsmAgentProc's connect timeout);
   *  below Start-TO so a process that never connects fails its start with that reason. */
  connectTimeoutMs: 15000,
  /** Spec §4.5 (b): a group request that has not gathered a quorum this long after the first
   *  of its epoch arrived is answered GSIG_ERR_DISAGREE ("preset timeout", value not in the
   *  paper). Counted in ordered task-clock ticks. */
  groupRequestTimeoutMs: 1000,
  /** Spec §1.3 / §1.7: a replica that self-diagnosis finds unresponsive this long after the
   *  missed heartbeat that started it is accused of being silent (PROTOCOL §10.2). */
  diagnosisTimeoutMs: 400,
  /** A new replica must ask for the state this long after the group commanded its spawn, or
   *  the group abandons it and spawns another on another node (PROTOCOL §10.6; A24). Counted
   *  in ordered ticks. Starting a Node daemon takes about a second on a loaded machine. */
  replicaStartTimeoutMs: 15000,
  /** Spec §1.6 rule 2: the watchdog resets the cluster when, for this long, it has not had
   *  fresh heartbeats from two replicas agreeing on the view (PROTOCOL §10.8). Above the
   *  400 ms diagnosis and a view change. */
  watchdogSilenceMs: 2000,
  /** Spec §1.6 rule 3 (values not in the paper): more than `diagnosisThreshold` self-diagnosis
   *  initiations within `diagnosisWindowMs`, reported by at least two replicas, reset the
   *  cluster (the flaw-11c guard, PROTOCOL §10.8). A self-diagnosis that never converges
   *  starts a round every diagnosisTimeoutMs per replica: 150 in 30 s from two replicas. A
   *  correct group on a host loaded far beyond its timing bounds (load 17 on 2 vCPUs, CI) was
   *  measured making 21 while it flapped between suspicions. 60 stays 2.5 times below the first
   *  and about 3 times above the second. (It was 20 until clusters were really reset.) */
  diagnosisWindowMs: 30000,
  diagnosisThreshold: 60,
  /** Replicas record their state digest every this many RSNs (a checkpoint) and compare it with
   *  their peers' (PROTOCOL §10.4). A count of RSNs, not ms; kept with the timing so a cluster
   *  (and the benchmark of its cost) can set it. */
  digestEveryRsn: 16,
} as const;

export type Timing = { [K in keyof typeof DEFAULT_TIMING]: number };
