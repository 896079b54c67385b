/**
 * The error log, byte for byte as nginx writes it:
 *
 *     2026/11/21 20:56:19 [error] 26597#26597: *41 MESSAGE, client: …, server: …, request: "…", upstream: "…", host: "…"
 *
 * The line is built in one place (`formatErrorLine` of `error-line.ts`, with `requestContext`),
 * after `ngx_log_error_core` (`src/core/ngx_log.c`) and `ngx_http_log_error`
 * / `ngx_http_log_error_handler` (`src/http/ngx_http_request.c`). Lines go
 * through pino, limited to nginx's eight levels, into a metadata destination
 * that renders the nginx text and writes it synchronously with sonic-boom, so
 * a line is on disk before the response that caused it completes.
 */
import pino, { type Logger } from 'pino';
import { SonicBoom, writeBytes } from './sonic.js';
import { formatErrorLine } from './error-line.js';
import type { ErrorLogTarget } from '../config/route-table.js';
import type { RequestView } from '../config/request-view.js';
import { LOG_LEVELS, type LogLevel } from '../log-levels.js';

const PINO_LEVELS: Record<LogLevel, number> = {
  emerg: 80, alert: 70, crit: 60, error: 50, warn: 40, notice: 30, info: 20, debug: 10,
};
const LEVEL_BY_NUMBER = new Map<number, LogLevel>(LOG_LEVELS.map((l) => [PINO_LEVELS[l], l]));

/**
 * The context nginx appends to a request's error lines: ` while ACTION`, then
 * `client`, `server`, `request`, `subrequest`, `upstream`, `host`, `referrer`,
 * each present exactly when nginx prints it.
 */
export function requestContext(r: RequestView): string {
  const main = r.parent ?? r;
  let s = r.action ? ` while ${r.action}` : '';
  s += `, client: ${main.clientAddr}, server: ${main.server.name}`;
  // ngx_http_log_error_handler: no request line yet (an HTTP/2 stream refused while its header block is read), no field
  const line = main.requestLine;
  if (line) s += `, request: "${line}"`;
  if (r.parent) s += `, subrequest: "${r.uri}"`;
  if (r.upstream) s += `, upstream: "${r.upstream.logName}"`;
  if (!main.headersRead) return s;
  const host = main.headers.host;
  if (host !== undefined) s += `, host: "${host}"`;
  const referer = main.headers.referer;
  if (referer !== undefined) s += `, referrer: "${referer}"`;
  return s;
}

/**
 * The context of a connection-level line, before a request exists:
 * `, client: ADDR, server: LISTEN_ADDR` (`ngx_http_log_error`).
 */
export function connectionContext(clientAddr: string, listenAddrText: string): string {
  return `, client: ${clientAddr}, server: ${listenAddrText}`;
}

interface LineFields {
  conn?: number;
  context?: string;
}

/** A pino metadata destination that renders nginx's text line from pino's last call. */
class NginxLineDestination {
  readonly [key: symbol]: boolean;
  lastLevel = 0;
  lastMsg = '';
  lastObj: LineFields = {};

  constructor(private readonly out: SonicBoom) {
    (this as unknown as Record<symbol, boolean>)[Symbol.for('pino.metadata')] = true;
  }

  write(): void {
    const level = LEVEL_BY_NUMBER.get(this.lastLevel) ?? 'error';
    writeBytes(this.out, formatErrorLine(level, this.lastMsg, this.lastObj.conn, this.lastObj.context) + '\n');
  }
}

/**
 * The open error-log files of a running configuration, shared by every
 * target naming the same path; `reopen` is SIGUSR1's log rotation.
 */
export class ErrorLogFiles {
  private readonly streams = new Map<string, SonicBoom>();
  private readonly loggers = new Map<string, Logger<LogLevel>>();

  /**
   * Opens (or reuses) the file of every target.
   * @throws Error with the system error when a file cannot be opened
   */
  open(targets: readonly ErrorLogTarget[]): void {
    for (const t of targets) this.logger(t);
  }

  private stream(path: string): SonicBoom {
    let s = this.streams.get(path);
    if (!s) {
      s = path === 'stderr'
        ? new SonicBoom({ fd: 2, sync: true, contentMode: 'buffer' })
        : new SonicBoom({ dest: path, sync: true, append: true, mkdir: false, contentMode: 'buffer' });
      this.streams.set(path, s);
    }
    return s;
  }

  private logger(t: ErrorLogTarget): Logger<LogLevel> {
    const key = `${t.level}\0${t.path}`;
    let l = this.loggers.get(key);
    if (!l) {
      l = pino<LogLevel>(
        {
          customLevels: PINO_LEVELS,
          useOnlyCustomLevels: true,
          level: t.level,
          base: null,
          timestamp: false,
        },
        new NginxLineDestination(this.stream(t.path)) as unknown as pino.DestinationStream,
      );
      this.loggers.set(key, l);
    }
    return l;
  }

  /**
   * Whether a line at `level` goes to one of `targets` at least (a target
   * at level L takes L and every more severe level): a caller skips
   * building a line that no target takes.
   */
  admits(targets: readonly ErrorLogTarget[], level: LogLevel): boolean {
    const value = PINO_LEVELS[level];
    for (const t of targets) if (value >= PINO_LEVELS[t.level]) return true;
    return false;
  }

  /** Writes a line to every target whose level admits it. */
  write(targets: readonly ErrorLogTarget[], level: LogLevel, message: string, conn?: number, context?: string): void {
    for (const t of targets) this.logger(t)[level]({ conn, context }, message);
  }

  /** Reopens every file (after log rotation). */
  reopen(): void {
    for (const [path, s] of this.streams) if (path !== 'stderr') s.reopen();
  }

  /** Flushes and closes every file. */
  close(): void {
    for (const [path, s] of this.streams) {
      if (path === 'stderr') continue;
      s.flushSync();
      s.end();
    }
    this.streams.clear();
    this.loggers.clear();
  }
}
