/**
 * The FastCGI module (`src/http/modules/ngx_http_fastcgi_module.c`): the
 * family it shares with uwsgi and SCGI (cgi-upstream.ts: `fastcgi_pass
 * ADDRESS|unix:PATH|UPSTREAM`, `fastcgi_param NAME VALUE [if_not_empty]`,
 * timeouts, buffers, the header filters, the cache), and its own
 * `fastcgi_index`, `fastcgi_split_path_info`, `fastcgi_keep_conn` and
 * `fastcgi_catch_stderr`.
 */
import type { Directive } from '../../parser/ast.js';
import { HTTP_SRV_LOC } from '../flags.js';
import { compileRegex, type NginxRegex } from '../regex.js';
import { DirectiveFailure, fail, flagSetter, listSlot, noEffect, rule, slot, strSetter, type ConfChain, type DirectiveSpec } from '../spec.js';
import type { LevelNode } from '../check.js';
import type { CompileContext } from '../compile-context.js';
import { lowatIgnored } from './http-core.js';
import { cgiConf, cgiDirectives, cgiSlots, parseCgiPass, type CgiConf } from './cgi-upstream.js';

const FASTCGI = 'ngx_http_fastcgi_module';

/** The family's slots under `fastcgi_`. */
export const FASTCGI_SLOTS = cgiSlots('fastcgi');
export const fastcgiIndex = slot<string | undefined>('fastcgi_index', undefined);
export const fastcgiSplitPathInfo = slot<NginxRegex | undefined>('fastcgi_split_path_info', undefined);
export const fastcgiKeepConn = slot('fastcgi_keep_conn', false);
/** `fastcgi_catch_stderr`: strings that make a response whose header is not read yet invalid when its stderr has them. */
export const fastcgiCatchStderr = listSlot<string>('fastcgi_catch_stderr');

const runtime = (name: string, args: DirectiveSpec['args'], set: DirectiveSpec['set'], contexts = HTTP_SRV_LOC): DirectiveSpec => ({
  name, module: FASTCGI, contexts, args, effect: 'runtime', set,
});

export const fastcgiDirectives: readonly DirectiveSpec[] = [
  ...cgiDirectives({ slots: FASTCGI_SLOTS, module: FASTCGI, protocol: 'FastCGI', parsePass: (arg, cx, loc) => parseCgiPass(arg, cx, loc) }),
  runtime('fastcgi_index', ['TAKE1'], strSetter(fastcgiIndex)),
  runtime('fastcgi_split_path_info', ['TAKE1'], (d, cx) => {
    if (cx.level.own(fastcgiSplitPathInfo)) throw new DirectiveFailure('is duplicate');
    const regex = compileRegex(d.args[0]!, false);
    if (regex.captureCount !== 2) fail(`pattern "${d.args[0]}" must have 2 captures`);
    cx.level.set(fastcgiSplitPathInfo, regex, d.loc);
  }, ['location']),
  runtime('fastcgi_keep_conn', ['FLAG'], flagSetter(fastcgiKeepConn)),
  runtime('fastcgi_catch_stderr', ['TAKE1'], (d: Directive, cx) => cx.level.append(fastcgiCatchStderr, d.args[0]!, d.loc)),
  noEffect({
    name: 'fastcgi_send_lowat', module: FASTCGI, contexts: HTTP_SRV_LOC, args: ['TAKE1'], note: 'a kernel tuning knob with no counterpart in jinx',
  }, rule.size(lowatIgnored)),
];

/** Settings of the FastCGI module in a location. */
export interface FastcgiConf extends CgiConf {
  readonly index: string | undefined;
  readonly splitPathInfo: RegExp | undefined;
  readonly keepConn: boolean;
  /** `fastcgi_catch_stderr`: a header-time STDERR record with one of these strings makes the response invalid. */
  readonly catchStderr: readonly string[];
}

/** `ngx_http_fastcgi_hide_headers`: FastCGI's `Status` header is the response's status, never a header of its own. */
const HIDDEN = ['Status', 'X-Accel-Expires', 'X-Accel-Redirect', 'X-Accel-Limit-Rate', 'X-Accel-Buffering', 'X-Accel-Charset'];

/** The FastCGI settings of a level (`ngx_http_fastcgi_merge_loc_conf`), values bound; undefined without `fastcgi_pass`. */
export function fastcgiConf(cx: CompileContext, node: LevelNode, c: ConfChain): FastcgiConf | undefined {
  const base = cgiConf(cx, node, c, FASTCGI_SLOTS, HIDDEN);
  if (!base) return undefined;
  return {
    ...base,
    index: c.get(fastcgiIndex),
    splitPathInfo: c.get(fastcgiSplitPathInfo)?.regex,
    keepConn: c.get(fastcgiKeepConn),
    catchStderr: c.list(fastcgiCatchStderr),
  };
}

/** `fastcgi_split_path_info` and `fastcgi_index` of a level, for `$fastcgi_script_name` and `$fastcgi_path_info`. */
export function fastcgiSplitConf(c: ConfChain): { readonly regex: RegExp | undefined; readonly index: string | undefined } {
  return { regex: c.get(fastcgiSplitPathInfo)?.regex, index: c.get(fastcgiIndex) };
}
