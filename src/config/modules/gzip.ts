/**
 * Compression (`ngx_http_gzip_filter_module.c`, `ngx_http_gzip_static_module.c`):
 * accepted, and responses are sent uncompressed. `$gzip_ratio` is empty.
 */
import { HTTP_SRV_LOC, HTTP_SRV_LOC_LIF } from '../flags.js';
import { acceptOnly, type DirectiveSpec } from '../spec.js';

const NOTE = 'jinx does not compress responses; they are sent as the upstream or file has them';

const gzip = (name: string, args: DirectiveSpec['args'], contexts = HTTP_SRV_LOC): DirectiveSpec => ({
  name, module: 'ngx_http_gzip_filter_module', contexts, args, effect: 'none', note: NOTE, set: acceptOnly,
});

export const gzipDirectives: readonly DirectiveSpec[] = [
  gzip('gzip', ['FLAG'], HTTP_SRV_LOC_LIF),
  gzip('gzip_buffers', ['TAKE2']),
  gzip('gzip_comp_level', ['TAKE1']),
  gzip('gzip_min_length', ['TAKE1']),
  gzip('gzip_types', ['1MORE']),
  { ...gzip('gzip_static', ['TAKE1']), module: 'ngx_http_gzip_static_module' },
];
