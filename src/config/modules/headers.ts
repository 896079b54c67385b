/**
 * The headers module (`src/http/modules/ngx_http_headers_filter_module.c`):
 * `add_header NAME VALUE [always]`, `expires`, `add_trailer`, and how their
 * lists are inherited (`add_header_inherit`, `add_trailer_inherit`).
 */
import { HTTP_SRV_LOC_LIF } from '../flags.js';
import type { Directive } from '../../parser/ast.js';
import { scopeRegistry, type ConfigScope } from '../scope.js';
import { DirectiveFailure, enumSetter, fail, listSlot, parseTime, slot, type DirectiveSpec, type ListSlot, type SetContext, type Slot } from '../spec.js';
import type { CompiledValue, ValueSource } from '../variables.js';
import type { ConfChain } from '../spec.js';

const HEADERS = 'ngx_http_headers_module';

export const addHeaders = listSlot<{ readonly name: string; readonly value: ValueSource; readonly always: boolean }>('add_header');
export const addTrailers = listSlot<{ readonly name: string; readonly value: ValueSource; readonly always: boolean }>('add_trailer');

/**
 * How a level's `add_header` (`add_trailer`) list takes the one of the level
 * above (nginx 1.29.3): `on`, nginx's array merge (the level's own, else the
 * one above); `off`, never (the level's own alone, none without); `merge`,
 * the level's own followed by the one above. The rule itself is inherited
 * as any setting.
 */
export type InheritRule = 'on' | 'off' | 'merge';
export const addHeaderInherit = slot<InheritRule>('add_header_inherit', 'on');
export const addTrailerInherit = slot<InheritRule>('add_trailer_inherit', 'on');
/** Whether the configuration has an `add_header_inherit` or `add_trailer_inherit` (without, the lists merge as arrays do). */
const inheritRulesUsed = scopeRegistry(() => ({ used: false }));

/**
 * A level's list under its inheritance rule (`ngx_http_headers_merge_conf`):
 * see `InheritRule`; the level above's list is the one it had under its own
 * rule.
 */
function inheritedList<T>(c: ConfChain, list: ListSlot<T>, rule: Slot<InheritRule>, scope: ConfigScope): T[] {
  if (!scope.registry(inheritRulesUsed).used) return c.list(list);
  const mode = c.get(rule);
  const own = c.ownList(list);
  if (mode === 'off' || (mode === 'on' && own.length > 0)) return own;
  const above = c.parent ? inheritedList(c.parent, list, rule, scope) : [];
  return mode === 'merge' ? [...own, ...above] : above;
}

/**
 * `expires` as nginx parses it (`ngx_http_parse_expires`): `off`, `epoch`,
 * `max`, or a time in seconds from the access (`+`/`-`), from the
 * response's `Last-Modified` (`modified`), or a time of day (`@`).
 */
export type ExpiresDef =
  | { readonly kind: 'off' }
  | { readonly kind: 'epoch' }
  | { readonly kind: 'max' }
  | { readonly kind: 'timed'; readonly mode: 'access' | 'modified' | 'daily'; readonly seconds: number };

/** `expires [modified] VALUE` with variables: parsed per response (an invalid value sets nothing). */
export interface ExpiresValueDef {
  readonly kind: 'variable';
  readonly modified: boolean;
  readonly value: ValueSource;
}

export const expires = slot<ExpiresDef | ExpiresValueDef>('expires', { kind: 'off' });

/**
 * `ngx_http_parse_expires`: the value of `expires` (after `modified`, when
 * `modified` is true). Returns the setting or nginx's error text.
 */
export function parseExpires(text: string, modified: boolean): ExpiresDef | string {
  let value = text;
  if (!modified && (value === 'epoch' || value === 'max' || value === 'off')) return { kind: value };
  let mode: 'access' | 'modified' | 'daily' = modified ? 'modified' : 'access';
  let sign = 1;
  if (value.startsWith('@')) {
    if (modified) return 'daily time cannot be used with "modified" parameter';
    mode = 'daily';
    value = value.slice(1);
  } else if (value.startsWith('+')) value = value.slice(1);
  else if (value.startsWith('-')) [sign, value] = [-1, value.slice(1)];
  const seconds = parseTime(value, true);
  if (seconds === undefined) return 'invalid value';
  if (mode === 'daily' && seconds > 24 * 60 * 60) return 'daily time value must be less than 24 hours';
  return { kind: 'timed', mode, seconds: sign * seconds };
}

/** `ngx_http_headers_expires`: `modified` first when there are two words; a value with variables is parsed per response. */
function setExpires(d: Directive, cx: SetContext): void {
  if (cx.level.own(expires)) throw new DirectiveFailure('is duplicate');
  if (d.args.length === 2 && d.args[0] !== 'modified') throw new DirectiveFailure('invalid value');
  const modified = d.args.length === 2;
  const text = d.args[d.args.length - 1]!;
  const value = cx.scope.variables.value(text, d.loc);
  if (value.parts.some((p) => typeof p !== 'string')) {
    cx.level.set(expires, { kind: 'variable', modified, value }, d.loc);
    return;
  }
  const parsed = parseExpires(text, modified);
  if (typeof parsed === 'string') throw new DirectiveFailure(parsed);
  cx.level.set(expires, parsed, d.loc);
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
    set: setExpires,
  },
  {
    name: 'add_trailer', module: HEADERS, contexts: HTTP_SRV_LOC_LIF, args: ['TAKE2', 'TAKE3'], effect: 'runtime',
    set: (d, cx) => cx.level.append(addTrailers, parseHeader(d, cx), d.loc),
  },
  inheritSpec('add_header_inherit', addHeaderInherit),
  inheritSpec('add_trailer_inherit', addTrailerInherit),
];

/** `add_header_inherit` / `add_trailer_inherit`: `on`, `off` or `merge` (`ngx_conf_set_enum_slot`). */
function inheritSpec(name: string, rule: Slot<InheritRule>): DirectiveSpec {
  const set = enumSetter(rule, ['on', 'off', 'merge']);
  return {
    name, module: HEADERS, contexts: HTTP_SRV_LOC_LIF, args: ['TAKE1'], effect: 'runtime',
    set: (d, cx) => {
      set(d, cx);
      cx.scope.registry(inheritRulesUsed).used = true;
    },
  };
}

/** An `add_header NAME VALUE [always]`. */
export interface AddHeader {
  readonly name: string;
  readonly value: CompiledValue;
  readonly always: boolean;
}

/** `expires`; with variables, parsed per response. */
export type ExpiresConf = ExpiresDef | { readonly kind: 'variable'; readonly modified: boolean; readonly value: CompiledValue };

/** The headers filter's settings of a level (`ngx_http_headers_merge_conf`), values bound. */
export function headersConf(c: ConfChain, scope: ConfigScope): { addHeaders: AddHeader[]; addTrailers: AddHeader[]; expires: ExpiresConf } {
  const vars = scope.variables;
  const e = c.get(expires);
  return {
    addHeaders: inheritedList(c, addHeaders, addHeaderInherit, scope).map((h) => ({ name: h.name, value: vars.bind(h.value), always: h.always })),
    addTrailers: inheritedList(c, addTrailers, addTrailerInherit, scope).map((h) => ({ name: h.name, value: vars.bind(h.value), always: h.always })),
    expires: e.kind === 'variable' ? { ...e, value: vars.bind(e.value) } : e,
  };
}
