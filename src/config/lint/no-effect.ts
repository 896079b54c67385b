/**
 * Which of the directives jinx reads and does not act on (`effect: 'none'`)
 * are worth a lint note: only those whose value asks for behaviour jinx
 * does not have. A tuning knob (buffer and hash sizes, `sendfile`,
 * `tcp_nopush`, file descriptor caches …) changes how nginx does the work,
 * not what a client or the logs see, so it is never a note; a switch set to
 * what jinx does anyway (`proxy_store off;`, `ssl_stapling off;`) is not a
 * difference either. Every name with `effect: 'none'` in the directive
 * table is listed here (a test keeps it so).
 */
import type { Directive } from '../../parser/ast.js';

/**
 * `tuning`: never a note. An array: the values (first argument, lowercase)
 * that ask for what jinx does, so no note; any other value is one.
 * `always`: always a note. A function: whether these arguments ask for what
 * jinx does not do.
 */
export type NoEffectKind = 'tuning' | 'always' | readonly string[] | ((args: readonly string[]) => boolean);

/**
 * `env`: nginx's workers keep only `TZ` and the variables `env` names (or
 * sets). Nothing jinx runs reads the environment (no embedded language)
 * but the time zone of its log and header times, and jinx keeps the one it
 * started with: only `env TZ=ZONE` asks for what jinx does not do
 * (`ngx_set_environment`, src/core/nginx.c).
 */
const envDiffers = (args: readonly string[]): boolean => /^TZ=/.test(args[0] ?? '');

const OFF = ['off'] as const;
const ZERO = ['0', '0s', '0ms'] as const;

/** The classification of every `effect: 'none'` directive, by name. */
export const NO_EFFECT_KINDS: ReadonlyMap<string, NoEffectKind> = new Map<string, NoEffectKind>([
  // nginx's loadable modules and process tuning: jinx's runtime does this itself
  ['load_module', 'tuning'], ['pcre_jit', 'tuning'], ['timer_resolution', 'tuning'], ['lock_file', 'tuning'],
  ['thread_pool', 'tuning'], ['multi_accept', 'tuning'], ['accept_mutex', 'tuning'], ['accept_mutex_delay', 'tuning'],
  ['use', 'tuning'], ['worker_aio_requests', 'tuning'], ['env', envDiffers], ['ssl_object_cache_inheritable', 'tuning'],
  // how files and buffers are moved: the bytes sent are the same
  ['client_body_in_single_buffer', 'tuning'], ['sendfile', 'tuning'], ['sendfile_max_chunk', 'tuning'],
  ['tcp_nopush', 'tuning'], ['tcp_nodelay', 'tuning'], ['aio_write', 'tuning'],
  ['directio', 'tuning'], ['directio_alignment', 'tuning'], ['open_file_cache', 'tuning'],
  ['open_file_cache_valid', 'tuning'], ['open_file_cache_min_uses', 'tuning'], ['open_file_cache_errors', 'tuning'],
  ['open_file_cache_events', 'tuning'], ['open_log_file_cache', 'tuning'], ['connection_pool_size', 'tuning'],
  ['request_pool_size', 'tuning'], ['postpone_output', 'tuning'], ['read_ahead', 'tuning'], ['send_lowat', 'tuning'],
  ['output_buffers', 'tuning'], ['proxy_send_lowat', 'tuning'], ['fastcgi_send_lowat', 'tuning'],
  ['ssl_buffer_size', 'tuning'], ['postpone_gzipping', 'tuning'], ['gzip_no_buffer', 'tuning'],
  ['ssi_ignore_recycled_buffers', 'tuning'], ['ssi_min_file_chunk', 'tuning'],
  ['http2_recv_buffer_size', 'tuning'], ['http2_pool_size', 'tuning'], ['http2_streams_index_size', 'tuning'],
  // hash table sizes: jinx keeps Maps
  ['server_names_hash_bucket_size', 'tuning'], ['server_names_hash_max_size', 'tuning'],
  ['types_hash_bucket_size', 'tuning'], ['types_hash_max_size', 'tuning'],
  ['variables_hash_bucket_size', 'tuning'], ['variables_hash_max_size', 'tuning'],
  ['map_hash_max_size', 'tuning'], ['map_hash_bucket_size', 'tuning'],
  ['proxy_headers_hash_max_size', 'tuning'], ['proxy_headers_hash_bucket_size', 'tuning'],
  // obsolete in nginx: nginx's own warning says so
  ['http2_recv_timeout', 'tuning'], ['http2_idle_timeout', 'tuning'], ['http2_max_requests', 'tuning'],
  ['http2_max_field_size', 'tuning'], ['http2_max_header_size', 'tuning'], ['http2_push', 'tuning'],
  ['http2_push_preload', 'tuning'], ['http2_max_concurrent_pushes', 'tuning'],
  // only read with what they modify, which is the note
  ['proxy_store_access', 'tuning'], ['fastcgi_store_access', 'tuning'], ['uwsgi_store_access', 'tuning'], ['scgi_store_access', 'tuning'],
  ['ssl_stapling_file', 'tuning'], ['ssl_stapling_responder', 'tuning'], ['ssl_stapling_verify', 'tuning'],
  // switches: a note unless set to what jinx does
  ['disable_symlinks', OFF], ['auth_delay', ZERO], ['msie_refresh', OFF],
  ...['proxy', 'fastcgi', 'uwsgi', 'scgi'].flatMap((m): [string, NoEffectKind][] => [
    [`${m}_store`, OFF], [`${m}_bind`, OFF], [`${m}_limit_rate`, ZERO], [`${m}_force_ranges`, OFF], [`${m}_socket_keepalive`, OFF],
  ]),
  ['memcached_bind', OFF], ['memcached_socket_keepalive', OFF], ['grpc_bind', OFF], ['grpc_socket_keepalive', OFF],
  ['ssl_stapling', OFF], ['ssl_certificate_compression', OFF], ['ssl_early_data', OFF], ['proxy_ssl_certificate_cache', OFF],
  ['grpc_ssl_certificate_cache', OFF], ['uwsgi_ssl_certificate_cache', OFF],
  // what jinx does differently whatever the value
  ['ssl_conf_command', 'always'], ['proxy_ssl_conf_command', 'always'], ['grpc_ssl_conf_command', 'always'], ['uwsgi_ssl_conf_command', 'always'],
]);

/** Whether a directive jinx does not act on deserves a note: its value asks for what jinx does not do. */
export function noEffectDiffers(d: Directive): boolean {
  const kind = NO_EFFECT_KINDS.get(d.name) ?? 'always';
  if (kind === 'tuning') return false;
  if (kind === 'always') return true;
  if (typeof kind === 'function') return kind(d.args);
  return !kind.includes((d.args[0] ?? '').toLowerCase());
}
