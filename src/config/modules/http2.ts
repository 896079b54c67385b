/**
 * HTTP/2 settings (`src/http/v2/ngx_http_v2_module.c`): `http2 on|off` per
 * server (nginx 1.25.1 and later): HTTP/2 by ALPN on TLS addresses, h2c
 * with prior knowledge on plain ones; `http2_max_concurrent_streams` per
 * server; `http2_body_preread_size` as the streams' initial window;
 * `http2_chunk_size` per location, the most a DATA frame carries; the
 * other buffer sizes are checked (jinx sizes its buffers itself).
 */
import { HTTP_SRV, HTTP_SRV_LOC } from '../flags.js';
import { DirectiveFailure, fail, flagSetter, noEffect, numSetter, rule, sizeSetter, slot, type DirectiveSpec, type Rule } from '../spec.js';
import { poolSize } from './http-core.js';
import type { ConfChain } from '../spec.js';

const V2 = 'ngx_http_v2_module';

export const http2Enabled = slot('http2', false);
/**
 * `http2_max_concurrent_streams` (`ngx_conf_set_num_slot`, default 128): sent
 * in SETTINGS and enforced per connection, from the server the connection
 * belongs to (`ngx_http_v2_init`, `ngx_http_v2_state_headers`).
 */
export const http2MaxConcurrentStreams = slot('http2_max_concurrent_streams', 128);
/**
 * `http2_body_preread_size` (`ngx_conf_set_size_slot`, default 65536): the
 * SETTINGS_INITIAL_WINDOW_SIZE of the connection's server (`ngx_http_v2_send_settings`).
 */
export const http2BodyPrereadSize = slot('http2_body_preread_size', 65_536);
/**
 * `http2_chunk_size` (`ngx_conf_set_size_slot`, default 8k): the largest DATA
 * frame of a response (`ngx_http_v2_send_chain`), per location.
 */
export const http2ChunkSize = slot('http2_chunk_size', 8192);

/** `ngx_http_v2_obsolete`: a warning, whatever the value, as often as given. */
const obsolete = (name: string, args: DirectiveSpec['args'], instead: string | undefined, contexts = HTTP_SRV): DirectiveSpec =>
  noEffect({ name, module: V2, contexts, args, note: 'obsolete in nginx' }, rule.repeatable((_d, cx) => cx.warn(
    `the "${name}" directive is obsolete, ${instead ? `use the "${instead}" directive instead` : 'ignored'}`, 'obsolete-directive',
  )));

const tuning = (name: string, contexts: DirectiveSpec['contexts'], r: Rule): DirectiveSpec =>
  noEffect({ name, module: V2, contexts, args: ['TAKE1'], note: 'jinx sizes its HTTP/2 buffers itself' }, r);

/** The post handlers of `src/http/v2/ngx_http_v2_module.c`, with its limits. */
const recvBufferSize = (v: number): void => {
  if (v <= 2 * 16) throw new DirectiveFailure('value is too small');
};
const prereadSize = (v: number): void => {
  if (v > 2 ** 31 - 1) fail(`the maximum body preread buffer size is ${2 ** 31 - 1}`);
};
const chunkSize = (v: number): void => {
  if (v === 0) fail('the http2 chunk size cannot be zero');
};
const streamsIndexMask = (v: number): void => {
  if (v === 0 || (v & (v - 1)) !== 0) throw new DirectiveFailure('must be a power of two');
};

export const http2Directives: readonly DirectiveSpec[] = [
  { name: 'http2', module: V2, contexts: HTTP_SRV, args: ['FLAG'], effect: 'runtime', set: flagSetter(http2Enabled) },
  {
    name: 'http2_max_concurrent_streams', module: V2, contexts: HTTP_SRV, args: ['TAKE1'], effect: 'runtime',
    set: numSetter(http2MaxConcurrentStreams),
  },
  tuning('http2_recv_buffer_size', ['http'], rule.size(recvBufferSize)),
  {
    name: 'http2_chunk_size', module: V2, contexts: ['http', 'server', 'location'], args: ['TAKE1'], effect: 'runtime',
    set: (d, cx) => {
      sizeSetter(http2ChunkSize)(d, cx);
      chunkSize(cx.level.own(http2ChunkSize)!.value);
    },
  },
  {
    name: 'http2_body_preread_size', module: V2, contexts: HTTP_SRV, args: ['TAKE1'], effect: 'runtime',
    set: (d, cx) => {
      sizeSetter(http2BodyPrereadSize)(d, cx);
      prereadSize(cx.level.own(http2BodyPrereadSize)!.value);
    },
  },
  tuning('http2_pool_size', HTTP_SRV, rule.size(poolSize)),
  tuning('http2_streams_index_size', HTTP_SRV, rule.num(streamsIndexMask)),
  obsolete('http2_recv_timeout', ['TAKE1'], 'client_header_timeout'),
  obsolete('http2_idle_timeout', ['TAKE1'], 'keepalive_timeout'),
  obsolete('http2_max_requests', ['TAKE1'], 'keepalive_requests'),
  obsolete('http2_max_field_size', ['TAKE1'], 'large_client_header_buffers'),
  obsolete('http2_max_header_size', ['TAKE1'], 'large_client_header_buffers'),
  obsolete('http2_push', ['TAKE1'], undefined, HTTP_SRV_LOC),
  obsolete('http2_push_preload', ['FLAG'], undefined, HTTP_SRV_LOC),
  obsolete('http2_max_concurrent_pushes', ['TAKE1'], undefined),
];

/** The HTTP/2 settings a location carries (a server's, nginx's `ngx_http_v2_srv_conf_t`, and `http2_chunk_size`). */
export interface Http2LocConf {
  /**
   * `http2` (a server's; its locations carry it): whether HTTP/2 reaches the
   * server (by ALPN with its SNI name, by the connection preface as the
   * default server of a plain address, by `:authority` on a connection
   * another server accepted), unless the address's `listen … http2` says so for all.
   */
  readonly http2: boolean;
  /** `http2_max_concurrent_streams` (a server's; its locations carry it). */
  readonly http2MaxConcurrentStreams: number;
  /** `http2_body_preread_size` (a server's; its locations carry it): the streams' initial window. */
  readonly http2BodyPrereadSizeBytes: number;
  /** `http2_chunk_size`: the largest DATA frame of a response. */
  readonly http2ChunkSizeBytes: number;
}

/** The HTTP/2 settings of a level (`ngx_http_v2_merge_srv_conf`, `ngx_http_v2_merge_loc_conf`). */
export function http2LocConf(c: ConfChain): Http2LocConf {
  return {
    http2: c.get(http2Enabled),
    http2MaxConcurrentStreams: c.get(http2MaxConcurrentStreams),
    http2BodyPrereadSizeBytes: c.get(http2BodyPrereadSize),
    http2ChunkSizeBytes: c.get(http2ChunkSize),
  };
}
