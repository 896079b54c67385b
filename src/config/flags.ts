/**
 * Context and argument-count flags of directives, named after nginx's
 * `NGX_*_CONF` and `NGX_CONF_TAKE*` bits (`src/core/ngx_conf_file.h`).
 */

/**
 * Where a directive may appear. `sif` and `lif` are an `if` block inside a
 * `server` and inside a `location` (`NGX_HTTP_SIF_CONF`, `NGX_HTTP_LIF_CONF`).
 */
export type Context =
  | 'main'
  | 'events'
  | 'http'
  | 'server'
  | 'location'
  | 'upstream'
  | 'sif'
  | 'lif'
  | 'limit_except'
  | 'stream'
  | 'stream_server'
  | 'stream_upstream';

/** Argument-count bits; a directive accepts a count when any of its bits does. */
export type ArgFlag =
  | 'NOARGS'
  | 'TAKE1'
  | 'TAKE2'
  | 'TAKE3'
  | 'TAKE4'
  | 'TAKE5'
  | 'TAKE6'
  | 'TAKE7'
  | 'FLAG'
  | '1MORE'
  | '2MORE'
  | 'ANY';

const TAKE_COUNT: Partial<Record<ArgFlag, number>> = {
  NOARGS: 0, TAKE1: 1, TAKE2: 2, TAKE3: 3, TAKE4: 4, TAKE5: 5, TAKE6: 6, TAKE7: 7,
};

/** nginx's `NGX_CONF_MAX_ARGS`: a directive has at most 8 words, itself included. */
const MAX_ARGS = 7;

/**
 * Whether `count` arguments (the name not counted) satisfy `flags`, with the
 * precedence of `ngx_conf_handler`: ANY, then FLAG, 1MORE, 2MORE, then the
 * TAKE bits.
 */
export function acceptsArgCount(flags: readonly ArgFlag[], count: number): boolean {
  if (flags.includes('ANY')) return true;
  if (flags.includes('FLAG')) return count === 1;
  if (flags.includes('1MORE')) return count >= 1;
  if (flags.includes('2MORE')) return count >= 2;
  if (count > MAX_ARGS) return false;
  return flags.some((f) => TAKE_COUNT[f] === count);
}

/** Shorthands for common context sets. */
export const HTTP_SRV_LOC: readonly Context[] = ['http', 'server', 'location'];
export const HTTP_SRV: readonly Context[] = ['http', 'server'];
export const SRV_LOC: readonly Context[] = ['server', 'location'];
export const HTTP_SRV_LOC_LIF: readonly Context[] = ['http', 'server', 'location', 'lif'];
export const LOC_LIF: readonly Context[] = ['location', 'lif'];
export const ANY_CONTEXT: readonly Context[] = [
  'main', 'events', 'http', 'server', 'location', 'upstream', 'sif', 'lif', 'limit_except',
  'stream', 'stream_server', 'stream_upstream',
];
/** The 1..3 argument bits (`NGX_CONF_TAKE123`), and friends. */
export const TAKE12: readonly ArgFlag[] = ['TAKE1', 'TAKE2'];
export const TAKE13: readonly ArgFlag[] = ['TAKE1', 'TAKE3'];
export const TAKE23: readonly ArgFlag[] = ['TAKE2', 'TAKE3'];
export const TAKE123: readonly ArgFlag[] = ['TAKE1', 'TAKE2', 'TAKE3'];
export const TAKE1234: readonly ArgFlag[] = ['TAKE1', 'TAKE2', 'TAKE3', 'TAKE4'];
