/**
 * The empty_gif module (`src/http/modules/ngx_http_empty_gif_module.c`):
 * `empty_gif` makes a location answer GET and HEAD with a 1×1 transparent
 * GIF (43 bytes), its content handler as `proxy_pass` is one.
 */
import type { DirectiveSpec } from '../spec.js';
import { setContentHandler } from './http-core.js';

export const emptyGifDirectives: readonly DirectiveSpec[] = [
  {
    name: 'empty_gif', module: 'ngx_http_empty_gif_module', contexts: ['location'], args: ['NOARGS'], effect: 'runtime',
    // nginx sets the location's handler again without complaint
    set: (d, cx) => setContentHandler(cx, 'empty_gif', d.loc),
  },
];
