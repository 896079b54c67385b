/**
 * The stream geo and split_clients modules
 * (`src/stream/ngx_stream_geo_module.c`, `ngx_stream_split_clients_module.c`):
 * `geo [$address] $variable { … }` and `split_clients STRING $variable { … }`
 * in the `stream` block, read and looked up as http's are (`modules/geo.ts`,
 * `modules/split-clients.ts`) over the stream session's variables. A stream
 * geo block's address is the session's `$remote_addr` (after realip), and it
 * has no `proxy` entries (`proxy` there is a network, refused as invalid).
 */
import type { ConfigScope } from '../scope.js';
import { scopeRegistry } from '../scope.js';
import type { DirectiveSpec } from '../spec.js';
import type { StreamView } from '../stream-view.js';
import type { VariableRegistry } from '../variables.js';
import { bindGeoLookup, readGeoBlock, type GeoDef } from './geo.js';
import { bindSplitClients, readSplitClients, type SplitClientsDef } from './split-clients.js';

/** The stream `geo` and `split_clients` blocks of a configuration, bound once every variable is known. */
const blocks = scopeRegistry(() => ({ geo: [] as GeoDef<StreamView>[], split: [] as SplitClientsDef<StreamView>[] }));

/** The stream geo and split_clients directives, over the stream variables of a configuration (`vars`). */
export function streamGeoDirectives(vars: (scope: ConfigScope) => VariableRegistry<StreamView>): DirectiveSpec[] {
  return [
    {
      name: 'geo', module: 'ngx_stream_geo_module', contexts: ['stream'], args: ['TAKE1', 'TAKE2'], block: 'raw', effect: 'runtime',
      set: (d, cx) => void cx.scope.registry(blocks).geo.push(readGeoBlock(d, cx, vars(cx.scope), false)),
    },
    {
      name: 'split_clients', module: 'ngx_stream_split_clients_module', contexts: ['stream'], args: ['TAKE2'], block: 'raw', effect: 'runtime',
      set: (d, cx) => void cx.scope.registry(blocks).split.push(readSplitClients(d, vars(cx.scope))),
    },
  ];
}

/** Binds the stream geo and split_clients blocks of a configuration to its variables (`v`). */
export function bindStreamGeo(scope: ConfigScope, v: VariableRegistry<StreamView>): void {
  const { geo, split } = scope.registry(blocks);
  for (const g of geo) bindGeoLookup(g, v, (s) => s.remoteAddr, () => undefined);
  for (const s of split) bindSplitClients(s, v);
}
