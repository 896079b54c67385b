/**
 * limit_conn's preaccess handler (`ngx_http_limit_conn_handler` in
 * `src/http/modules/ngx_http_limit_conn_module.c`), run after limit_req's:
 * each `limit_conn` counts the request under its key until the request
 * ends (nginx's pool cleanup); a key that already has its N requests
 * refuses it with `limit_conn_status` (503) and `limiting connections by
 * zone "NAME"`. With `limit_conn_dry_run` only the log line (`limiting
 * connections, dry run, by zone "NAME"`) and `$limit_conn_status` say so.
 * A request is counted once, whatever internal redirects follow; its
 * subrequests are not counted apart. Each HTTP/2 stream is a request of
 * its own.
 */
import { logRequest } from '../context.js';
import type { Exchange } from '../exchange.js';
import type { LimitConnCheck } from '../limit-conn-zones.js';

/**
 * Applies the location's limits. Returns the status to finalize the
 * request with, or undefined for the request to go on to the access phase.
 */
export async function limitConnections(ex: Exchange): Promise<number | undefined> {
  const { r, cx } = ex;
  const main = r.parent ?? r;
  const conf = r.loc.limitConn;
  if (main.limitConnStatus !== undefined) return undefined;
  const checks: LimitConnCheck[] = [];
  for (const limit of conf.limits) {
    const key = limit.zone.key.evaluate(r);
    if (key.length === 0) continue;
    if (key.length > 255) {
      logRequest(cx, r, 'error', `the value of the "${limit.zone.key.source}" key is more than 255 bytes: "${key}"`);
      continue;
    }
    checks.push({ zone: { name: limit.zone.name, sizeBytes: limit.zone.sizeBytes }, key, conn: limit.conn });
  }
  if (checks.length === 0) return undefined;
  main.limitConnStatus = 'PASSED';
  const outcome = await r.untimed(() => cx.limitConn.acquire(checks));
  if (outcome.kind === 'pass') {
    main.atEnd(() => cx.limitConn.release(checks));
    return undefined;
  }
  if (outcome.kind === 'busy') {
    logRequest(cx, r, conf.logLevel, `limiting connections${conf.dryRun ? ', dry run,' : ''} by zone "${outcome.zone}"`);
  } else {
    // ngx_slab_alloc_locked's error, to the cycle's log
    cx.errorLog.write(cx.table.main.errorLogs, 'crit', `ngx_slab_alloc() failed: no memory in limit_conn_zone "${outcome.zone}"`);
  }
  main.limitConnStatus = conf.dryRun ? 'REJECTED_DRY_RUN' : 'REJECTED';
  return conf.dryRun ? undefined : conf.status;
}
