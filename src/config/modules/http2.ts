/**
 * HTTP/2 settings (`src/http/v2/ngx_http_v2_module.c`): `http2 on|off` per
 * server (nginx 1.25.1 and later) and the stream limits.
 */
import { HTTP_SRV } from '../flags.js';
import { acceptOnly, flagSetter, slot, type DirectiveSpec } from '../spec.js';

const V2 = 'ngx_http_v2_module';

export const http2Enabled = slot('http2', false);

const obsolete = (name: string, args: DirectiveSpec['args'], message: string): DirectiveSpec => ({
  name, module: V2, contexts: ['http', 'server', 'location'], args, effect: 'none', note: 'obsolete in nginx',
  set: (_d, cx) => cx.warn(message, 'obsolete-directive'),
});

const tuning = (name: string, contexts: DirectiveSpec['contexts'], note: string): DirectiveSpec => ({
  name, module: V2, contexts, args: ['TAKE1'], effect: 'none', note, set: acceptOnly,
});

export const http2Directives: readonly DirectiveSpec[] = [
  {
    name: 'http2', module: V2, contexts: HTTP_SRV, args: ['FLAG'], effect: 'none',
    note: 'HTTP/2 from clients is not served yet: connections use HTTP/1.1', set: flagSetter(http2Enabled),
  },
  tuning('http2_max_concurrent_streams', HTTP_SRV, 'HTTP/2 is not served yet'),
  tuning('http2_recv_buffer_size', ['http'], 'HTTP/2 is not served yet'),
  tuning('http2_chunk_size', ['http', 'server', 'location'], 'HTTP/2 is not served yet'),
  tuning('http2_body_preread_size', HTTP_SRV, 'HTTP/2 is not served yet'),
  tuning('http2_recv_timeout', HTTP_SRV, 'HTTP/2 is not served yet'),
  obsolete('http2_idle_timeout', ['TAKE1'], 'the "http2_idle_timeout" directive is obsolete, use the "keepalive_timeout" directive instead'),
  obsolete('http2_max_requests', ['TAKE1'], 'the "http2_max_requests" directive is obsolete, use the "keepalive_requests" directive instead'),
  obsolete('http2_max_field_size', ['TAKE1'], 'the "http2_max_field_size" directive is obsolete, use the "large_client_header_buffers" directive instead'),
  obsolete('http2_max_header_size', ['TAKE1'], 'the "http2_max_header_size" directive is obsolete, use the "large_client_header_buffers" directive instead'),
  obsolete('http2_push', ['TAKE1'], 'the "http2_push" directive is obsolete, ignored'),
  obsolete('http2_push_preload', ['FLAG'], 'the "http2_push_preload" directive is obsolete, ignored'),
  obsolete('http2_max_concurrent_pushes', ['TAKE1'], 'the "http2_max_concurrent_pushes" directive is obsolete, ignored'),
];
