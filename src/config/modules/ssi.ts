/**
 * Server-side includes (`ngx_http_ssi_filter_module.c`): the `ssi*`
 * directives, merged as `ngx_http_ssi_merge_loc_conf` merges them, and the
 * module's variables `$date_local` and `$date_gmt`. The filter itself is
 * `src/runtime/filters/ssi.ts`.
 */
import { HTTP_SRV_LOC, HTTP_SRV_LOC_LIF } from '../flags.js';
import { flagSetter, noEffect, rule, sizeSetter, slot, typesSetter, type DirectiveSpec, type MimeTypeSet } from '../spec.js';
import type { VariableDef } from '../variables.js';
import { ssiDate } from '../ssi-time.js';
import type { ConfChain } from '../spec.js';

const SSI = 'ngx_http_ssi_filter_module';

/** `ngx_http_html_default_types`: what `ssi_types` lists unless told otherwise. */
export const SSI_DEFAULT_TYPES: readonly string[] = ['text/html'];

export const ssiEnable = slot('ssi', false);
export const ssiSilentErrors = slot('ssi_silent_errors', false);
export const ssiLastModified = slot('ssi_last_modified', false);
/** `ssi_value_length`: the longest parameter value a command may have, in bytes. */
export const ssiValueLength = slot('ssi_value_length', 255);
export const ssiTypes = slot<MimeTypeSet | undefined>('ssi_types', undefined);

const BUFFERS = 'jinx hands the filter data in memory; there are no file buffers to send apart or recycle';

export const ssiDirectives: readonly DirectiveSpec[] = [
  { name: 'ssi', module: SSI, contexts: HTTP_SRV_LOC_LIF, args: ['FLAG'], effect: 'runtime', set: flagSetter(ssiEnable) },
  { name: 'ssi_silent_errors', module: SSI, contexts: HTTP_SRV_LOC, args: ['FLAG'], effect: 'runtime', set: flagSetter(ssiSilentErrors) },
  noEffect({ name: 'ssi_ignore_recycled_buffers', module: SSI, contexts: HTTP_SRV_LOC, args: ['FLAG'], note: BUFFERS }, rule.flag),
  noEffect({ name: 'ssi_min_file_chunk', module: SSI, contexts: HTTP_SRV_LOC, args: ['TAKE1'], note: BUFFERS }, rule.size()),
  { name: 'ssi_value_length', module: SSI, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: sizeSetter(ssiValueLength) },
  { name: 'ssi_types', module: SSI, contexts: HTTP_SRV_LOC, args: ['1MORE'], effect: 'runtime', set: typesSetter(ssiTypes, SSI_DEFAULT_TYPES) },
  { name: 'ssi_last_modified', module: SSI, contexts: HTTP_SRV_LOC, args: ['FLAG'], effect: 'runtime', set: flagSetter(ssiLastModified) },
];

/**
 * `$date_local` and `$date_gmt` (`ngx_http_ssi_date_gmt_local_variable`):
 * the time now in the request's SSI `timefmt` (`config timefmt=`), or
 * nginx's default format outside SSI.
 */
export const ssiVariables: readonly VariableDef[] = [
  { name: 'date_local', get: (r) => ssiDate(r.ssi?.timefmt, false) },
  { name: 'date_gmt', get: (r) => ssiDate(r.ssi?.timefmt, true) },
];

/** The SSI filter's settings of a location (`ngx_http_ssi_loc_conf_t`). */
export interface SsiConf {
  readonly enable: boolean;
  readonly silentErrors: boolean;
  /** `ssi_last_modified`: keep `Last-Modified` and a weak `ETag`. */
  readonly lastModified: boolean;
  /** `ssi_value_length`: the longest parameter value, in bytes. */
  readonly valueLengthBytes: number;
  readonly types: MimeTypeSet;
}

/** The SSI filter's settings of a level (`ngx_http_ssi_merge_loc_conf`). */
export function ssiConf(c: ConfChain): SsiConf {
  return {
    enable: c.get(ssiEnable),
    silentErrors: c.get(ssiSilentErrors),
    lastModified: c.get(ssiLastModified),
    valueLengthBytes: c.get(ssiValueLength),
    types: c.get(ssiTypes) ?? new Set(SSI_DEFAULT_TYPES),
  };
}
