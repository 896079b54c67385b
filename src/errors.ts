/**
 * Error classes shared by the stages. Each has a stable `code` callers branch
 * on; the message is nginx's wording, without the location suffix.
 */
import type { SourceLoc } from './source-loc.js';

/** Stable codes of configuration errors. */
export type ConfigErrorCode =
  | 'syntax'
  | 'include'
  | 'unknown-directive'
  | 'not-allowed'
  | 'invalid-args'
  | 'no-block'
  | 'not-terminated'
  | 'duplicate'
  | 'invalid-value'
  | 'unknown-variable'
  | 'host-not-found'
  | 'file'
  | 'missing-section';

/**
 * A configuration error as nginx reports it at level `emerg`:
 * `MESSAGE in FILE:LINE`, or just `MESSAGE` when nginx gives no place
 * (`ngx_conf_log_error` versus `ngx_log_error` in nginx's sources).
 */
export class ConfigError extends Error {
  readonly code: ConfigErrorCode;
  readonly loc: SourceLoc | undefined;
  /** The message without location, as nginx words it. */
  readonly text: string;
  /** The level nginx logs it at: `emerg` for configuration errors, `crit` for some file errors. */
  readonly level: 'emerg' | 'crit';
  /**
   * `init` for errors nginx finds after the file has been read (the main
   * context's checks, files to open): `-t` prints "syntax is ok" before them.
   */
  readonly phase: 'parse' | 'init';

  constructor(code: ConfigErrorCode, text: string, loc?: SourceLoc, opts: { level?: 'emerg' | 'crit'; phase?: 'parse' | 'init' } = {}) {
    super(withLoc(text, loc));
    this.name = 'ConfigError';
    this.code = code;
    this.text = text;
    this.loc = loc;
    this.level = opts.level ?? 'emerg';
    this.phase = opts.phase ?? 'parse';
  }
}

/** A non-fatal finding of the compile step (nginx's `[warn]` lines, jinx's lint notes). */
export interface ConfigWarning {
  readonly level: 'warn' | 'notice';
  /** Stable code for `jinx lint --format json`. */
  readonly code: string;
  /** The message without location, nginx's wording where nginx has one. */
  readonly text: string;
  readonly loc: SourceLoc | undefined;
}

/**
 * Appends nginx's location suffix (`ngx_conf_log_error`): ` in FILE:LINE`, or
 * ` in command line` for `-g` directives (line 0).
 */
export function withLoc(text: string, loc: SourceLoc | undefined): string {
  if (!loc) return text;
  return loc.line === 0 ? `${text} in ${loc.file}` : `${text} in ${loc.file}:${loc.line}`;
}

/** Renders a warning as nginx does: `TEXT in FILE:LINE`. */
export function formatWarning(w: ConfigWarning): string {
  return withLoc(w.text, w.loc);
}
