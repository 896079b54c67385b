/**
 * The response cache directives of the proxy and FastCGI modules
 * (`src/http/ngx_http_file_cache.c`, `ngx_http_proxy_cache` in
 * `ngx_http_proxy_module.c`): jinx does not cache, and checks them as nginx
 * does, so that a configuration nginx rejects is rejected here too.
 */
import type { Directive } from '../../parser/ast.js';
import { fail, parseOffset, parseSize, parseTime, slot, type SetContext } from '../spec.js';

/**
 * What `proxy_cache`/`fastcgi_cache` says, by module: a zone name, `true`
 * for a zone given by variables, `false` for `off`.
 */
export const cacheZoneRefs = {
  proxy: slot<string | boolean | undefined>('proxy_cache zone', undefined),
  fastcgi: slot<string | boolean | undefined>('fastcgi_cache zone', undefined),
};

/** One page, nginx's `ngx_pagesize` on x86_64 Linux. */
const PAGE = 4096;

/**
 * `ngx_http_file_cache_set_slot`: `PATH [levels=1[:2[:2]]] keys_zone=NAME:SIZE
 * [use_temp_path=on|off] [inactive=TIME] [max_size=SIZE] [min_free=SIZE]
 * [loader_*=…] [manager_*=…]`. The zone is declared for the module
 * (`tag`); the directory is created at start as nginx does (`ngx_add_path`).
 * Returns the directory.
 */
export function parseCachePath(d: Directive, cx: SetContext, tag: string): string {
  let zone: { name: string; size: number } | undefined;
  for (const p of d.args.slice(1)) {
    const after = (prefix: string): string | undefined => (p.startsWith(prefix) ? p.slice(prefix.length) : undefined);
    let v: string | undefined;
    if ((v = after('levels=')) !== undefined) {
      if (!/^([12](:[12]){0,2})?$/.test(v)) fail(`invalid "levels" "${p}"`);
    } else if ((v = after('use_temp_path=')) !== undefined) {
      if (v !== 'on' && v !== 'off') fail(`invalid use_temp_path value "${p}", it must be "on" or "off"`);
    } else if ((v = after('keys_zone=')) !== undefined) {
      const colon = v.indexOf(':');
      const size = colon === -1 ? undefined : parseSize(v.slice(colon + 1));
      if (size === undefined) fail(`invalid keys zone size "${p}"`);
      if (size < 2 * PAGE) fail(`keys zone "${p}" is too small`);
      zone = { name: v.slice(0, colon), size };
    } else if ((v = after('inactive=')) !== undefined) {
      if (parseTime(v, true) === undefined) fail(`invalid inactive value "${p}"`);
    } else if ((v = after('max_size=') ?? after('min_free=')) !== undefined) {
      if (parseOffset(v) === undefined) fail(`invalid ${p.slice(0, p.indexOf('='))} value "${p}"`);
    } else if ((v = after('loader_files=') ?? after('manager_files=')) !== undefined) {
      if (!/^\d+$/.test(v)) fail(`invalid ${p.slice(0, p.indexOf('='))} value "${p}"`);
    } else if ((v = after('loader_sleep=') ?? after('loader_threshold=') ?? after('manager_sleep=') ?? after('manager_threshold=')) !== undefined) {
      if (parseTime(v, false) === undefined) fail(`invalid ${p.slice(0, p.indexOf('='))} value "${p}"`);
    } else fail(`invalid parameter "${p}"`);
  }
  if (!zone || zone.name.length === 0) fail(`"${d.name}" must have "keys_zone" parameter`);
  const shared = cx.scope.sharedZone(zone.name, zone.size, tag);
  if (shared.defined) fail(`duplicate zone "${zone.name}"`);
  shared.defined = true;
  let dir = d.args[0]!;
  if (dir.endsWith('/')) dir = dir.slice(0, -1);
  return cx.scope.fullPath(dir);
}

/**
 * `ngx_http_proxy_cache` / `ngx_http_fastcgi_cache`: `off`, a zone name
 * (referenced now, defined by a `*_cache_path` anywhere in http), or a value
 * with variables. Returns the zone name, `true` for variables, `false` for `off`.
 */
export function parseCacheRef(d: Directive, cx: SetContext, tag: string): string | boolean {
  const v = d.args[0]!;
  if (v === 'off') return false;
  if (v.includes('$')) {
    cx.scope.variables.value(v, d.loc);
    return true;
  }
  cx.scope.sharedZone(v, 0, tag);
  return v;
}

/** `ngx_http_file_cache_valid_set_slot`: `[CODE …|any] TIME`, appended. */
export function setCacheValid(d: Directive): void {
  const time = d.args[d.args.length - 1]!;
  if (parseTime(time, true) === undefined) fail(`invalid time value "${time}"`);
  for (const code of d.args.slice(0, -1)) {
    if (code === 'any') continue;
    if (!/^\d+$/.test(code) || Number(code) < 100 || Number(code) > 599) fail(`invalid status "${code}"`);
  }
}

/** `ngx_http_set_predicate_slot` (`src/http/ngx_http_script.c`): values with variables, appended. */
export function setPredicates(d: Directive, cx: SetContext): void {
  for (const a of d.args) cx.scope.variables.value(a, d.loc);
}
