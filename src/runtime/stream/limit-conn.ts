/**
 * The stream limit_conn preaccess handler (`ngx_stream_limit_conn_handler`
 * in `src/stream/ngx_stream_limit_conn_module.c`), run after `set` and
 * before `allow`/`deny`: each `limit_conn` of the server counts the session
 * under its key until the session ends (after its access log line, as
 * nginx's pool cleanup); a key that already has its N sessions refuses it
 * with `limiting connections by zone "NAME"` at `limit_conn_log_level`, and
 * the session ends with status 503. With `limit_conn_dry_run` only the log
 * line (`limiting connections, dry run, by zone "NAME"`) and
 * `$limit_conn_status` say so. The counts are the process's `LimitConnStore`
 * (shared by the workers through the master), as http's limit_conn's.
 */
import type { LimitConnCheck } from '../limit-conn-zones.js';
import type { StreamSession } from './session.js';

/** nginx's `NGX_STREAM_SERVICE_UNAVAILABLE`. */
export const SERVICE_UNAVAILABLE = 503;

/**
 * Applies the server's limits to a session. Returns undefined for the
 * session to go on to the access phase, or the status to finalize it with;
 * a promise when the counts are asked of the master.
 */
export function streamLimitConnections(s: StreamSession): number | undefined | Promise<number | undefined> {
  const conf = s.server.limitConn;
  const checks: LimitConnCheck[] = [];
  for (const limit of conf.limits) {
    const key = limit.zone.key.evaluate(s);
    if (key.length === 0) continue;
    if (key.length > 255) {
      s.log('error', `the value of the "${limit.zone.key.source}" key is more than 255 bytes: "${key}"`);
      continue;
    }
    checks.push({ zone: { name: limit.zone.name, sizeBytes: limit.zone.sizeBytes }, key, conn: limit.conn });
  }
  if (checks.length === 0) return undefined;
  s.limitConnStatus = 'PASSED';
  const decide = (outcome: Awaited<ReturnType<typeof s.env.limitConn.acquire>>): number | undefined => {
    if (outcome.kind === 'pass') {
      if (s.finalized) s.env.limitConn.release(checks);
      else s.cleanups.push(() => s.env.limitConn.release(checks));
      return undefined;
    }
    if (outcome.kind === 'busy') {
      s.log(conf.logLevel, `limiting connections${conf.dryRun ? ', dry run,' : ''} by zone "${outcome.zone}"`);
    } else {
      // ngx_slab_alloc_locked's error, without the session's context
      s.log('crit', `ngx_slab_alloc() failed: no memory in limit_conn_zone "${outcome.zone}"`, true);
    }
    s.limitConnStatus = conf.dryRun ? 'REJECTED_DRY_RUN' : 'REJECTED';
    return conf.dryRun ? undefined : SERVICE_UNAVAILABLE;
  };
  const outcome = s.env.limitConn.acquire(checks);
  return outcome instanceof Promise ? outcome.then(decide) : decide(outcome);
}
