/**
 * The SCGI module (`src/http/modules/ngx_http_scgi_module.c`): the family
 * it shares with FastCGI and uwsgi (cgi-upstream.ts), nothing of its own.
 */
import type { ConfChain, DirectiveSpec } from '../spec.js';
import type { LevelNode } from '../check.js';
import type { CompileContext } from '../compile-context.js';
import { cgiConf, cgiDirectives, cgiSlots, parseCgiPass, type CgiConf } from './cgi-upstream.js';

/** The family's slots under `scgi_`. */
export const SCGI_SLOTS = cgiSlots('scgi');

export const scgiDirectives: readonly DirectiveSpec[] = cgiDirectives({
  slots: SCGI_SLOTS, module: 'ngx_http_scgi_module', protocol: 'SCGI', parsePass: (arg, cx, loc) => parseCgiPass(arg, cx, loc),
});

/** `ngx_http_scgi_hide_headers`. */
const HIDDEN = ['Status', 'X-Accel-Expires', 'X-Accel-Redirect', 'X-Accel-Limit-Rate', 'X-Accel-Buffering', 'X-Accel-Charset'];

/** The SCGI settings of a level (`ngx_http_scgi_merge_loc_conf`), values bound; undefined without `scgi_pass`. */
export function scgiConf(cx: CompileContext, node: LevelNode, c: ConfChain): CgiConf | undefined {
  return cgiConf(cx, node, c, SCGI_SLOTS, HIDDEN);
}
