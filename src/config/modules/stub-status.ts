/**
 * The stub_status module (`src/http/modules/ngx_http_stub_status_module.c`):
 * `stub_status` makes a server or location answer GET and HEAD with the
 * connection counters (its argument, left from older versions, is
 * ignored), and `$connections_active`, `$connections_reading`,
 * `$connections_writing`, `$connections_waiting` read them
 * (`ngx_http_stub_status_variable`, not cached: each use reads them anew).
 * The page itself is the runtime's (`runtime/handlers/stub-status.ts`).
 */
import { SRV_LOC } from '../flags.js';
import type { DirectiveSpec } from '../spec.js';
import { setContentHandler } from './http-core.js';
import type { VariableDef } from '../variables.js';

export const stubStatusDirectives: readonly DirectiveSpec[] = [
  {
    name: 'stub_status', module: 'ngx_http_stub_status_module', contexts: SRV_LOC, args: ['NOARGS', 'TAKE1'], effect: 'runtime',
    // ngx_http_set_stub_status sets the handler again without complaint
    set: (d, cx) => setContentHandler(cx, 'stub_status', d.loc),
  },
];

export const stubStatusVariables: readonly VariableDef[] = [
  { name: 'connections_active', get: (r) => String(r.conn.counters.active) },
  { name: 'connections_reading', get: (r) => String(r.conn.counters.reading) },
  { name: 'connections_writing', get: (r) => String(r.conn.counters.writing) },
  { name: 'connections_waiting', get: (r) => String(r.conn.counters.waiting) },
];
