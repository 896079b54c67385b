/**
 * The prefix and configuration file the command works on, from `-p` and `-c`
 * (nginx's `ngx_process_options` in `src/core/nginx.c`).
 */
import { DEFAULT_CONF, DEFAULT_PREFIX } from './build-info.js';

/** Paths derived from `-p` and `-c` as nginx's `ngx_process_options` does. */
export interface ConfPaths {
  /** The prefix as given (relative stays relative), ending with `/`. */
  readonly prefix: string;
  /** The configuration file: `-c` as given if absolute, else the prefix joined to it as text. */
  readonly confFile: string;
}

/** Joins `-p` and `-c` as text, as nginx does (no normalization: messages show the paths as the user gave them). */
export function confPaths(prefixFlag: string | undefined, confFlag: string | undefined): ConfPaths {
  let prefix = prefixFlag ?? DEFAULT_PREFIX;
  if (!prefix.endsWith('/')) prefix += '/';
  const conf = confFlag ?? DEFAULT_CONF;
  return { prefix, confFile: conf.startsWith('/') ? conf : prefix + conf };
}
