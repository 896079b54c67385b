/**
 * The zones nginx keeps in shared memory for all its workers, kept by
 * jinx's master: node has no memory shared between processes, so a worker
 * asks the master by message and the master's one state answers, in the
 * order the questions arrive (nginx's zone lock). A `limit_req` check is
 * one round trip over the cluster channel, as is a `limit_conn` count (its
 * release at the request's end is one message), and resuming a session of an
 * `ssl_session_cache shared:` zone; keeping a new session is one message
 * (bench/README.md has their cost). The stub_status counters, which nginx
 * also keeps there, are counted by each worker in its own memory (a
 * request costs no message) and gathered by the master when a status page
 * asks: it asks every worker for its figures and sums them with what the
 * workers that exited had counted.
 */
import type { Worker } from 'node:cluster';
import { LimitConnZones, type LimitConnCheck, type LimitConnHeld, type LimitConnOutcome, type LimitConnStore } from '../runtime/limit-conn-zones.js';
import { LimitReqZones, type LimitCheck, type LimitOutcome, type LimitReqStore } from '../runtime/limit-req-zones.js';
import { LocalSessions, type SessionStore } from '../runtime/session-cache.js';
import { cumulativePart, ProcessStatus, sumSnapshots, type StatusSnapshot } from '../runtime/stub-status.js';
import {
  isStatusGather, isZoneAnswer, type LimitConnQuery, type LimitReqQuery, type SslSessionQuery, type StatusGather, type StatusQuery, type StatusReport, type ZoneAnswer,
  type ZoneMessage,
} from './worker-protocol.js';

/** How long the master waits for the workers' figures before it answers with those it has. */
const GATHER_TIMEOUT_MS = 1000;

/** A status page's question being answered: the workers yet to report, and the reports so far. */
interface Gather {
  readonly asker: Worker;
  readonly queryId: number;
  readonly pending: Set<Worker>;
  readonly reports: StatusSnapshot[];
  readonly timer: NodeJS.Timeout;
}

/** The master's side: the zones' one state. */
export class MasterZones {
  private readonly limitReq: LimitReqZones;
  private readonly limitConn = new LimitConnZones();
  /** The `limit_conn` counts each worker holds, given back if it exits without releasing them. */
  private readonly heldBy = new Map<Worker, LimitConnHeld[][]>();
  private readonly sessions = new LocalSessions();
  /** The cumulative figures of the workers that exited (their gauges are gone with their connections). */
  private retired: StatusSnapshot = sumSnapshots([]);
  /** Each live worker's last report, which becomes `retired` when it exits. */
  private readonly lastReports = new Map<Worker, StatusSnapshot>();
  private readonly gathers = new Map<number, Gather>();
  private nextGather = 0;

  /**
   * @param alert where `could not allocate node in limit_req zone "NAME"` goes
   * @param workers the live workers, of every generation
   */
  constructor(alert: (message: string) => void, private readonly workers: () => Iterable<Worker>) {
    this.limitReq = new LimitReqZones(alert);
  }

  /** Applies a worker's message, answering a query. */
  answer(worker: Worker, m: ZoneMessage): void {
    let answer: ZoneAnswer;
    if (m.type === 'status') {
      this.gather(worker, m);
      return;
    } else if (m.type === 'status_report') {
      this.reported(worker, m);
      return;
    } else if (m.type === 'ssl_session_keep') {
      this.sessions.keep(m.zone, m.sessionId, Buffer.from(m.data, 'base64'), m.expiresAtMs, m.maxSessions);
      return;
    } else if (m.type === 'limit_conn_release') {
      this.limitConn.release(m.held);
      this.forget(worker, m.held);
      return;
    } else if (m.type === 'limit_conn') {
      const conn = this.limitConn.acquire(m.checks);
      if (conn.kind === 'pass') this.remember(worker, m.checks);
      answer = { type: 'zone_answer', id: m.id, conn };
    } else if (m.type === 'ssl_session') {
      answer = { type: 'zone_answer', id: m.id, session: this.sessions.find(m.zone, m.sessionId)?.toString('base64') };
    } else {
      answer = { type: 'zone_answer', id: m.id, limit: this.limitReq.apply(m.checks) };
    }
    if (worker.isConnected()) worker.send(answer);
  }

  /** A status page's question: every live worker is asked for its figures (`StatusGather`). */
  private gather(asker: Worker, query: StatusQuery): void {
    const id = ++this.nextGather;
    const pending = new Set([...this.workers()].filter((w) => w.isConnected()));
    const gather: Gather = { asker, queryId: query.id, pending, reports: [], timer: setTimeout(() => this.answerGather(id), GATHER_TIMEOUT_MS) };
    gather.timer.unref();
    this.gathers.set(id, gather);
    const ask: StatusGather = { type: 'status_gather', id };
    for (const w of pending) w.send(ask);
    if (pending.size === 0) this.answerGather(id);
  }

  /** A worker's figures: for a gather under way, or its last before it exits (id 0). */
  private reported(worker: Worker, report: StatusReport): void {
    this.lastReports.set(worker, report.snapshot);
    const gather = this.gathers.get(report.id);
    if (!gather || !gather.pending.delete(worker)) return;
    gather.reports.push(report.snapshot);
    if (gather.pending.size === 0) this.answerGather(report.id);
  }

  /** Answers a gather with the figures reported, summed with the exited workers'. */
  private answerGather(id: number): void {
    const gather = this.gathers.get(id);
    if (!gather) return;
    this.gathers.delete(id);
    clearTimeout(gather.timer);
    const answer: ZoneAnswer = { type: 'zone_answer', id: gather.queryId, status: sumSnapshots([this.retired, ...gather.reports]) };
    if (gather.asker.isConnected()) gather.asker.send(answer);
  }

  /** A worker exited: what it counted last stays counted; no gather waits for it. */
  workerExited(worker: Worker): void {
    const last = this.lastReports.get(worker);
    this.lastReports.delete(worker);
    if (last) this.retired = sumSnapshots([this.retired, cumulativePart(last)]);
    for (const [id, gather] of this.gathers) {
      if (gather.pending.delete(worker) && gather.pending.size === 0) this.answerGather(id);
    }
  }

  /** Keeps what `worker` holds, to give it back when the worker exits (nginx's counts of a crashed worker stay: jinx's do not). */
  private remember(worker: Worker, held: readonly LimitConnHeld[]): void {
    let list = this.heldBy.get(worker);
    if (!list) {
      list = [];
      this.heldBy.set(worker, list);
      worker.once('exit', () => {
        for (const h of this.heldBy.get(worker) ?? []) this.limitConn.release(h);
        this.heldBy.delete(worker);
      });
    }
    list.push([...held]);
  }

  /** Drops one request's keys from what `worker` holds. */
  private forget(worker: Worker, held: readonly LimitConnHeld[]): void {
    const list = this.heldBy.get(worker);
    if (!list) return;
    const same = (a: readonly LimitConnHeld[]): boolean =>
      a.length === held.length && a.every((h, i) => h.key === held[i]!.key && h.zone.name === held[i]!.zone.name && h.zone.sizeBytes === held[i]!.zone.sizeBytes);
    const at = list.findIndex(same);
    if (at !== -1) list.splice(at, 1);
  }
}

/**
 * A worker's questions to its master, each answered by the `ZoneAnswer` of
 * its id. Once the channel is gone (the master died), `ask` resolves
 * undefined: each store then answers from a state of its own.
 */
class MasterQueries {
  private nextId = 0;
  private readonly waiting = new Map<number, (answer: ZoneAnswer | undefined) => void>();

  constructor() {
    process.on('message', (m: unknown) => {
      if (!isZoneAnswer(m)) return;
      this.waiting.get(m.id)?.(m);
      this.waiting.delete(m.id);
    });
    process.once('disconnect', () => {
      for (const resolve of this.waiting.values()) resolve(undefined);
      this.waiting.clear();
    });
  }

  /** Whether the master can be asked. */
  get connected(): boolean {
    return process.connected && process.send !== undefined;
  }

  /** Sends `query` (with a fresh id) and resolves to its answer. */
  ask(query: (id: number) => LimitReqQuery | LimitConnQuery | SslSessionQuery | StatusQuery): Promise<ZoneAnswer | undefined> {
    const id = ++this.nextId;
    return new Promise((resolve) => {
      this.waiting.set(id, resolve);
      process.send!(query(id));
    });
  }

  /** Sends a message that has no answer. */
  tell(message: ZoneMessage): void {
    if (this.connected) process.send!(message);
  }
}

/** One `MasterQueries` per worker process. */
let queries: MasterQueries | undefined;
const masterQueries = (): MasterQueries => (queries ??= new MasterQueries());

/** A worker's `limit_req` zones: the master's; without the master, zones of its own. */
export class WorkerLimitReq implements LimitReqStore {
  private local: LimitReqZones | undefined;

  /** @param alert where the worker's own zones report a full zone */
  constructor(private readonly alert: (message: string) => void) {}

  apply(checks: readonly LimitCheck[]): LimitOutcome | Promise<LimitOutcome> {
    const master = masterQueries();
    if (!master.connected) {
      this.local ??= new LimitReqZones(this.alert);
      return this.local.apply(checks);
    }
    // the zone's key is a compiled value: only what the state depends on goes
    const sent = checks.map((c) => ({ zone: { name: c.zone.name, rateMilli: c.zone.rateMilli, sizeBytes: c.zone.sizeBytes }, key: c.key, burstMilli: c.burstMilli, delayMilli: c.delayMilli }));
    return master.ask((id) => ({ type: 'limit_req', id, checks: sent })).then((a) => a?.limit ?? { kind: 'pass' });
  }
}

/** A worker's `limit_conn` zones: the master's; without the master, zones of its own. */
export class WorkerLimitConn implements LimitConnStore {
  private readonly local = new LimitConnZones();
  /** The requests counted in the worker's own zones (after the master went away), released there. */
  private readonly countedHere = new WeakSet<readonly LimitConnHeld[]>();

  acquire(checks: readonly LimitConnCheck[]): LimitConnOutcome | Promise<LimitConnOutcome> {
    const master = masterQueries();
    if (!master.connected) {
      const outcome = this.local.acquire(checks);
      if (outcome.kind === 'pass') this.countedHere.add(checks);
      return outcome;
    }
    // the zone's key is a compiled value: only what the state depends on goes
    const sent = checks.map((c) => ({ zone: { name: c.zone.name, sizeBytes: c.zone.sizeBytes }, key: c.key, conn: c.conn }));
    return master.ask((id) => ({ type: 'limit_conn', id, checks: sent })).then((a) => {
      if (a?.conn) return a.conn;
      // the master went away meanwhile: the worker's own zones count from now on
      const outcome = this.local.acquire(checks);
      if (outcome.kind === 'pass') this.countedHere.add(checks);
      return outcome;
    });
  }

  release(held: readonly LimitConnHeld[]): void {
    if (this.countedHere.has(held)) {
      this.local.release(held);
      return;
    }
    const sent = held.map((h) => ({ zone: { name: h.zone.name, sizeBytes: h.zone.sizeBytes }, key: h.key }));
    masterQueries().tell({ type: 'limit_conn_release', held: sent });
  }
}

/** A worker's `ssl_session_cache shared:` zones: the master's; without the master, zones of its own. */
export class WorkerSessions implements SessionStore {
  private readonly local = new LocalSessions();

  keep(zone: string, sessionId: string, data: Buffer, expiresAtMs: number, maxSessions: number): void {
    const master = masterQueries();
    if (!master.connected) return this.local.keep(zone, sessionId, data, expiresAtMs, maxSessions);
    master.tell({ type: 'ssl_session_keep', zone, sessionId, data: data.toString('base64'), expiresAtMs, maxSessions });
  }

  find(zone: string, sessionId: string): Buffer | undefined | Promise<Buffer | undefined> {
    const master = masterQueries();
    if (!master.connected) return this.local.find(zone, sessionId);
    return master.ask((id) => ({ type: 'ssl_session', id, zone, sessionId }))
      .then((a) => (a?.session === undefined ? undefined : Buffer.from(a.session, 'base64')));
  }
}

/**
 * A worker's stub_status figures: it counts its own; a status page shows
 * every worker's, which it asks the master for (its own alone without the
 * master). It answers the master's `StatusGather` with its figures, and
 * tells them a last time before it exits (`reportLast`).
 */
export class WorkerStatus extends ProcessStatus {
  constructor() {
    super();
    process.on('message', (m: unknown) => {
      if (!isStatusGather(m)) return;
      this.report(m.id);
    });
  }

  private report(id: number): void {
    const report: StatusReport = { type: 'status_report', id, snapshot: this.own() };
    masterQueries().tell(report);
  }

  /** Tells the master the figures counted last, before the worker leaves it. */
  reportLast(): void {
    this.report(0);
  }

  override snapshot(): StatusSnapshot | Promise<StatusSnapshot> {
    const master = masterQueries();
    if (!master.connected) return this.own();
    return master.ask((id) => ({ type: 'status', id })).then((a) => a?.status ?? this.own());
  }
}
