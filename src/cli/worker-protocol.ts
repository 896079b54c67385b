/**
 * The messages between jinx's master and its workers (node:cluster's IPC
 * channel, nginx's `ngx_channel`): a worker says when it serves, and asks
 * the master for what the workers share. Commands to stop or reopen logs
 * go by signal, as nginx's master sends them.
 */
import type { ConfigSnapshot } from '../parser/load.js';
import type { LimitConnCheck, LimitConnHeld, LimitConnOutcome } from '../runtime/limit-conn-zones.js';
import type { LimitCheck, LimitOutcome } from '../runtime/limit-req-zones.js';
import type { StatusSnapshot } from '../runtime/stub-status.js';
import type { PeerEvent } from '../runtime/upstream/round-robin.js';

/** The environment variable that tells a worker its number (0 to `worker_processes` − 1). */
export const WORKER_INDEX_ENV = 'JINX_WORKER_INDEX';

/** From a worker: it serves (every listening socket is bound, `ngx_worker_process_init` done). */
export interface ReadyMessage {
  readonly type: 'ready';
}

/** From a worker, before `ready`: it listens on every address (what it accepts waits until it serves). */
export interface ListeningMessage {
  readonly type: 'listening';
}

/** From a worker: count a request against its `limit_req` zones (`LimitReqStore.apply`). */
export interface LimitReqQuery {
  readonly type: 'limit_req';
  readonly id: number;
  readonly checks: readonly LimitCheck[];
}

/** From a worker: count a request in its `limit_conn` zones (`LimitConnStore.acquire`). */
export interface LimitConnQuery {
  readonly type: 'limit_conn';
  readonly id: number;
  readonly checks: readonly LimitConnCheck[];
}

/** From a worker: a request that `limit_conn` counted has ended (`LimitConnStore.release`). */
export interface LimitConnRelease {
  readonly type: 'limit_conn_release';
  readonly held: readonly LimitConnHeld[];
}

/** From a worker: keep a new session in an `ssl_session_cache shared:` zone (`SessionStore.keep`; `data` in base64). */
export interface SslSessionKeep {
  readonly type: 'ssl_session_keep';
  readonly zone: string;
  readonly sessionId: string;
  readonly data: string;
  readonly expiresAtMs: number;
  readonly maxSessions: number;
}

/** From a worker: the session to resume (`SessionStore.find`). */
export interface SslSessionQuery {
  readonly type: 'ssl_session';
  readonly id: number;
  readonly zone: string;
  readonly sessionId: string;
}

/** From a worker: the stub_status figures of all workers, for a status page (`ProcessStatus.snapshot`). */
export interface StatusQuery {
  readonly type: 'status';
  readonly id: number;
}

/**
 * From a worker: its own stub_status figures, answering the master's
 * `StatusGather` of `id`, or (id 0) the last ones it counted before it exits.
 */
export interface StatusReport {
  readonly type: 'status_report';
  readonly id: number;
  readonly snapshot: StatusSnapshot;
}

/** From the master to every worker: report your figures (`StatusReport` with this `id`). */
export interface StatusGather {
  readonly type: 'status_gather';
  readonly id: number;
}

/** Whether `m` is a `StatusGather`. */
export function isStatusGather(m: unknown): m is StatusGather {
  return (m as { type?: unknown } | null)?.type === 'status_gather' && typeof (m as { id?: unknown }).id === 'number';
}

/**
 * Both ways: a peer of an upstream group with `zone` failed or recovered;
 * the master passes a worker's to the other workers of its generation.
 */
export interface PeerEventMessage {
  readonly type: 'peer_event';
  readonly event: PeerEvent;
}

/** Whether `m` is a `PeerEventMessage`. */
export function isPeerEventMessage(m: unknown): m is PeerEventMessage {
  return (m as { type?: unknown } | null)?.type === 'peer_event';
}

/** What a worker asks of or tells the zones its master keeps. */
export type ZoneMessage = LimitReqQuery | LimitConnQuery | LimitConnRelease | SslSessionKeep | SslSessionQuery | StatusQuery | StatusReport;

/**
 * From the master: the answer to query `id` (`limit` to a `limit_req` one,
 * `conn` to a `limit_conn` one, `session` in base64 to an `ssl_session`
 * one, absent when unknown; `status` to a `status` one).
 */
export interface ZoneAnswer {
  readonly type: 'zone_answer';
  readonly id: number;
  readonly limit?: LimitOutcome;
  readonly conn?: LimitConnOutcome;
  readonly session?: string;
  readonly status?: StatusSnapshot;
}

/** From a worker, first: send me the configuration to serve. */
export interface ConfQuery {
  readonly type: 'conf';
}

/**
 * From the master: the configuration files it read and checked, for the
 * worker to serve, and the generation's session ticket keys (48 bytes in
 * base64), the same for all its workers.
 */
export interface ConfMessage {
  readonly type: 'conf';
  readonly snapshot: ConfigSnapshot;
  readonly ticketKeys: string;
}

/** What a worker serves: the configuration its master checked, and the keys its TLS contexts share. */
export interface WorkerConf {
  readonly snapshot: ConfigSnapshot;
  readonly ticketKeys: Buffer;
}

/** From a worker that is starting: an `[emerg]` line it logged (a bind that failed), for `-s reload` to show. */
export interface EmergMessage {
  readonly type: 'emerg';
  readonly message: string;
}

export type WorkerMessage = ConfQuery | ListeningMessage | ReadyMessage | ZoneMessage | PeerEventMessage | EmergMessage;

/** From the master to the workers of the configuration in service: a reload is under way (`Engine.retire`). */
export interface RetireMessage {
  readonly type: 'retire';
}

/** Whether `m` is a `RetireMessage`. */
export function isRetireMessage(m: unknown): m is RetireMessage {
  return (m as { type?: unknown } | null)?.type === 'retire';
}

/** Whether `m` is a message of a jinx worker (cluster sends its own on the same channel). */
export function isWorkerMessage(m: unknown): m is WorkerMessage {
  const type = (m as { type?: unknown } | null)?.type;
  return type === 'conf' || type === 'listening' || type === 'ready' || type === 'limit_req' || type === 'limit_conn' || type === 'limit_conn_release'
    || type === 'ssl_session_keep' || type === 'ssl_session' || type === 'peer_event' || type === 'emerg' || type === 'status' || type === 'status_report';
}

/** Whether `m` is the master's answer to a zone query. */
export function isZoneAnswer(m: unknown): m is ZoneAnswer {
  return (m as { type?: unknown } | null)?.type === 'zone_answer' && typeof (m as { id?: unknown }).id === 'number';
}

/**
 * Asks the master for the configuration to serve (a message sent before a
 * worker listens would be lost, so the worker asks).
 * @returns it, or undefined when the channel closes first
 */
export function confFromMaster(): Promise<WorkerConf | undefined> {
  return new Promise((resolve) => {
    const onMessage = (m: unknown): void => {
      if ((m as { type?: unknown } | null)?.type !== 'conf') return;
      process.off('message', onMessage);
      const conf = m as ConfMessage;
      resolve({ snapshot: conf.snapshot, ticketKeys: Buffer.from(conf.ticketKeys, 'base64') });
    };
    process.on('message', onMessage);
    process.once('disconnect', () => resolve(undefined));
    const query: ConfQuery = { type: 'conf' };
    process.send?.(query);
  });
}
