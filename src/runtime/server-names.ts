/**
 * Virtual server selection (`ngx_http_find_virtual_server` in
 * `src/http/ngx_http_request.c`): exact names, then `*.example.com` /
 * `.example.com` wildcards (longest first), then `www.example.*`, then
 * `~regex` names in configuration order, then the default server.
 */
import type { ServerSet, VirtualServer } from '../config/route-table.js';
import type { HttpRequestState } from './request.js';

/**
 * The server whose name matches a validated, lowercased host name, or
 * undefined when none does. Named captures of a matching regex are stored in
 * the request's variables when `r` is given.
 */
export function matchServer(set: ServerSet, host: string, r?: HttpRequestState): VirtualServer | undefined {
  const exact = set.exact.get(host);
  if (exact) return exact;
  if (host.length === 0) return undefined;
  // indexed loops: this runs for every request, and an iterator is an allocation where V8 keeps one
  for (let i = 0; i < set.headWildcards.length; i++) {
    const [suffix, server] = set.headWildcards[i]!;
    if (host.length > suffix.length && host.endsWith(suffix)) return server;
  }
  for (let i = 0; i < set.tailWildcards.length; i++) {
    const [prefix, server] = set.tailWildcards[i]!;
    if (host.length > prefix.length && host.startsWith(prefix)) return server;
  }
  for (let i = 0; i < set.regexes.length; i++) {
    const { regex, server, namedCaptures } = set.regexes[i]!;
    const m = regex.exec(host);
    if (!m) continue;
    if (r) {
      r.captures = m;
      for (const c of namedCaptures) r.vars[c.index] = m.groups?.[c.name] ?? '';
    }
    return server;
  }
  return undefined;
}

/** The server for a host name: the one whose name matches, else the default server. */
export function findServer(set: ServerSet, host: string, r?: HttpRequestState): VirtualServer {
  return matchServer(set, host, r) ?? set.defaultServer;
}
