/**
 * The autoindex module (`src/http/modules/ngx_http_autoindex_module.c`): a
 * URI ending in `/` for which the index module found no index file is
 * answered with a listing of the directory (GET and HEAD), as an HTML page,
 * XML, JSON or JSONP (`autoindex_format`). The content handler is
 * `src/runtime/handlers/autoindex.ts`.
 */
import { HTTP_SRV_LOC } from '../flags.js';
import { enumSetter, flagSetter, slot, type ConfChain, type DirectiveSpec } from '../spec.js';

const MODULE = 'ngx_http_autoindex_module';

/** The listing's formats (`ngx_http_autoindex_format`). */
export type AutoindexFormat = 'html' | 'xml' | 'json' | 'jsonp';

const autoindexEnable = slot('autoindex', false);
const autoindexFormat = slot<AutoindexFormat>('autoindex_format', 'html');
const autoindexLocaltime = slot('autoindex_localtime', false);
const autoindexExactSize = slot('autoindex_exact_size', true);

export const autoindexDirectives: readonly DirectiveSpec[] = [
  { name: 'autoindex', module: MODULE, contexts: HTTP_SRV_LOC, args: ['FLAG'], effect: 'runtime', set: flagSetter(autoindexEnable) },
  {
    name: 'autoindex_format', module: MODULE, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime',
    set: enumSetter(autoindexFormat, ['html', 'json', 'jsonp', 'xml']),
  },
  { name: 'autoindex_localtime', module: MODULE, contexts: HTTP_SRV_LOC, args: ['FLAG'], effect: 'runtime', set: flagSetter(autoindexLocaltime) },
  { name: 'autoindex_exact_size', module: MODULE, contexts: HTTP_SRV_LOC, args: ['FLAG'], effect: 'runtime', set: flagSetter(autoindexExactSize) },
];

/** A level's autoindex settings (`ngx_http_autoindex_loc_conf_t`). */
export interface AutoindexConf {
  /** `autoindex`: directory URIs without an index file are listed. */
  readonly enable: boolean;
  readonly format: AutoindexFormat;
  /** `autoindex_localtime`: the HTML listing's times in the server's time zone rather than UTC. */
  readonly localtime: boolean;
  /** `autoindex_exact_size`: the HTML listing's sizes in bytes, else rounded to K, M or G. */
  readonly exactSize: boolean;
}

/** The merged settings of a level (`ngx_http_autoindex_merge_loc_conf`). */
export function autoindexConf(c: ConfChain): AutoindexConf {
  return {
    enable: c.get(autoindexEnable),
    format: c.get(autoindexFormat),
    localtime: c.get(autoindexLocaltime),
    exactSize: c.get(autoindexExactSize),
  };
}
