/**
 * `$fastcgi_script_name` and `$fastcgi_path_info` (`ngx_http_fastcgi_split` in
 * `ngx_http_fastcgi_module.c`): the URI split by `fastcgi_split_path_info`
 * (first and second capture), with `fastcgi_index` appended to a script
 * name ending in `/`.
 */
import type { RequestView } from './request-view.js';

/** The script name and path info of the request's URI in its location. */
export function fastcgiSplit(r: RequestView): { script: string; pathInfo: string } {
  const split = r.loc.fastcgiSplit;
  let script = r.uri;
  let pathInfo = '';
  if (split.regex) {
    const m = split.regex.exec(r.uri);
    if (m && m.length >= 3) {
      script = m[1] ?? '';
      pathInfo = m[2] ?? '';
    }
  }
  if (split.index && script.endsWith('/')) script += split.index;
  return { script, pathInfo };
}
