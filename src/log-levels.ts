/**
 * nginx's log levels (`err_levels` in `src/core/ngx_log.c`), most severe
 * first. A target at level L receives messages of L and every more severe one.
 */
export const LOG_LEVELS = ['emerg', 'alert', 'crit', 'error', 'warn', 'notice', 'info', 'debug'] as const;

export type LogLevel = (typeof LOG_LEVELS)[number];

/** nginx's numeric severity: emerg 1 … debug 8 (smaller is more severe). */
export function severity(level: LogLevel): number {
  return LOG_LEVELS.indexOf(level) + 1;
}

/** Whether a word is one of nginx's level names. */
export function isLogLevel(word: string): word is LogLevel {
  return (LOG_LEVELS as readonly string[]).includes(word);
}
