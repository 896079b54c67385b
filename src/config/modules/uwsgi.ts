/**
 * The uwsgi module (`src/http/modules/ngx_http_uwsgi_module.c`): the family
 * it shares with FastCGI and SCGI (cgi-upstream.ts), `uwsgi_pass` with an
 * optional `uwsgi://` scheme, and its own `uwsgi_modifier1`,
 * `uwsgi_modifier2` (the packet header's bytes) and `uwsgi_string` (bytes
 * sent after the parameters). `suwsgi://` speaks uwsgi over TLS, with the
 * `uwsgi_ssl_*` directives (the proxy's `proxy_ssl_*` under this prefix).
 */
import type { SourceLoc } from '../../parser/ast.js';
import { HTTP_SRV_LOC } from '../flags.js';
import { numBounds, numSetter, slot, strSetter, type ConfChain, type DirectiveSpec, type SetContext } from '../spec.js';
import type { LevelNode } from '../check.js';
import { inheritedIntoIf, levelsInOrder, type CompileContext } from '../compile-context.js';
import { cgiConf, cgiDirectives, cgiSlots, parseCgiPass, type CgiConf, type CgiPassDef } from './cgi-upstream.js';
import { readProxyTls, upstreamSslDirectives, upstreamTlsConf, UWSGI_SSL, type UpstreamTlsConf } from './proxy-ssl.js';

const UWSGI = 'ngx_http_uwsgi_module';

/** The family's slots under `uwsgi_`. */
export const UWSGI_SLOTS = cgiSlots('uwsgi');
export const uwsgiModifier1 = slot('uwsgi_modifier1', 0);
export const uwsgiModifier2 = slot('uwsgi_modifier2', 0);
export const uwsgiString = slot('uwsgi_string', '');
/** The level's `uwsgi_pass` is `suwsgi://…` (nginx's `uwcf->ssl`); not inherited, as `uwsgi_pass` is not. */
const uwsgiPassTls = slot('uwsgi_pass suwsgi://', false, false);

/** `ngx_http_uwsgi_pass`: `[uwsgi://|suwsgi://]ADDRESS`, or an address with variables (which may name either scheme). */
function parsePass(arg: string, cx: SetContext, loc: SourceLoc): CgiPassDef {
  if (/^suwsgi:\/\//i.test(arg)) {
    cx.level.set(uwsgiPassTls, true, loc);
    return parseCgiPass(arg.slice('suwsgi://'.length), cx, loc);
  }
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
  ...upstreamSslDirectives(UWSGI_SSL, UWSGI),
];

/** Settings of the uwsgi module in a location. */
export interface UwsgiConf extends CgiConf {
  readonly modifier1: number;
  readonly modifier2: number;
  /** `uwsgi_string`: sent as it is after the parameters (latin1 bytes). */
  readonly string: string;
  /** `uwsgi_pass suwsgi://…`: the connection speaks TLS (an address from variables says so itself). */
  readonly secure: boolean;
  /** The `uwsgi_ssl_*` settings, for `suwsgi://` or an address with variables; undefined otherwise. */
  readonly tls: UpstreamTlsConf | undefined;
}

/** `ngx_http_uwsgi_hide_headers`: unlike FastCGI's and SCGI's, a `Status` header is passed on. */
const HIDDEN = ['X-Accel-Expires', 'X-Accel-Redirect', 'X-Accel-Limit-Rate', 'X-Accel-Buffering', 'X-Accel-Charset'];

/** The uwsgi settings of a level (`ngx_http_uwsgi_merge_loc_conf`), values bound; undefined without `uwsgi_pass`. */
export function uwsgiConf(cx: CompileContext, node: LevelNode, c: ConfChain): UwsgiConf | undefined {
  const base = cgiConf(cx, node, c, UWSGI_SLOTS, HIDDEN);
  if (!base) return undefined;
  return {
    ...base, modifier1: c.get(uwsgiModifier1), modifier2: c.get(uwsgiModifier2), string: c.get(uwsgiString),
    secure: inheritedIntoIf(node, (n) => n.conf.own(uwsgiPassTls)?.value) ?? false, tls: upstreamTlsConf(cx, node, c, UWSGI_SSL),
  };
}

/**
 * Reads the `uwsgi_ssl_*` files of every location (and `if` block) whose
 * `uwsgi_pass` is `suwsgi://…` or has variables, in configuration order
 * (`ngx_http_uwsgi_set_ssl` from the merge).
 * @throws ConfigError the first missing or unreadable file, or cipher list refused
 */
export function loadUwsgiTls(cx: CompileContext, servers: readonly LevelNode[]): void {
  for (const node of levelsInOrder(servers)) {
    const pass = inheritedIntoIf(node, (n) => n.conf.own(UWSGI_SLOTS.pass)?.value);
    if (pass && (pass.kind === 'variable' || inheritedIntoIf(node, (n) => n.conf.own(uwsgiPassTls)?.value))) readProxyTls(cx, node, UWSGI_SSL);
  }
}
