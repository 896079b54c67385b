/**
 * The addition filter (`ngx_http_addition_filter_module.c`):
 * `add_before_body URI` and `add_after_body URI`, subrequests whose bodies
 * go before and after a main request's 200 response of an `addition_types`
 * type. The filter itself is `src/runtime/filters/addition.ts`.
 */
import { HTTP_SRV_LOC } from '../flags.js';
import { slot, strSetter, typesSetter, type DirectiveSpec, type MimeTypeSet } from '../spec.js';
import type { ConfChain } from '../spec.js';

const ADDITION = 'ngx_http_addition_filter_module';

/** `ngx_http_html_default_types`: what `addition_types` lists unless told otherwise. */
export const ADDITION_DEFAULT_TYPES: readonly string[] = ['text/html'];

export const addBeforeBody = slot('add_before_body', '');
export const addAfterBody = slot('add_after_body', '');
export const additionTypes = slot<MimeTypeSet | undefined>('addition_types', undefined);

export const additionDirectives: readonly DirectiveSpec[] = [
  { name: 'add_before_body', module: ADDITION, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: strSetter(addBeforeBody) },
  { name: 'add_after_body', module: ADDITION, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: strSetter(addAfterBody) },
  { name: 'addition_types', module: ADDITION, contexts: HTTP_SRV_LOC, args: ['1MORE'], effect: 'runtime', set: typesSetter(additionTypes, ADDITION_DEFAULT_TYPES) },
];

/** The addition filter's settings of a location (`ngx_http_addition_conf_t`); an empty URI is none. */
export interface AdditionConf {
  readonly beforeBody: string;
  readonly afterBody: string;
  readonly types: MimeTypeSet;
}

/** The addition filter's settings of a level (`ngx_http_addition_merge_conf`). */
export function additionConf(c: ConfChain): AdditionConf {
  return {
    beforeBody: c.get(addBeforeBody),
    afterBody: c.get(addAfterBody),
    types: c.get(additionTypes) ?? new Set(ADDITION_DEFAULT_TYPES),
  };
}
