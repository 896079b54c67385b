/**
 * `auth_request` (`ngx_http_auth_request_module.c`): a subrequest to the
 * configured URI, which the phase runner runs through the same phases as
 * any request (server rewrite, location, handlers), with no body and the
 * parent's headers. Its status decides: 2xx allows, 401 and 403 are
 * returned (401 with the subrequest's `WWW-Authenticate`, from its response
 * or else from its upstream's), anything else is 500 with
 * `auth request unexpected status: N`. `auth_request_set` values are taken
 * from the subrequest once it has completed, whatever its status.
 */
import { logRequest } from '../context.js';
import { SubrequestTarget, type Exchange, type Subrequest } from '../exchange.js';
import type { HttpRequestState } from '../request.js';
import type { AccessResult } from './access.js';

/** The subrequest of the location's `auth_request`, for the phase runner to run; undefined without one. */
export function authSubrequest(ex: Exchange): Subrequest | undefined {
  const { r, cx } = ex;
  const conf = r.loc.authRequest;
  if (!conf) return undefined;
  return { cx, r: r.subrequest(conf.uri, '', cx.table.variableCount), body: undefined, out: new SubrequestTarget() };
}

/** Takes `auth_request_set` values from the subrequest that has completed, and decides by its status. */
export function authRequestResult(ex: Exchange, sub: Subrequest): AccessResult {
  const { r, cx } = ex;
  const conf = r.loc.authRequest!;
  const { r: sr, out } = sub;
  r.action = sr.action;
  for (const s of conf.sets) {
    const value = s.value.evaluate(sr);
    if (!s.handler) r.vars[s.index] = value;
    else {
      const error = s.handler(r, value);
      if (error) logRequest(cx, r, 'error', error);
    }
  }
  const status = out.status;
  if (status === 403) return 403;
  if (status === 401) {
    passChallenge(r, out.headers, sr.upstream?.headers);
    return 401;
  }
  if (status >= 200 && status < 300) return 'ok';
  logRequest(cx, r, 'error', `auth request unexpected status: ${status}`);
  return 500;
}

/**
 * Passes the subrequest's `WWW-Authenticate` headers to the client's 401: the
 * ones its response carries, else (hidden with `proxy_hide_header`) the
 * ones its upstream sent.
 */
function passChallenge(r: HttpRequestState, headers: readonly [string, string | string[]][], upstream: readonly string[] | undefined): void {
  const before = r.pendingHeaders.length;
  for (const [name, value] of headers) {
    if (name.toLowerCase() !== 'www-authenticate') continue;
    for (const v of Array.isArray(value) ? value : [value]) r.pendingHeaders.push([name, v]);
  }
  if (r.pendingHeaders.length > before || !upstream) return;
  for (let i = 0; i < upstream.length; i += 2) {
    if (upstream[i]!.toLowerCase() === 'www-authenticate') r.pendingHeaders.push([upstream[i]!, upstream[i + 1]!]);
  }
}
