/**
 * Compression (`ngx_http_gzip_filter_module.c`, `ngx_http_gzip_static_module.c`):
 * accepted and checked, and responses are sent uncompressed. `$gzip_ratio` is empty.
 */
import type { Directive } from '../../parser/ast.js';
import { HTTP_SRV_LOC, HTTP_SRV_LOC_LIF } from '../flags.js';
import { noEffect, numBounds, rule, slot, type DirectiveSpec, type Rule, type SetContext } from '../spec.js';

const NOTE = 'jinx does not compress responses; they are sent as the upstream or file has them';

const gzip = (name: string, args: DirectiveSpec['args'], r: Rule, contexts = HTTP_SRV_LOC): DirectiveSpec =>
  noEffect({ name, module: 'ngx_http_gzip_filter_module', contexts, args, note: NOTE }, r);

/** The MIME types `gzip_types` has listed at a level, or `*`. */
const gzipTypes = slot<Set<string> | '*' | undefined>('gzip_types', undefined);

/**
 * `ngx_http_types_slot` (`src/http/ngx_http.c`): the list starts with
 * `text/html`; a type listed twice is the warning `duplicate MIME type "X"`;
 * `*` stands for every type and ends the list.
 */
function setTypes(d: Directive, cx: SetContext): void {
  let types = cx.level.own(gzipTypes)?.value;
  if (types === '*') return;
  types ??= new Set(['text/html']);
  for (const arg of d.args) {
    if (arg === '*') {
      cx.level.replace(gzipTypes, '*', d.loc);
      return;
    }
    const type = arg.toLowerCase();
    if (types.has(type)) cx.warn(`duplicate MIME type "${type}"`, 'duplicate-mime-type');
    types.add(type);
  }
  cx.level.replace(gzipTypes, types, d.loc);
}

export const gzipDirectives: readonly DirectiveSpec[] = [
  gzip('gzip', ['FLAG'], rule.flag, HTTP_SRV_LOC_LIF),
  gzip('gzip_buffers', ['TAKE2'], rule.bufs),
  gzip('gzip_comp_level', ['TAKE1'], rule.num(numBounds(1, 9))),
  gzip('gzip_min_length', ['TAKE1'], rule.size()),
  gzip('gzip_types', ['1MORE'], rule.repeatable(setTypes)),
  noEffect(
    { name: 'gzip_static', module: 'ngx_http_gzip_static_module', contexts: HTTP_SRV_LOC, args: ['TAKE1'], note: NOTE },
    rule.enumOf('off', 'on', 'always'),
  ),
];
