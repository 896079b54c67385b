/**
 * limit_req's preaccess handler (`ngx_http_limit_req_handler` in
 * `src/http/modules/ngx_http_limit_req_module.c`): a request over a zone's
 * burst is refused with `limit_req_status` (503) and `limiting requests,
 * excess: N.NNN by zone "NAME"`; one over the rate within the burst waits
 * (`delaying request, excess: N.NNN, by zone "NAME"`, unless `nodelay` or
 * `delay=` lets it through), then goes on. With `limit_req_dry_run` only
 * the log lines and `$limit_req_status` say so. A request is limited once,
 * whatever internal redirects follow.
 */
import { logRequest } from '../context.js';
import type { Exchange } from '../exchange.js';
import type { LimitCheck } from '../limit-req-zones.js';

/** `N.NNN` of an excess in thousandths of a request. */
const excessText = (milli: number): string => `${Math.floor(milli / 1000)}.${String(milli % 1000).padStart(3, '0')}`;

/**
 * Applies the location's limits. Returns the status to finalize the
 * request with (refused, or 499 for a client that left while delayed), or
 * undefined for the request to go on to the access phase.
 */
export async function limitRequests(ex: Exchange): Promise<number | undefined> {
  const { r, cx } = ex;
  const main = r.parent ?? r;
  const conf = r.loc.limitReq;
  if (main.limitReqStatus !== undefined || conf.limits.length === 0) return undefined;
  const checks: LimitCheck[] = [];
  for (const limit of conf.limits) {
    const key = limit.zone.key.evaluate(r);
    if (key.length === 0) continue;
    if (key.length > 65535) {
      logRequest(cx, r, 'error', `the value of the "${limit.zone.key.source}" key is more than 65535 bytes: "${key}"`);
      continue;
    }
    checks.push({ zone: limit.zone, key, burstMilli: limit.burstMilli, delayMilli: limit.delayMilli });
  }
  if (checks.length === 0) return undefined;
  const outcome = await r.untimed(() => cx.limitReq.apply(checks));
  const dry = conf.dryRun ? ', dry run' : '';
  if (outcome.kind === 'busy' || outcome.kind === 'error') {
    if (outcome.kind === 'busy') {
      logRequest(cx, r, conf.logLevel, `limiting requests${dry}, excess: ${excessText(outcome.excessMilli)} by zone "${outcome.zone}"`);
    }
    main.limitReqStatus = conf.dryRun ? 'REJECTED_DRY_RUN' : 'REJECTED';
    return conf.dryRun ? undefined : conf.status;
  }
  if (outcome.kind === 'pass') {
    main.limitReqStatus = 'PASSED';
    return undefined;
  }
  logRequest(cx, r, conf.delayLogLevel, `delaying request${dry}, excess: ${excessText(outcome.excessMilli)}, by zone "${outcome.zone}"`);
  main.limitReqStatus = conf.dryRun ? 'DELAYED_DRY_RUN' : 'DELAYED';
  if (conf.dryRun) return undefined;
  return (await delay(ex, outcome.delayMs)) ? undefined : 499;
}

/**
 * Waits `ms` (`ngx_http_limit_req_delay`) while watching the client
 * (`ngx_http_test_reading`): one that leaves ends the request with
 * `client prematurely closed connection` (info). Resolves true when the
 * wait ran out.
 */
function delay(ex: Exchange, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      ex.out.onAbort(() => undefined);
      resolve(true);
    }, ms);
    ex.out.onAbort(() => {
      clearTimeout(timer);
      logRequest(ex.cx, ex.r, 'info', 'client prematurely closed connection');
      resolve(false);
    });
  });
}
