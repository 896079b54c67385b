/**
 * uwsgi and SCGI (`ngx_http_uwsgi_module.c`, `ngx_http_scgi_module.c`): jinx
 * reads the temp-path and parameter directives that stock configurations set
 * at http level; `uwsgi_pass` and `scgi_pass` are not supported.
 */
import type { Directive } from '../../parser/ast.js';
import { HTTP_SRV_LOC } from '../flags.js';
import { fail, noEffect, rule, type DirectiveSpec, type Rule, type SetContext } from '../spec.js';

const item = (name: string, module: string, args: DirectiveSpec['args'], r: Rule): DirectiveSpec =>
  noEffect({ name, module, contexts: HTTP_SRV_LOC, args, note: 'jinx does not speak uwsgi or SCGI to upstreams' }, r);

/**
 * `ngx_http_upstream_param_set_slot` (`src/http/ngx_http_upstream.c`):
 * `NAME VALUE [if_not_empty]`, appended; the value may have variables.
 */
export function setUpstreamParam(d: Directive, cx: SetContext): void {
  cx.scope.variables.value(d.args[1]!, d.loc);
  if (d.args[2] !== undefined && d.args[2] !== 'if_not_empty') fail(`invalid parameter "${d.args[2]}"`);
}

export const otherUpstreamDirectives: readonly DirectiveSpec[] = [
  item('uwsgi_temp_path', 'ngx_http_uwsgi_module', ['TAKE1', 'TAKE2', 'TAKE3', 'TAKE4'], rule.path),
  item('uwsgi_param', 'ngx_http_uwsgi_module', ['TAKE2', 'TAKE3'], rule.repeatable(setUpstreamParam)),
  item('scgi_temp_path', 'ngx_http_scgi_module', ['TAKE1', 'TAKE2', 'TAKE3', 'TAKE4'], rule.path),
  item('scgi_param', 'ngx_http_scgi_module', ['TAKE2', 'TAKE3'], rule.repeatable(setUpstreamParam)),
];
