/**
 * The WebDAV module (`src/http/modules/ngx_http_dav_module.c`): `dav_methods
 * off | put delete mkcol copy move …` lets a location without a content
 * handler of its own create, delete, copy and move the files its URIs map
 * to; `create_full_put_path`, `min_delete_depth` and `dav_access` (the
 * permissions of what it creates). The handler is
 * `src/runtime/handlers/dav.ts`.
 */
import { HTTP_SRV_LOC } from '../flags.js';
import { bitmaskSetter, DirectiveFailure, flagSetter, numSetter, slot, type ConfChain, type DirectiveSpec } from '../spec.js';
import { parseAccess } from './proxy.js';

const DAV = 'ngx_http_dav_module';

/** `ngx_http_dav_methods_mask`. */
const METHODS = ['off', 'put', 'delete', 'mkcol', 'copy', 'move'];

const davMethods = slot<readonly string[]>('dav_methods', ['off']);
const createFullPutPath = slot('create_full_put_path', false);
const minDeleteDepth = slot('min_delete_depth', 0);
/** `dav_access`: the permission bits of files made (`ngx_conf_set_access_slot`), 0600 by default. */
const davAccess = slot('dav_access', 0o600);

const runtime = (name: string, args: DirectiveSpec['args'], set: DirectiveSpec['set']): DirectiveSpec => ({
  name, module: DAV, contexts: HTTP_SRV_LOC, args, effect: 'runtime', set,
});

export const davDirectives: readonly DirectiveSpec[] = [
  runtime('dav_methods', ['1MORE'], bitmaskSetter(davMethods, METHODS)),
  runtime('create_full_put_path', ['FLAG'], flagSetter(createFullPutPath)),
  runtime('min_delete_depth', ['TAKE1'], numSetter(minDeleteDepth)),
  runtime('dav_access', ['TAKE1', 'TAKE2', 'TAKE3'], (d, cx) => {
    if (cx.level.own(davAccess)) throw new DirectiveFailure('is duplicate');
    cx.level.set(davAccess, parseAccess(d), d.loc);
  }),
];

/** The WebDAV settings of a location (`ngx_http_dav_merge_loc_conf`). */
export interface DavConf {
  /** Upper-case methods the handler takes (`PUT`, `DELETE`, `MKCOL`, `COPY`, `MOVE`); empty with `off`. */
  readonly methods: ReadonlySet<string>;
  readonly createFullPutPath: boolean;
  /** `min_delete_depth`: the fewest URI segments a DELETE needs (0: any). */
  readonly minDeleteDepth: number;
  /** `dav_access`, as permission bits. */
  readonly accessMode: number;
}

/** A level's WebDAV settings. */
export function davConf(c: ConfChain): DavConf {
  return {
    methods: new Set(c.get(davMethods).filter((m) => m !== 'off').map((m) => m.toUpperCase())),
    createFullPutPath: c.get(createFullPutPath),
    minDeleteDepth: c.get(minDeleteDepth),
    accessMode: c.get(davAccess),
  };
}
