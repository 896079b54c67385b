/**
 * The random index module (`src/http/modules/ngx_http_random_index_module.c`):
 * `random_index on` in a location answers a URI ending in `/` with a file of
 * the directory picked at random, before the index module looks for an index
 * file. The content handler is `src/runtime/handlers/random-index.ts`.
 */
import { flagSetter, slot, type ConfChain, type DirectiveSpec } from '../spec.js';

const randomIndex = slot('random_index', false);

export const randomIndexDirectives: readonly DirectiveSpec[] = [
  { name: 'random_index', module: 'ngx_http_random_index_module', contexts: ['location'], args: ['FLAG'], effect: 'runtime', set: flagSetter(randomIndex) },
];

/** A level's `random_index` (`ngx_http_random_index_loc_conf_t`, off by default). */
export function randomIndexConf(c: ConfChain): boolean {
  return c.get(randomIndex);
}
