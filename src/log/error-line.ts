/**
 * One line of the error log as nginx formats it (`ngx_log_error_core` in
 * `src/core/ngx_log.c`), apart from the logger that writes it (`error-log.ts`,
 * which loads pino): `jinx -t` writes its lines with this alone.
 */
import type { LogLevel } from '../log-levels.js';

/** nginx's `NGX_MAX_ERROR_STR`: a line is cut to this many bytes, its newline included. */
const MAX_LINE_BYTES = 2048;

const pad = (n: number): string => (n < 10 ? `0${n}` : String(n));

let cachedSecond = -1;
let cachedTime = '';

/** Local time as `YYYY/MM/DD HH:MM:SS`, computed once per second (nginx's `ngx_cached_err_log_time`). */
export function errorLogTime(nowMs: number = Date.now()): string {
  const second = Math.floor(nowMs / 1000);
  if (second !== cachedSecond) {
    const d = new Date(nowMs);
    cachedSecond = second;
    cachedTime = `${d.getFullYear()}/${pad(d.getMonth() + 1)}/${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  }
  return cachedTime;
}

/**
 * Formats one line without its newline: time, level, `pid#tid`, `*conn`,
 * message, context. Cut to nginx's maximum length, in bytes: the line is a
 * byte string (one character per byte, as it is written), so a character of
 * a UTF-8 message may be cut as nginx cuts it.
 */
export function formatErrorLine(level: LogLevel, message: string, connId: number | undefined, context = '', nowMs?: number): string {
  const line = `${errorLogTime(nowMs)} [${level}] ${process.pid}#${process.pid}: ${connId === undefined ? '' : `*${connId} `}${message}${context}`;
  return line.length <= MAX_LINE_BYTES - 1 ? line : line.slice(0, MAX_LINE_BYTES - 1);
}
