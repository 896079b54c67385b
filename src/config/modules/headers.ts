/**
 * The headers module (`src/http/modules/ngx_http_headers_filter_module.c`):
 * `add_header NAME VALUE [always]`, `expires`, `add_trailer`.
 */
import { HTTP_SRV_LOC_LIF } from '../flags.js';
import type { Directive } from '../../parser/ast.js';
import { DirectiveFailure, fail, listSlot, noEffect, parseTime, rule, slot, type DirectiveSpec, type SetContext } from '../spec.js';
import type { ValueSource } from '../variables.js';

const HEADERS = 'ngx_http_headers_module';

export const addHeaders = listSlot<{ readonly name: string; readonly value: ValueSource; readonly always: boolean }>('add_header');

/** `expires`: how Expires and Cache-Control are set (`ngx_http_parse_expires`). */
export type ExpiresDef =
  | { readonly kind: 'off' }
  | { readonly kind: 'epoch' }
  | { readonly kind: 'max' }
  | { readonly kind: 'timed'; readonly mode: 'access' | 'modified' | 'daily'; readonly seconds: number };

export const expires = slot<ExpiresDef>('expires', { kind: 'off' });

function parseExpires(args: readonly string[]): ExpiresDef {
  let modified = false;
  let value = args[0]!;
  if (args.length === 2) {
    if (args[0] !== 'modified') throw new DirectiveFailure('invalid value');
    modified = true;
    value = args[1]!;
  }
  if (!modified && (value === 'epoch' || value === 'max' || value === 'off')) return { kind: value };
  let mode: 'access' | 'modified' | 'daily' = modified ? 'modified' : 'access';
  let sign = 1;
  if (value.startsWith('@')) {
    if (modified) throw new DirectiveFailure('daily time cannot be used with "modified" parameter');
    mode = 'daily';
    value = value.slice(1);
  } else if (value.startsWith('+')) value = value.slice(1);
  else if (value.startsWith('-')) [sign, value] = [-1, value.slice(1)];
  const seconds = parseTime(value, true);
  if (seconds === undefined) throw new DirectiveFailure('invalid value');
  if (mode === 'daily' && seconds > 24 * 60 * 60) throw new DirectiveFailure('daily time value must be less than 24 hours');
  return { kind: 'timed', mode, seconds: sign * seconds };
}

/**
 * `ngx_http_headers_add`, the setter of `add_header` and `add_trailer`: the
 * value may have variables; a third word must be `always`.
 */
function parseHeader(d: Directive, cx: SetContext): { readonly name: string; readonly value: ValueSource; readonly always: boolean } {
  const value = cx.scope.variables.value(d.args[1]!, d.loc);
  if (d.args[2] !== undefined && d.args[2] !== 'always') fail(`invalid parameter "${d.args[2]}"`);
  return { name: d.args[0]!, value, always: d.args[2] === 'always' };
}

export const headersDirectives: readonly DirectiveSpec[] = [
  {
    name: 'add_header', module: HEADERS, contexts: HTTP_SRV_LOC_LIF, args: ['TAKE2', 'TAKE3'], effect: 'runtime',
    set: (d, cx) => cx.level.append(addHeaders, parseHeader(d, cx), d.loc),
  },
  {
    name: 'expires', module: HEADERS, contexts: HTTP_SRV_LOC_LIF, args: ['TAKE1', 'TAKE2'], effect: 'runtime',
    set: (d, cx) => {
      if (cx.level.own(expires)) throw new DirectiveFailure('is duplicate');
      cx.level.set(expires, parseExpires(d.args), d.loc);
    },
  },
  noEffect(
    { name: 'add_trailer', module: HEADERS, contexts: HTTP_SRV_LOC_LIF, args: ['TAKE2', 'TAKE3'], note: 'responses are sent without trailers' },
    rule.repeatable((d, cx) => void parseHeader(d, cx)),
  ),
];
