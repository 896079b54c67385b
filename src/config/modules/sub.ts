/**
 * The sub filter (`ngx_http_sub_filter_module.c`): `sub_filter STRING
 * REPLACEMENT` (up to 255 per level, variables in both; a level with any
 * replaces its parent's whole list, as `ngx_http_sub_merge_conf` takes the
 * parent's `pairs` only when the level has none), `sub_filter_types`,
 * `sub_filter_once` and `sub_filter_last_modified`. The filter itself is
 * `src/runtime/filters/sub.ts`.
 */
import type { Directive } from '../../parser/ast.js';
import { HTTP_SRV_LOC } from '../flags.js';
import { fail, flagSetter, listSlot, slot, typesSetter, type DirectiveSpec, type MimeTypeSet, type SetContext } from '../spec.js';
import type { CompiledValue, ValueSource, VariableRegistry } from '../variables.js';
import type { ConfChain } from '../spec.js';

const SUB = 'ngx_http_sub_filter_module';

/** `ngx_http_html_default_types`: what `sub_filter_types` lists unless told otherwise. */
export const SUB_DEFAULT_TYPES: readonly string[] = ['text/html'];

/** nginx's limit of search strings at one level (the match tables index them in a byte). */
const MAX_PATTERNS = 255;

/** One `sub_filter`: the search string (ASCII lowercased, as `ngx_strlow` does) and the replacement. */
export interface SubFilterPairDef {
  readonly match: ValueSource;
  readonly value: ValueSource;
}

export const subFilters = listSlot<SubFilterPairDef>('sub_filter');
export const subFilterTypes = slot<MimeTypeSet | undefined>('sub_filter_types', undefined);
export const subFilterOnce = slot('sub_filter_once', true);
export const subFilterLastModified = slot('sub_filter_last_modified', false);

/** `ngx_strlow`: ASCII letters only, other bytes (UTF-8 included) as they are. */
export function asciiLower(s: string): string {
  return s.replace(/[A-Z]+/g, (m) => m.toLowerCase());
}

/** `ngx_http_sub_filter`: the search string must not be empty; both are complex values. */
function setSubFilter(d: Directive, cx: SetContext): void {
  if (d.args[0] === '') fail('empty search pattern');
  if ((cx.level.ownList(subFilters)?.length ?? 0) === MAX_PATTERNS) fail(`number of search patterns exceeds ${MAX_PATTERNS}`);
  const match = cx.scope.variables.value(asciiLower(d.args[0]!), d.loc);
  const value = cx.scope.variables.value(d.args[1]!, d.loc);
  cx.level.append(subFilters, { match, value }, d.loc);
}

export const subDirectives: readonly DirectiveSpec[] = [
  { name: 'sub_filter', module: SUB, contexts: HTTP_SRV_LOC, args: ['TAKE2'], effect: 'runtime', set: setSubFilter },
  { name: 'sub_filter_types', module: SUB, contexts: HTTP_SRV_LOC, args: ['1MORE'], effect: 'runtime', set: typesSetter(subFilterTypes, SUB_DEFAULT_TYPES) },
  { name: 'sub_filter_once', module: SUB, contexts: HTTP_SRV_LOC, args: ['FLAG'], effect: 'runtime', set: flagSetter(subFilterOnce) },
  { name: 'sub_filter_last_modified', module: SUB, contexts: HTTP_SRV_LOC, args: ['FLAG'], effect: 'runtime', set: flagSetter(subFilterLastModified) },
];

/** The sub filter's settings of a location (`ngx_http_sub_loc_conf_t`). */
export interface SubFilterConf {
  /**
   * `sub_filter`: search strings (lowercase ASCII) and replacements, in
   * the configuration's order; empty when the filter is off.
   */
  readonly pairs: readonly { readonly match: CompiledValue; readonly value: CompiledValue }[];
  readonly types: MimeTypeSet;
  /** `sub_filter_once`: each search string is replaced at its first place only. */
  readonly once: boolean;
  /** `sub_filter_last_modified`: keep `Last-Modified`, and the `ETag` made weak. */
  readonly lastModified: boolean;
}

/** The sub filter's settings of a level (`ngx_http_sub_merge_conf`), values bound. */
export function subFilterConf(c: ConfChain, vars: VariableRegistry): SubFilterConf {
  return {
    pairs: c.list(subFilters).map((p) => ({ match: vars.bind(p.match), value: vars.bind(p.value) })),
    types: c.get(subFilterTypes) ?? new Set(SUB_DEFAULT_TYPES),
    once: c.get(subFilterOnce),
    lastModified: c.get(subFilterLastModified),
  };
}
