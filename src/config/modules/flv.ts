/**
 * The FLV module (`src/http/modules/ngx_http_flv_module.c`, in nginx's and
 * Debian's packages): `flv` makes a location's content handler serve files
 * with pseudo-streaming, `?start=OFFSET` sending the FLV header and the file
 * from OFFSET. The handler is `src/runtime/handlers/flv.ts`.
 */
import type { DirectiveSpec } from '../spec.js';
import { setContentHandler } from './http-core.js';

export const flvDirectives: readonly DirectiveSpec[] = [
  {
    name: 'flv', module: 'ngx_http_flv_module', contexts: ['location'], args: ['NOARGS'], effect: 'runtime',
    // ngx_http_flv sets the location's handler again without complaint
    set: (d, cx) => setContentHandler(cx, 'flv', d.loc),
  },
];
