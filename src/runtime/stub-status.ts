/**
 * The figures of the stub_status module (`ngx_http_stub_status_module.c`):
 * nginx's `ngx_stat_*` counters, which nginx keeps in memory its workers
 * share and moves where it accepts a connection (`ngx_event_accept`),
 * marks one idle (`ngx_reusable_connection`), creates a request
 * (`ngx_http_create_request`, also for each HTTP/2 stream), processes it
 * (`ngx_http_process_request`) and frees it (`ngx_http_free_request`);
 * and, beyond nginx, the tallies of jinx's Prometheus page: requests by
 * server and status class, upstream attempts by status class and their
 * response times. Each process counts its own with plain increments; with
 * worker processes the master sums the workers' figures when a status page
 * asks (`cli/shared-zones.ts`).
 */
import type { UpstreamState } from '../config/request-view.js';
import type { HttpRequestState } from './request.js';

/** nginx's `ngx_stat_accepted` … `ngx_stat_waiting` of this process. */
export class StatusCounters {
  /** Connections accepted, admitted or not (`ngx_stat_accepted`). */
  accepted = 0;
  /** Connections admitted within `worker_connections` (`ngx_stat_handled`). */
  handled = 0;
  /** Client connections open (`ngx_stat_active`). */
  active = 0;
  /** Requests created, HTTP/2 streams included (`ngx_stat_requests`). */
  requests = 0;
  /** Requests whose head is being read (`ngx_stat_reading`). */
  reading = 0;
  /** Requests being processed and answered (`ngx_stat_writing`). */
  writing = 0;
  /** Idle connections: waiting for a request, kept alive (`ngx_stat_waiting`). */
  waiting = 0;
}

/** Where a request of a connection is: none, reading its head, or processed (`r->stat_reading`, `r->stat_writing`). */
export const enum RequestStage { None, Reading, Writing }

/**
 * One client connection's part in the counters: admitted (`handled`,
 * `active`), idle or not (nginx's `c->reusable`), and the stage of its
 * HTTP/1.x request. An HTTP/2 connection's streams keep their own stage
 * (`streamCreated` …). Nothing moves once the connection is closed.
 */
export class ConnectionStat {
  private idle = false;
  private stage = RequestStage.None;
  private closedAlready = false;

  constructor(private readonly c: StatusCounters) {
    c.handled++;
    c.active++;
  }

  /** `ngx_reusable_connection`: the connection is idle (`waiting`) or not. */
  reusable(on: boolean): void {
    if (on === this.idle || this.closedAlready) return;
    this.idle = on;
    if (on) this.c.waiting++;
    else this.c.waiting--;
  }

  /** `ngx_http_create_request` of an HTTP/1.x request: the connection is no longer idle. */
  requestCreated(): void {
    if (this.closedAlready) return;
    this.reusable(false);
    this.requestFreed();
    this.stage = this.streamCreated();
  }

  /** `ngx_http_process_request`: the request's head was read. */
  requestProcessed(): void {
    if (this.stage === RequestStage.Reading) this.stage = this.streamProcessed(this.stage);
  }

  /** `ngx_http_free_request`. */
  requestFreed(): void {
    this.stage = this.streamFreed(this.stage);
  }

  /** A request (an HTTP/2 stream's) is created: counted, reading. */
  streamCreated(): RequestStage {
    this.c.requests++;
    this.c.reading++;
    return RequestStage.Reading;
  }

  /** A request of `stage` is processed: writing. */
  streamProcessed(stage: RequestStage): RequestStage {
    if (stage !== RequestStage.Reading) return stage;
    this.c.reading--;
    this.c.writing++;
    return RequestStage.Writing;
  }

  /** A request of `stage` is freed. */
  streamFreed(stage: RequestStage): RequestStage {
    if (stage === RequestStage.Reading) this.c.reading--;
    else if (stage === RequestStage.Writing) this.c.writing--;
    return RequestStage.None;
  }

  /** The connection closed (`ngx_http_close_connection`): its request freed, no longer idle nor active. */
  closed(): void {
    if (this.closedAlready) return;
    this.requestFreed();
    this.reusable(false);
    this.closedAlready = true;
    this.c.active--;
  }
}

/** Upper bounds of the upstream response-time histogram, in seconds (Prometheus's default buckets). */
export const UPSTREAM_BUCKETS_SEC: readonly number[] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** One upstream's attempts: by status class (1xx … 5xx), and their response times. */
export interface UpstreamTally {
  readonly classes: number[];
  /** Attempts per bucket of `UPSTREAM_BUCKETS_SEC` (not cumulative), then those over the last. */
  readonly buckets: number[];
  sumMs: number;
  count: number;
}

/** The figures a status page shows, as plain data (they travel between processes). */
export interface StatusSnapshot {
  readonly accepted: number;
  readonly handled: number;
  readonly active: number;
  readonly requests: number;
  readonly reading: number;
  readonly writing: number;
  readonly waiting: number;
  /** Requests by `server_name` (the server's first name), by status class 1xx … 5xx. */
  readonly servers: Record<string, number[]>;
  /** Upstream attempts by upstream (the `proxy_pass` group, else the peer's address). */
  readonly upstreams: Record<string, UpstreamTally>;
}

/** The figures of every worker, summed (`retired`: what workers that exited had counted). */
export function sumSnapshots(all: readonly StatusSnapshot[]): StatusSnapshot {
  const servers: Record<string, number[]> = {};
  const upstreams: Record<string, UpstreamTally> = {};
  const sum = { accepted: 0, handled: 0, active: 0, requests: 0, reading: 0, writing: 0, waiting: 0 };
  for (const s of all) {
    sum.accepted += s.accepted;
    sum.handled += s.handled;
    sum.active += s.active;
    sum.requests += s.requests;
    sum.reading += s.reading;
    sum.writing += s.writing;
    sum.waiting += s.waiting;
    for (const [name, classes] of Object.entries(s.servers)) {
      const to = (servers[name] ??= [0, 0, 0, 0, 0]);
      for (let i = 0; i < 5; i++) to[i]! += classes[i]!;
    }
    for (const [name, u] of Object.entries(s.upstreams)) {
      const to = (upstreams[name] ??= newTally());
      for (let i = 0; i < 5; i++) to.classes[i]! += u.classes[i]!;
      for (let i = 0; i < to.buckets.length; i++) to.buckets[i]! += u.buckets[i]!;
      to.sumMs += u.sumMs;
      to.count += u.count;
    }
  }
  return { ...sum, servers, upstreams };
}

/** The cumulative part of a snapshot (what stays counted once its worker exited): its gauges zero. */
export function cumulativePart(s: StatusSnapshot): StatusSnapshot {
  return { ...s, active: 0, reading: 0, writing: 0, waiting: 0 };
}

function newTally(): UpstreamTally {
  return { classes: [0, 0, 0, 0, 0], buckets: new Array<number>(UPSTREAM_BUCKETS_SEC.length + 1).fill(0), sumMs: 0, count: 0 };
}

/** The bucket of a response time: the first bound it does not exceed. */
function bucketOf(ms: number): number {
  const sec = ms / 1000;
  let i = 0;
  while (i < UPSTREAM_BUCKETS_SEC.length && sec > UPSTREAM_BUCKETS_SEC[i]!) i++;
  return i;
}

/**
 * The status figures of a process (the counters its connections move, the
 * tallies its requests add) and where a status page reads them: this
 * process's own, or, in a worker, all workers' through the master.
 */
export class ProcessStatus {
  readonly counters = new StatusCounters();
  private readonly servers = new Map<string, number[]>();
  private readonly upstreams = new Map<string, UpstreamTally>();

  /**
   * Tallies a finished client request: its server's status class, and each
   * upstream attempt's status class and response time under the request's
   * upstream (`upstreamName`, else the attempt's address).
   */
  tally(r: HttpRequestState, upstreamName: string | undefined): void {
    const cls = Math.floor(r.status / 100);
    if (cls >= 1 && cls <= 5) {
      const name = r.server.name;
      let classes = this.servers.get(name);
      if (!classes) this.servers.set(name, (classes = [0, 0, 0, 0, 0]));
      classes[cls - 1]!++;
    }
    const last = r.upstream;
    if (!last) return;
    for (const attempt of last.earlier) this.tallyAttempt(upstreamName ?? attempt.addr, attempt);
    this.tallyAttempt(upstreamName ?? last.addr, last);
  }

  private tallyAttempt(name: string, attempt: UpstreamState): void {
    let u = this.upstreams.get(name);
    if (!u) this.upstreams.set(name, (u = newTally()));
    const attemptClass = Math.floor((attempt.status ?? 0) / 100);
    if (attemptClass >= 1 && attemptClass <= 5) u.classes[attemptClass - 1]!++;
    const ms = attempt.responseTimeMs ?? 0;
    u.buckets[bucketOf(ms)]!++;
    u.sumMs += ms;
    u.count++;
  }

  /** This process's figures now. */
  own(): StatusSnapshot {
    const c = this.counters;
    const servers: Record<string, number[]> = {};
    for (const [name, classes] of this.servers) servers[name] = [...classes];
    const upstreams: Record<string, UpstreamTally> = {};
    for (const [name, u] of this.upstreams) upstreams[name] = { classes: [...u.classes], buckets: [...u.buckets], sumMs: u.sumMs, count: u.count };
    return {
      accepted: c.accepted, handled: c.handled, active: c.active, requests: c.requests, reading: c.reading, writing: c.writing, waiting: c.waiting,
      servers, upstreams,
    };
  }

  /** The figures a status page shows: this process's (a worker's class asks the master for all workers'). */
  snapshot(): StatusSnapshot | Promise<StatusSnapshot> {
    return this.own();
  }
}
