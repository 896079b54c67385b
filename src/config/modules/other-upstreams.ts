/**
 * uwsgi and SCGI (`ngx_http_uwsgi_module.c`, `ngx_http_scgi_module.c`): jinx
 * reads the temp-path and parameter directives that stock configurations set
 * at http level; `uwsgi_pass` and `scgi_pass` are not supported.
 */
import { HTTP_SRV_LOC } from '../flags.js';
import { acceptOnly, type DirectiveSpec } from '../spec.js';

const item = (name: string, module: string, args: DirectiveSpec['args']): DirectiveSpec => ({
  name, module, contexts: HTTP_SRV_LOC, args, effect: 'none', note: 'jinx does not speak uwsgi or SCGI to upstreams', set: acceptOnly,
});

export const otherUpstreamDirectives: readonly DirectiveSpec[] = [
  item('uwsgi_temp_path', 'ngx_http_uwsgi_module', ['TAKE1', 'TAKE2', 'TAKE3', 'TAKE4']),
  item('uwsgi_param', 'ngx_http_uwsgi_module', ['TAKE2', 'TAKE3']),
  item('scgi_temp_path', 'ngx_http_scgi_module', ['TAKE1', 'TAKE2', 'TAKE3', 'TAKE4']),
  item('scgi_param', 'ngx_http_scgi_module', ['TAKE2', 'TAKE3']),
];
