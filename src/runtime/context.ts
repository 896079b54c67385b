/**
 * What the request phases share while one configuration is being served:
 * the route table, the open logs, the upstream clients. Swapped with the
 * table on reload.
 */
import type { RouteTable } from '../config/route-table.js';
import type { AccessLogFiles } from '../log/access-log.js';
import { requestContext, type ErrorLogFiles } from '../log/error-log.js';
import type { LogLevel } from '../log/levels.js';
import type { LimitConnStore } from './limit-conn-zones.js';
import type { LimitReqStore } from './limit-req-zones.js';
import type { SessionStore } from './session-cache.js';
import type { CacheZones } from './cache/zone.js';
import type { HttpRequestState } from './request.js';
import type { ProcessStatus } from './stub-status.js';
import type { UpstreamClients } from './upstream/clients.js';
import type { FastcgiConnections } from './upstream/fastcgi-connections.js';
import type { NameResolver } from './upstream/resolver.js';
import type { TempFiles } from './temp-files.js';

/** The serving state of one configuration generation. */
export interface RuntimeContext {
  readonly table: RouteTable;
  readonly errorLog: ErrorLogFiles;
  readonly accessLog: AccessLogFiles;
  readonly upstreams: UpstreamClients;
  /** Idle FastCGI connections kept with `fastcgi_keep_conn`. */
  readonly fastcgi: FastcgiConnections;
  readonly resolver: NameResolver;
  /** The process-wide temp-file counter. */
  readonly tempFiles: TempFiles;
  /** The `limit_req_zone` states, kept across reloads. */
  readonly limitReq: LimitReqStore;
  /** The `limit_conn_zone` states, kept across reloads. */
  readonly limitConn: LimitConnStore;
  /** The cache zones of `proxy_cache_path`/`fastcgi_cache_path`, kept across reloads. */
  readonly cache: CacheZones;
  /** The stub_status counters and tallies, kept across reloads. */
  readonly status: ProcessStatus;
  /** The sessions of shared zones (`sticky learn`'s here), kept across reloads. */
  readonly sessions: SessionStore;
}

/** Whether an `error_log` of the request's location takes `debug` lines (the test before a debug line is composed). */
export function debugging(r: HttpRequestState): boolean {
  for (const t of r.loc.errorLogs) if (t.level === 'debug') return true;
  return false;
}

/**
 * Writes a `debug` line for a request to the location's `error_log`s of
 * level debug, as nginx's `ngx_log_debugN` (built `--with-debug`) writes
 * it: no context fields after the message. Callers test `debugging(r)`
 * first, so that no message is composed for nothing.
 */
export function debugRequest(cx: RuntimeContext, r: HttpRequestState, message: string): void {
  cx.errorLog.write(r.loc.errorLogs, 'debug', message, r.main.conn.id);
}

/** Writes an error-log line for a request, with nginx's context fields, to the location's `error_log`. */
export function logRequest(cx: RuntimeContext, r: HttpRequestState, level: LogLevel, message: string): void {
  const main = r.parent ?? r;
  cx.errorLog.write(r.loc.errorLogs, level, message, main.conn.id, requestContext(r));
}

/** A subrequest that ended is written to its location's access log with `log_subrequest on` (`ngx_http_finalize_request`). */
export function logSubrequest(cx: RuntimeContext, sr: HttpRequestState): void {
  if (!sr.loc.logSubrequest) return;
  sr.action = 'logging request';
  cx.accessLog.write(sr.loc.accessLogs, sr, (level, message) => logRequest(cx, sr, level, message));
}

/**
 * Ends a subrequest whose response has ended: its access-log line, and for
 * a background one (a mirror's, a cache update; nothing waits for it) the
 * release of what it holds (its upstream peer).
 */
export function endSubrequest(cx: RuntimeContext, sr: HttpRequestState): void {
  logSubrequest(cx, sr);
  if (!sr.background) return;
  sr.ended = true;
  for (const cleanup of sr.cleanups.splice(0)) cleanup();
}
