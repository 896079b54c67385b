/**
 * The stream module (`--with-stream=dynamic` in Debian's build): known only
 * after `load_module …/ngx_stream_module.so;`, as in nginx. jinx reads these
 * directives and does not proxy TCP/UDP streams.
 */
import type { Context } from '../flags.js';
import { acceptOnly, LevelConf, type DirectiveSpec } from '../spec.js';

const NOTE = 'jinx does not proxy TCP/UDP streams';
const STREAM_ANY: readonly Context[] = ['stream', 'stream_server'];

const item = (name: string, contexts: readonly Context[], args: DirectiveSpec['args'], module = 'ngx_stream_core_module'): DirectiveSpec => ({
  name, module, contexts, args, effect: 'none', note: NOTE, dynamicModule: 'ngx_stream_module', set: acceptOnly,
});

export const streamDirectives: readonly DirectiveSpec[] = [
  {
    name: 'stream', module: 'ngx_stream_module', contexts: ['main'], args: ['NOARGS'], block: 'context', effect: 'none', note: NOTE,
    dynamicModule: 'ngx_stream_module', set: () => ({ context: 'stream', level: new LevelConf() }),
  },
  {
    name: 'server', module: 'ngx_stream_core_module', contexts: ['stream'], args: ['NOARGS'], block: 'context', effect: 'none',
    note: NOTE, dynamicModule: 'ngx_stream_module', set: () => ({ context: 'stream_server', level: new LevelConf() }),
  },
  {
    name: 'upstream', module: 'ngx_stream_upstream_module', contexts: ['stream'], args: ['TAKE1'], block: 'context', effect: 'none',
    note: NOTE, dynamicModule: 'ngx_stream_module', set: () => ({ context: 'stream_upstream', level: new LevelConf() }),
  },
  item('server', ['stream_upstream'], ['1MORE'], 'ngx_stream_upstream_module'),
  item('listen', ['stream_server'], ['1MORE']),
  item('proxy_pass', ['stream_server'], ['TAKE1'], 'ngx_stream_proxy_module'),
  item('proxy_connect_timeout', STREAM_ANY, ['TAKE1'], 'ngx_stream_proxy_module'),
  item('proxy_timeout', STREAM_ANY, ['TAKE1'], 'ngx_stream_proxy_module'),
  item('log_format', ['stream'], ['2MORE'], 'ngx_stream_log_module'),
  item('access_log', STREAM_ANY, ['1MORE'], 'ngx_stream_log_module'),
  item('error_log', STREAM_ANY, ['1MORE']),
  item('resolver', STREAM_ANY, ['1MORE']),
  item('ssl_certificate', STREAM_ANY, ['TAKE1'], 'ngx_stream_ssl_module'),
  item('ssl_certificate_key', STREAM_ANY, ['TAKE1'], 'ngx_stream_ssl_module'),
  item('ssl_protocols', STREAM_ANY, ['1MORE'], 'ngx_stream_ssl_module'),
  item('ssl_ciphers', STREAM_ANY, ['TAKE1'], 'ngx_stream_ssl_module'),
  item('ssl_session_cache', STREAM_ANY, ['TAKE1', 'TAKE2'], 'ngx_stream_ssl_module'),
  item('ssl_session_timeout', STREAM_ANY, ['TAKE1'], 'ngx_stream_ssl_module'),
];
