/**
 * The uwsgi module (`src/http/modules/ngx_http_uwsgi_module.c`): the family
 * it shares with FastCGI and SCGI (cgi-upstream.ts), `uwsgi_pass` with an
 * optional `uwsgi://` scheme, and its own `uwsgi_modifier1`,
 * `uwsgi_modifier2` (the packet header's bytes) and `uwsgi_string` (bytes
 * sent after the parameters). uwsgi over TLS (`suwsgi://`) is refused.
 */
import type { SourceLoc } from '../../parser/ast.js';
import { HTTP_SRV_LOC } from '../flags.js';
import { fail, numBounds, numSetter, slot, strSetter, type ConfChain, type DirectiveSpec, type SetContext } from '../spec.js';
import type { LevelNode } from '../check.js';
import type { CompileContext } from '../compile-context.js';
import { cgiConf, cgiDirectives, cgiSlots, parseCgiPass, type CgiConf, type CgiPassDef } from './cgi-upstream.js';

const UWSGI = 'ngx_http_uwsgi_module';

/** The family's slots under `uwsgi_`. */
export const UWSGI_SLOTS = cgiSlots('uwsgi');
export const uwsgiModifier1 = slot('uwsgi_modifier1', 0);
export const uwsgiModifier2 = slot('uwsgi_modifier2', 0);
export const uwsgiString = slot('uwsgi_string', '');

/** `ngx_http_uwsgi_pass`: `[uwsgi://]ADDRESS`; `suwsgi://` would need uwsgi over TLS, which jinx does not speak. */
function parsePass(arg: string, cx: SetContext, loc: SourceLoc): CgiPassDef {
  if (/^suwsgi:\/\//i.test(arg)) fail('uwsgi over TLS ("suwsgi://") is not supported by jinx');
  return parseCgiPass(arg, cx, loc, ['uwsgi://']);
}

/** `ngx_http_uwsgi_modifier_bounds`. */
const modifierBounds = numBounds(0, 255);

const runtime = (name: string, set: DirectiveSpec['set']): DirectiveSpec => ({
  name, module: UWSGI, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set,
});

export const uwsgiDirectives: readonly DirectiveSpec[] = [
  ...cgiDirectives({ slots: UWSGI_SLOTS, module: UWSGI, protocol: 'uwsgi', parsePass }),
  runtime('uwsgi_modifier1', (d, cx) => {
    numSetter(uwsgiModifier1)(d, cx);
    modifierBounds(cx.level.own(uwsgiModifier1)!.value, d, cx);
  }),
  runtime('uwsgi_modifier2', (d, cx) => {
    numSetter(uwsgiModifier2)(d, cx);
    modifierBounds(cx.level.own(uwsgiModifier2)!.value, d, cx);
  }),
  runtime('uwsgi_string', strSetter(uwsgiString)),
];

/** Settings of the uwsgi module in a location. */
export interface UwsgiConf extends CgiConf {
  readonly modifier1: number;
  readonly modifier2: number;
  /** `uwsgi_string`: sent as it is after the parameters (latin1 bytes). */
  readonly string: string;
}

/** `ngx_http_uwsgi_hide_headers`: unlike FastCGI's and SCGI's, a `Status` header is passed on. */
const HIDDEN = ['X-Accel-Expires', 'X-Accel-Redirect', 'X-Accel-Limit-Rate', 'X-Accel-Buffering', 'X-Accel-Charset'];

/** The uwsgi settings of a level (`ngx_http_uwsgi_merge_loc_conf`), values bound; undefined without `uwsgi_pass`. */
export function uwsgiConf(cx: CompileContext, node: LevelNode, c: ConfChain): UwsgiConf | undefined {
  const base = cgiConf(cx, node, c, UWSGI_SLOTS, HIDDEN);
  if (!base) return undefined;
  return { ...base, modifier1: c.get(uwsgiModifier1), modifier2: c.get(uwsgiModifier2), string: c.get(uwsgiString) };
}
