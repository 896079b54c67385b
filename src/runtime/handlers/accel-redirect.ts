/**
 * `X-Accel-Redirect` from a proxied or FastCGI server
 * (`ngx_http_upstream_process_headers`): the response is not sent; the
 * headers nginx marks `redirect` in `ngx_http_upstream_headers_in` are kept
 * for the response of the URI or named location it names, which the request
 * is redirected to (`acceleratedRedirect` in phases.ts).
 */
import type { HttpRequestState } from '../request.js';

/** Headers of the upstream's response the redirected request keeps. */
const KEPT = new Set(['content-type', 'set-cookie', 'content-disposition', 'cache-control', 'expires', 'accept-ranges']);

/**
 * The `X-Accel-Redirect` of an upstream response's headers (`received`:
 * names and values in turn, duplicates nginx ignores already left out), or
 * undefined.
 */
export function accelRedirectOf(received: readonly string[]): string | undefined {
  for (let i = 0; i + 1 < received.length; i += 2) if (received[i]!.toLowerCase() === 'x-accel-redirect') return received[i + 1]!;
  return undefined;
}

/**
 * Keeps the headers a redirected request answers with: `Content-Type`,
 * `Set-Cookie` (through `rewriteCookie`, `proxy_cookie_*`),
 * `Content-Disposition`, `Cache-Control`, `Expires`, `Accept-Ranges`.
 */
export function keepForRedirect(r: HttpRequestState, received: readonly string[], rewriteCookie?: (value: string) => string): void {
  for (let i = 0; i + 1 < received.length; i += 2) {
    const name = received[i]!;
    const lower = name.toLowerCase();
    if (!KEPT.has(lower)) continue;
    const value = received[i + 1]!;
    r.pendingHeaders.push([name, lower === 'set-cookie' && rewriteCookie ? rewriteCookie(value) : value]);
  }
}
