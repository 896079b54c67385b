/**
 * What `proxy_pass` and `fastcgi_pass` do alike once an attempt at a peer
 * has begun (`ngx_http_upstream.c`): give up on the peer
 * (`ngx_http_upstream_next`: the next one, a stale cache entry, or nginx's
 * status), hand an intercepted error to `error_page`
 * (`proxy_intercept_errors`, `fastcgi_intercept_errors`), and end a
 * response that failed after its header (`ngx_http_upstream_finalize_request`).
 * Each says how the request goes on as an `Outcome` for the phase runner.
 */
import type { CacheStore } from '../cache/upstream-cache.js';
import { logRequest } from '../context.js';
import { DONE, statusOutcome, type Exchange, type Outcome } from '../exchange.js';
import { keepInterceptedHeaders } from '../respond.js';
import type { ResponseSpool } from '../spool.js';
import type { UpstreamFailure } from '../upstream/errors.js';
import type { PeerAttempts } from '../upstream/round-robin.js';
import { nextUpstream, type ChosenPeer, type FailedAttempt } from './upstream-peer.js';

/**
 * `ngx_http_upstream_next` for a failed attempt: the next peer to try, or
 * how the request ends: the cache's expired entry when `*_cache_use_stale`
 * allows it for the failure's condition, else the status nginx answers
 * (the cache store is then dropped).
 */
export function nextOrAnswer(ex: Exchange, attempts: PeerAttempts | undefined, failed: FailedAttempt, store: CacheStore | undefined): ChosenPeer | Promise<Outcome> {
  const next = nextUpstream(ex, attempts, failed);
  if (typeof next !== 'number') return next;
  ex.r.action = 'sending to client';
  if (store?.staleAfterNext(failed.condition)) return store.sendStale().then((sent) => sent ?? statusOutcome(next), () => DONE);
  store?.abort();
  return Promise.resolve(statusOutcome(next));
}

/**
 * Whether an upstream's response with `status` goes to the location's
 * `error_page` (`*_intercept_errors on` and a page for it): its headers
 * that nginx keeps are kept, and a cached error is stored.
 */
export function interceptsError(
  ex: Exchange, interceptErrors: boolean, status: number, headers: readonly string[], store: CacheStore | undefined,
): boolean {
  const { r } = ex;
  if (!interceptErrors || status < 300 || !r.loc.errorPages.has(status)) return false;
  store?.storeError(status, headers);
  keepInterceptedHeaders(r, status, headers);
  return true;
}

/**
 * An upstream failure after the response header was taken: logged, then
 * after a premature close what arrived goes to the client before its
 * connection closes (nginx's `upstream_error` on the buffered data); else
 * the response is cut off, or `failure.status` answered if none was sent.
 */
export function responseFailed(ex: Exchange, failure: UpstreamFailure, spool: ResponseSpool | undefined): Promise<Outcome> {
  const { r, cx } = ex;
  r.action = failure.action;
  logRequest(cx, r, 'error', failure.message);
  r.action = 'sending to client';
  if (spool && failure.code === 'premature-close') {
    spool.endCut();
    return spool.done.then(() => DONE);
  }
  return Promise.resolve(cutOff(ex, failure.status, spool));
}

/** Ends a response after a failure: one already started is cut off (its connection closed), else `status` is answered. */
export function cutOff(ex: Exchange, status: number, spool: ResponseSpool | undefined): Outcome {
  spool?.abort();
  if (!ex.out.started) return statusOutcome(status);
  ex.out.abort();
  return DONE;
}
