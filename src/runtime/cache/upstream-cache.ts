/**
 * The response cache of the proxy and FastCGI handlers, as
 * `ngx_http_upstream_cache`, `ngx_http_upstream_cache_send` and the cache
 * part of `ngx_http_upstream_send_response` (`src/http/ngx_http_upstream.c`)
 * with `src/http/ngx_http_file_cache.c` do it:
 *
 * - `cacheStart` runs before the upstream is asked: for a method
 *   `*_cache_methods` allows, it looks the key up; a fresh entry is sent from
 *   its file (HIT), through the same header and body filters as any
 *   response, with the not-modified and range filters; an expired one may be
 *   sent while another request updates it (`use_stale updating`: UPDATING),
 *   or a request waits for that update (`*_cache_lock`). Otherwise the
 *   request goes upstream (MISS, EXPIRED, BYPASS) with a `CacheStore`.
 * - `CacheStore.begin` decides at the upstream's header whether the response
 *   is cached and until when (`X-Accel-Expires`, `Cache-Control`,
 *   `Expires`, `Set-Cookie`, `Vary: *`, `*_cache_valid`, `*_no_cache`),
 *   `write` copies the body as it arrives into a temporary file, and
 *   `commit` puts the file in place once the whole response was read; a
 *   response that did not finish is never cached (`abort`).
 */
import type { FileHandle } from 'node:fs/promises';
import { open, unlink } from 'node:fs/promises';
import { predicatesHold, type CacheConf, type CacheZoneConf } from '../../config/modules/cache.js';
import { parseHttpTime, preconditionStatus, rangesFor, type ByteRange } from '../conditional.js';
import { endSubrequest, logRequest } from '../context.js';
import { DONE, statusOutcome, SubrequestTarget, type Exchange, type Outcome, type Subrequest } from '../exchange.js';
import { WORKER_READ_BYTES, wroteReadBuffer } from '../file-read-buffer.js';
import type { HttpRequestState } from '../request.js';
import { applyHeadersModule, keepForRangeNotSatisfiable, lastModifiedSec } from '../respond.js';
import { encodeEntryHead, type EntryFile, type EntryValidity, type ReadEntryHead } from './entry-file.js';
import { CacheZone, type IndexEntry } from './zone.js';

/** What the cache made of a request before the upstream. */
export type CacheStart =
  /** The response came from the cache (or the request is answered otherwise): `outcome` says how the request ends. */
  | { readonly kind: 'served'; readonly outcome: Outcome }
  /** The request goes upstream; `store`, when set, may cache the response. */
  | { readonly kind: 'fetch'; readonly store: CacheStore | undefined };

const NO_STORE: CacheStart = { kind: 'fetch', store: undefined };

/** A header's value in a name/value list (names any case), the first one. */
function headerOf(list: readonly string[], lower: string): string | undefined {
  for (let i = 0; i + 1 < list.length; i += 2) if (list[i]!.toLowerCase() === lower) return list[i + 1];
  return undefined;
}

/**
 * How the location's handler (`proxy_pass`, `fastcgi_pass`) fetches the
 * response for another exchange: a background update's clone of the request.
 */
export type Refetch = (clone: Subrequest) => Promise<Outcome>;

/**
 * Whether the response comes from the cache: looks its key up, sends a
 * fresh entry, or says how the request goes upstream. Sets
 * `$upstream_cache_status`. The key is `*_cache_key`'s, else `defaultKey`
 * (the handler's: the proxy's upstream URL). An expired entry that may be
 * sent while it is updated (`*_cache_use_stale updating`, or within its
 * `stale-while-revalidate=`) is sent while another request updates it
 * (UPDATING), or, with `*_cache_background_update on`, sent (STALE) while
 * a clone of this request fetched with `refetch` updates it
 * (`ngx_http_upstream_cache`).
 */
export async function cacheStart(ex: Exchange, conf: CacheConf, refetch: Refetch, defaultKey = ''): Promise<CacheStart> {
  const { r, cx } = ex;
  if (!conf.methods.has(r.method)) return NO_STORE;
  let zoneConf: CacheZoneConf | undefined;
  if ('kind' in conf.zone) {
    const name = conf.zone.value.evaluate(r);
    zoneConf = conf.zone.zones.get(name);
    if (!zoneConf) {
      // ngx_http_upstream_cache_get
      logRequest(cx, r, 'error', `cache "${name}" not found`);
      return { kind: 'served', outcome: statusOutcome(500) };
    }
  } else zoneConf = conf.zone;
  const zone = cx.cache.zone(zoneConf);
  const mainKey = r.updatesCacheKey ?? conf.key?.evaluate(r) ?? defaultKey;
  let key = mainKey;
  let e = zone.entry(CacheZone.hashOf(key));
  e.lastUsedMs = Date.now();
  const evaluate = (v: { evaluate: (x: typeof r) => string }): string => v.evaluate(r);
  if (predicatesHold(conf.bypass, evaluate)) {
    r.cacheStatus = 'BYPASS';
    return { kind: 'fetch', store: new CacheStore(ex, conf, zone, e, key, true, false) };
  }
  e.uses++;
  // nginx's entries are fresh up to and including their last second (ngx_http_file_cache_exists, _read: valid_sec < now expires)
  if (e.error !== undefined && e.validUntilMs >= Math.floor(Date.now() / 1000) * 1000) {
    // an intercepted error that was cached: the request ends with it, as with the upstream's (its error_page)
    r.cacheStatus = 'HIT';
    return { kind: 'served', outcome: statusOutcome(e.error) };
  }
  let waitedMs = 0;
  /** The request's values of the main entry's `Vary`, once its key is the secondary one. */
  let secondary: string | undefined;
  for (;;) {
    let found = zone.openEntry(e, key);
    const variant = found?.head.variant !== undefined ? variantOf(r, found.head.upstreamHeaders) : undefined;
    if (found && variant !== found.head.variant) {
      // another variant (Vary): it has an entry of its own, under the key and its values (ngx_http_file_cache_reopen)
      found.close();
      found = undefined;
      if (secondary === undefined) {
        secondary = variant ?? '';
        key = `${key}\n${secondary}`;
        e = zone.entry(CacheZone.hashOf(key));
        e.lastUsedMs = Date.now();
        e.uses++;
        continue;
      }
    }
    const nowSec = Math.floor(Date.now() / 1000);
    if (found && found.head.validSec >= nowSec) {
      r.cacheStatus = 'HIT';
      return { kind: 'served', outcome: await sendEntry(ex, found) };
    }
    // ngx_http_file_cache_read: how long past its validity the entry may still be sent
    const staleUpdating = found !== undefined && found.head.validSec + found.head.updatingSec >= nowSec;
    const staleError = found !== undefined && found.head.validSec + found.head.errorSec >= nowSec;
    const sentWhileUpdated = (conf.useStale.has('updating') || staleUpdating) && !r.background;
    // a background update fetches the entry its parent marked as being updated
    const updating = r.updatesCacheKey === undefined && e.updatingSinceMs !== undefined && Date.now() - e.updatingSinceMs < conf.lockAgeMs;
    if (found && updating && sentWhileUpdated) {
      r.cacheStatus = 'UPDATING';
      return { kind: 'served', outcome: await sendEntry(ex, found) };
    }
    if (found && !updating && sentWhileUpdated && conf.backgroundUpdate) {
      const markedAtMs = Date.now();
      e.updatingSinceMs = markedAtMs;
      // the clone's store takes the update over; one that never stores (it failed first) leaves it here
      const updated = e;
      startBackgroundUpdate(ex, refetch, mainKey).finally(() => {
        if (updated.updatingSinceMs === markedAtMs) zone.endUpdate(updated);
      });
      r.cacheStatus = 'STALE';
      return { kind: 'served', outcome: await sendEntry(ex, found) };
    }
    if (updating && conf.lock && waitedMs < conf.lockTimeoutMs) {
      found?.close();
      // ngx_http_file_cache_lock: wait for the request that updates the entry, at most *_cache_lock_timeout;
      // once the update is older than *_cache_lock_age, this request goes to the upstream itself
      const ageLeftMs = conf.lockAgeMs - (Date.now() - e.updatingSinceMs!);
      const stepMs = Math.max(1, Math.min(conf.lockTimeoutMs - waitedMs, ageLeftMs));
      const startedMs = Date.now();
      const timedOut = await waitForUpdate(e, stepMs);
      waitedMs += Date.now() - startedMs;
      if (timedOut && waitedMs >= conf.lockTimeoutMs) {
        // the response is not cached (ngx_http_file_cache_lock_wait: "cache lock timeout")
        r.cacheStatus = found ? 'EXPIRED' : 'MISS';
        return { kind: 'fetch', store: new CacheStore(ex, conf, zone, e, key, false, found !== undefined, staleError) };
      }
      continue;
    }
    r.cacheStatus = found ? 'EXPIRED' : 'MISS';
    if (found && conf.revalidate) r.cacheValidators = { lastModified: found.head.lastModified, etag: found.head.etag };
    found?.close();
    const store = new CacheStore(ex, conf, zone, e, key, e.uses >= conf.minUses, found !== undefined, staleError);
    if (secondary !== undefined) store.primary = { e: zone.entry(CacheZone.hashOf(mainKey)), key: mainKey, variant: secondary };
    return { kind: 'fetch', store };
  }
}

/**
 * Starts the update of the expired entry `ex` sends
 * (`ngx_http_upstream_cache_background_update`): a clone of the request
 * (its method, URI, arguments, location and captures: nginx's
 * `NGX_HTTP_SUBREQUEST_CLONE`) with the entry's `key`, fetched by the
 * location's handler in the background, its response stored and sent
 * nowhere. The request is over once the update is too, as with mirrors
 * (nginx's background subrequests hold `r->main->count`): the connection's
 * next request waits for it. Settles when the clone has ended.
 */
function startBackgroundUpdate(ex: Exchange, refetch: Refetch, key: string): Promise<void> {
  const { r, cx } = ex;
  const sr = r.subrequest(r.uri, r.args, cx.table.variableCount);
  sr.method = r.method;
  sr.loc = r.loc;
  sr.captures = r.captures;
  sr.background = true;
  sr.updatesCacheKey = key;
  const run = refetch({ cx, r: sr, body: undefined, out: new SubrequestTarget() }).then(
    () => undefined,
    (err: Error) => logRequest(cx, sr, 'crit', `jinx internal error in subrequest: ${err.stack ?? String(err)}`),
  ).then(() => endSubrequest(cx, sr));
  (r.main.backgroundRuns ??= []).push(run);
  return run;
}

/** Waits until the update of `e` ends; true when `timeoutMs` passed first. */
function waitForUpdate(e: IndexEntry, timeoutMs: number): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const wake = (): void => {
      clearTimeout(timer);
      resolve(false);
    };
    const timer = setTimeout(() => {
      const at = e.waiters.indexOf(wake);
      if (at !== -1) e.waiters.splice(at, 1);
      resolve(true);
    }, timeoutMs);
    e.waiters.push(wake);
  });
}

/**
 * The request's values of the headers a response's `Vary` names (names and
 * values, one a line), or undefined when it has no `Vary`
 * (`ngx_http_file_cache_vary`).
 */
function variantOf(r: HttpRequestState, upstreamHeaders: readonly string[]): string | undefined {
  const names: string[] = [];
  for (let i = 0; i + 1 < upstreamHeaders.length; i += 2) {
    if (upstreamHeaders[i]!.toLowerCase() !== 'vary') continue;
    for (const n of upstreamHeaders[i + 1]!.split(',')) if (n.trim() !== '') names.push(n.trim().toLowerCase());
  }
  if (names.length === 0) return undefined;
  return names.map((n) => {
    const v = r.headers[n];
    // whitespace and empty list members do not make another variant
    const value = (Array.isArray(v) ? v.join(',') : v ?? '').split(',').map((x) => x.trim()).filter((x) => x !== '').join(',');
    return `${n}:${value}`;
  }).join('\n');
}

/**
 * How long a response may be cached (seconds since the epoch) and sent
 * after that (`stale-while-revalidate=`, `stale-if-error=`); undefined
 * when it may not be cached (the cache part of
 * `ngx_http_upstream_process_headers`, `…_process_cache_control`,
 * `…_process_expires`, `…_process_accel_expires`, `…_process_set_cookie`,
 * `…_process_vary`, then `ngx_http_file_cache_valid`). `X-Accel-Expires`
 * wins over `Cache-Control` and `Expires`, whatever their order;
 * `Cache-Control` over `Expires`. `stale-while-revalidate=N` sets both
 * extensions, `stale-if-error=N` the error one; a malformed number makes
 * the response not cached, as a malformed `max-age`.
 */
export function cacheValidity(
  conf: CacheConf, status: number, upstreamHeaders: readonly string[], nowSec: number, validList = true,
): EntryValidity | undefined {
  const ignore = conf.ignoreHeaders;
  let accelSec: number | undefined;
  let accelNoCache = false;
  let controlSec: number | undefined;
  let noCache = false;
  let expiresSec: number | undefined;
  let expired = false;
  let updatingSec = 0;
  let errorSec = 0;
  // X-Accel-Expires and Expires are taken once, the first (a repeated one is ignored as nginx ignores it)
  const seen = new Set<string>();
  for (let i = 0; i + 1 < upstreamHeaders.length; i += 2) {
    const name = upstreamHeaders[i]!.toLowerCase();
    const value = upstreamHeaders[i + 1]!;
    if ((name === 'x-accel-expires' || name === 'expires') && seen.has(name)) continue;
    seen.add(name);
    if (name === 'x-accel-expires' && !ignore.has('X-Accel-Expires')) {
      if (value.startsWith('@')) {
        if (/^\d+$/.test(value.slice(1))) accelSec = Number(value.slice(1));
      } else if (/^\d+$/.test(value)) {
        const n = Number(value);
        if (n === 0) accelNoCache = true;
        else accelSec = nowSec + n;
      }
    } else if (name === 'cache-control' && !ignore.has('Cache-Control')) {
      const lower = value.toLowerCase();
      if (lower.includes('no-cache') || lower.includes('no-store') || lower.includes('private')) {
        noCache = true;
        continue;
      }
      let at = lower.indexOf('s-maxage=');
      let offset = 9;
      if (at === -1) {
        at = lower.indexOf('max-age=');
        offset = 8;
      }
      if (at !== -1) {
        const n = deltaSeconds(lower, at + offset);
        if (n === undefined) return undefined;
        if (n === 0) {
          noCache = true;
          continue;
        }
        controlSec ??= nowSec + n;
      }
      // the extensions are kept with an X-Accel-Expires too, before or after it
      const swr = lower.indexOf('stale-while-revalidate=');
      if (swr !== -1) {
        const n = deltaSeconds(lower, swr + 23);
        if (n === undefined) return undefined;
        updatingSec = Math.min(n, MAX_STALE_SEC);
        errorSec = updatingSec;
      }
      const sie = lower.indexOf('stale-if-error=');
      if (sie !== -1) {
        const n = deltaSeconds(lower, sie + 15);
        if (n === undefined) return undefined;
        errorSec = Math.min(n, MAX_STALE_SEC);
      }
    } else if (name === 'expires' && !ignore.has('Expires')) {
      const t = parseHttpTime(value);
      if (t === -1 || t < nowSec) expired = true;
      else expiresSec ??= t;
    } else if (name === 'set-cookie' && !ignore.has('Set-Cookie')) {
      return undefined;
    } else if (name === 'vary' && !ignore.has('Vary') && value.trim() === '*') {
      return undefined;
    }
  }
  const validity = (validSec: number): EntryValidity => ({ validSec: Math.min(validSec, MAX_VALID_SEC), updatingSec, errorSec });
  if (accelNoCache) return undefined;
  if (accelSec !== undefined) return validity(accelSec);
  if (noCache) return undefined;
  if (controlSec !== undefined) return validity(controlSec);
  if (expired) return undefined;
  if (expiresSec !== undefined) return validity(expiresSec);
  if (!validList) return undefined;
  const valid = conf.valid.find((v) => v.status === 0 || v.status === status);
  return valid && valid.sec > 0 ? validity(nowSec + valid.sec) : undefined;
}

/** The latest validity an entry keeps (a `max-age` too large for any clock is "for ever"). */
const MAX_VALID_SEC = 999_999_999_999;
/** The longest `stale-while-revalidate=`/`stale-if-error=` an entry keeps (the width of its first line). */
const MAX_STALE_SEC = 9_999_999_999;

/**
 * A `Cache-Control` delta-seconds value of `lower` from `at` up to `,`,
 * `;`, a blank or the end; undefined when it holds anything else (nginx
 * then does not cache the response). Empty is 0.
 */
function deltaSeconds(lower: string, at: number): number | undefined {
  const m = /^(\d*)(?:[,; ]|$)/.exec(lower.slice(at));
  return m ? Number(m[1] || '0') : undefined;
}

/**
 * One response on its way into the cache: decided at the header, copied as
 * its body arrives, put in place when it is complete.
 */
export class CacheStore {
  private fh: Promise<FileHandle | undefined> | undefined;
  private tempPath = '';
  private writes: Promise<void> = Promise.resolve();
  /** Bytes handed to `write` that are not in the file yet. */
  private queuedBytes = 0;
  /** Called once `queuedBytes` is back to 0 (see `drained`). */
  private onDrained: (() => void) | undefined;
  private bytes = 0;
  private validUntilMs = 0;
  private failed = false;
  private ended = false;
  /** This store marked the entry as being updated. */
  private owner = false;
  /** The entry being updated, whose waiters are woken at the end. */
  private readonly updated: IndexEntry;
  /**
   * For a store under a variant's own key (`Vary`), the key's main entry
   * and the variant the secondary key was made of: a response whose own
   * `Vary` makes another variant (none, or other headers) goes to the main
   * entry (`ngx_http_file_cache_update_variant`).
   */
  primary: { readonly e: IndexEntry; readonly key: string; readonly variant: string } | undefined;

  constructor(
    private readonly ex: Exchange,
    private readonly conf: CacheConf,
    private readonly zone: CacheZone,
    private e: IndexEntry,
    private key: string,
    /** Whether the response may be stored (`*_cache_min_uses` reached, no lock timeout). */
    private readonly mayStore: boolean,
    /** Whether an expired entry is there to send instead of an error (`*_cache_use_stale`). */
    private readonly hasStale: boolean,
    /** Whether that entry is within its `stale-if-error=` (nginx's `c->stale_error`). */
    private readonly staleError = false,
  ) {
    this.updated = e;
    // a background update owns the update its parent began
    if (mayStore && (ex.r.updatesCacheKey !== undefined || e.updatingSinceMs === undefined || Date.now() - e.updatingSinceMs >= conf.lockAgeMs)) {
      e.updatingSinceMs = Date.now();
      this.owner = true;
    }
  }

  /** Whether the body is being stored (`begin` said yes and nothing failed since). */
  get active(): boolean {
    return this.fh !== undefined && !this.failed && !this.ended;
  }

  /**
   * Decides whether the response is cached: not when it is passed on
   * unbuffered (`buffered` false: `proxy_buffering off`, `X-Accel-Buffering:
   * no`; ngx_http_upstream_send_response frees the cache entry of such a
   * response), then by `*_no_cache`, then its validity. `headers` are those
   * the client gets before the headers module; `upstreamHeaders` as received
   * (names and values alternating). Returns whether the body is to be copied
   * with `write`.
   */
  begin(status: number, reason: string, upstreamHeaders: readonly string[], headers: readonly [string, string | string[]][], buffered: boolean): boolean {
    const { r } = this.ex;
    if (!this.mayStore || !buffered) {
      this.end();
      return false;
    }
    const nowSec = Math.floor(Date.now() / 1000);
    const validity = predicatesHold(this.conf.noCache, (v) => v.evaluate(r)) ? undefined : cacheValidity(this.conf, status, upstreamHeaders, nowSec);
    if (validity === undefined) {
      this.end();
      return false;
    }
    this.validUntilMs = validity.validSec * 1000;
    const variant = this.conf.ignoreHeaders.has('Vary') ? undefined : variantOf(r, upstreamHeaders);
    if (this.primary && variant !== this.primary.variant) {
      this.e = this.primary.e;
      this.key = this.primary.key;
    }
    const validators = status === 200 || status === 206;
    const head = encodeEntryHead({
      key: this.key, ...validity, dateSec: nowSec, status, reason, headers: headers.map(([n, v]) => [n, v]), upstreamHeaders: [...upstreamHeaders],
      lastModified: validators ? headerOf(upstreamHeaders, 'last-modified') : undefined,
      etag: validators ? headerOf(upstreamHeaders, 'etag') : undefined,
      variant,
    });
    this.tempPath = this.zone.tempPath(this.e.hash, this.ex.cx.tempFiles.next());
    this.fh = open(this.tempPath, 'wx', 0o600).then(async (fh) => {
      await fh.write(head);
      this.bytes += head.length;
      return fh;
    }).catch((err: Error) => {
      this.fail(err);
      return undefined;
    });
    return true;
  }

  /**
   * Copies a piece of the body to the entry's file, writes queued in order.
   * Returns the bytes not in the file yet: a caller past its `*_buffers`
   * stops reading the upstream until `drained` calls back, as nginx, whose
   * buffers hold what is not yet written, reads no more until they are free.
   */
  write(chunk: Buffer): number {
    if (!this.active) return this.queuedBytes;
    const fh = this.fh!;
    this.bytes += chunk.length;
    this.queuedBytes += chunk.length;
    this.writes = this.writes.then(async () => {
      const h = await fh;
      if (h && !this.failed) await h.write(chunk);
    }).catch((err: Error) => this.fail(err)).then(() => {
      this.queuedBytes -= chunk.length;
      if (this.queuedBytes > 0 || !this.onDrained) return;
      const resume = this.onDrained;
      this.onDrained = undefined;
      resume();
    });
    return this.queuedBytes;
  }

  /** Calls `resume` once every byte handed to `write` is in the file (at once when none waits). */
  drained(resume: () => void): void {
    if (this.queuedBytes === 0) resume();
    else this.onDrained = resume;
  }

  /**
   * The whole response was read: the entry is put in place
   * (`ngx_http_file_cache_update`). Settles once it is (or failed, logged).
   */
  commit(): Promise<void> {
    if (!this.active) {
      this.abort();
      return Promise.resolve();
    }
    this.ended = true;
    const fh = this.fh!;
    return this.writes.then(async () => {
      const h = await fh;
      if (!h || this.failed) return;
      await h.close();
      await this.zone.install(this.e, this.tempPath, this.validUntilMs, this.bytes);
    }).catch((err: Error) => {
      logRequest(this.ex.cx, this.ex.r, 'crit', `rename() "${this.tempPath}" to "${this.zone.pathOf(this.e.hash)}" failed (${err.message})`);
      return unlink(this.tempPath).catch(() => undefined);
    }).finally(() => this.release());
  }

  /** The response did not finish (or is not cached): nothing is stored. */
  abort(): void {
    if (this.ended) return;
    this.ended = true;
    const fh = this.fh;
    if (!fh) {
      this.release();
      return;
    }
    void this.writes.then(async () => {
      const h = await fh;
      await h?.close();
      await unlink(this.tempPath).catch(() => undefined);
    }).catch(() => undefined).finally(() => this.release());
  }

  /**
   * An error status intercepted for `error_page` (`proxy_intercept_errors`):
   * when it may be cached, the key answers with it until it expires
   * (`ngx_http_upstream_intercept_errors`); no body is stored.
   */
  storeError(status: number, upstreamHeaders: readonly string[]): void {
    const { r } = this.ex;
    const validity = this.mayStore && !predicatesHold(this.conf.noCache, (v) => v.evaluate(r))
      ? cacheValidity(this.conf, status, upstreamHeaders, Math.floor(Date.now() / 1000))
      : undefined;
    if (validity !== undefined) {
      this.e.error = status;
      this.e.validUntilMs = validity.validSec * 1000;
    }
    this.abort();
  }

  /**
   * Whether the expired entry is sent instead of the upstream's response
   * with a failing status `condition` (`http_500` …), as `*_cache_use_stale`
   * says (`ngx_http_upstream_test_next`).
   */
  staleFor(condition: string): boolean {
    return this.hasStale && this.ex.r.cacheStatus === 'EXPIRED' && this.conf.useStale.has(condition);
  }

  /**
   * Whether the expired entry is sent when no peer is left to try after
   * `condition` (`error`, `timeout`, `invalid_header` …): as
   * `*_cache_use_stale` says, or within the entry's `stale-if-error=`
   * (`ngx_http_upstream_next`).
   */
  staleAfterNext(condition: string): boolean {
    return this.staleFor(condition) || (this.hasStale && this.staleError && this.ex.r.cacheStatus === 'EXPIRED');
  }

  /**
   * Sends the expired entry (STALE) in place of the upstream's response;
   * nothing is stored. Undefined when the entry is gone meanwhile (the
   * caller answers with its error).
   */
  async sendStale(): Promise<Outcome | undefined> {
    this.abort();
    const found = this.zone.openEntry(this.e, this.key);
    if (!found) return undefined;
    this.ex.r.cacheStatus = 'STALE';
    return sendEntry(this.ex, found);
  }

  /**
   * Whether a 304 answers the revalidation of the expired entry
   * (`proxy_cache_revalidate`, `ngx_http_upstream_test_next`).
   */
  revalidates(status: number): boolean {
    return status === 304 && this.hasStale && this.conf.revalidate && this.ex.r.cacheStatus === 'EXPIRED';
  }

  /**
   * Sends the entry a 304 revalidated (REVALIDATED), with a new validity:
   * the 304's own (`X-Accel-Expires`, `Cache-Control`, `Expires`), else the
   * entry's headers' and `*_cache_valid` for its status, as they are now.
   * Undefined when the entry is gone meanwhile.
   */
  async sendRevalidated(upstreamHeaders: readonly string[]): Promise<Outcome | undefined> {
    this.abort();
    const found = this.zone.openEntry(this.e, this.key);
    if (!found) return undefined;
    const nowSec = Math.floor(Date.now() / 1000);
    const validity = cacheValidity(this.conf, 304, upstreamHeaders, nowSec, false)
      ?? cacheValidity(this.conf, found.head.status, found.head.upstreamHeaders, nowSec);
    if (validity !== undefined) await this.zone.renew(this.e, this.key, validity);
    this.ex.r.cacheStatus = 'REVALIDATED';
    return sendEntry(this.ex, found);
  }

  /** Ends a store that never began. */
  private end(): void {
    this.ended = true;
    this.release();
  }

  private fail(err: Error): void {
    if (this.failed) return;
    this.failed = true;
    logRequest(this.ex.cx, this.ex.r, 'crit', `write() to "${this.tempPath}" failed (${err.message})`);
  }

  private release(): void {
    if (!this.owner) return;
    this.owner = false;
    this.zone.endUpdate(this.updated);
  }
}

/**
 * `ngx_http_upstream_copy_allow_ranges` for a response being cached: when
 * the upstream said `Accept-Ranges`, the client gets one range of it (the
 * range filter, filters/range.ts), whose `Accept-Ranges` replaces the
 * upstream's. `headers`: those going to the client, changed in place.
 */
export function allowSingleRange(r: HttpRequestState, headers: [string, string | string[]][]): void {
  if (r.parent || !headers.some(([n]) => n.toLowerCase() === 'accept-ranges')) return;
  r.singleRangeAllowed = true;
  drop(headers, 'accept-ranges');
}

/** Removes every header named `lower` from a list. */
function drop(headers: [string, string | string[]][], lower: string): void {
  for (let i = headers.length - 1; i >= 0; i--) if (headers[i]![0].toLowerCase() === lower) headers.splice(i, 1);
}

/** Sets a header's value, or adds it. */
function put(headers: [string, string | string[]][], name: string, value: string): void {
  const at = headers.findIndex(([n]) => n.toLowerCase() === name.toLowerCase());
  if (at === -1) headers.push([name, value]);
  else headers[at]![1] = value;
}

/**
 * Sends an entry (`ngx_http_upstream_cache_send`, `ngx_http_cache_send`):
 * its status and headers through the not-modified filter (304, 412 for a 200),
 * the headers module and, when the upstream sent `Accept-Ranges`, the range
 * filter (206, 416), then its body
 * streamed from the file, with backpressure. Closes `file`. A 412 or 416 is
 * left to the phase runner as a status outcome.
 */
async function sendEntry(ex: Exchange, file: EntryFile): Promise<Outcome> {
  const { r, out } = ex;
  const { head } = file;
  try {
    const size = head.fileBytes - head.bodyOffset;
    const headers: [string, string | string[]][] = head.headers.map(([n, v]) => [n, v]);
    const main = head.status === 200 && !r.parent && !r.errStatus;
    // ngx_http_upstream_copy_allow_ranges: a cached response is sent in ranges when the upstream said it could be
    // (its Accept-Ranges is then the range filter's)
    const allowRanges = headerOf(head.upstreamHeaders, 'accept-ranges') !== undefined;
    if (allowRanges) drop(headers, 'accept-ranges');
    if (main) {
      const etag = headers.find(([n]) => n.toLowerCase() === 'etag')?.[1];
      const condition = preconditionStatus(r, entryLastModifiedSec(head), typeof etag === 'string' ? etag : undefined);
      if (condition === 412) {
        return statusOutcome(412);
      }
      if (condition === 304) {
        // ngx_http_not_modified_header_filter
        for (const h of ['content-type', 'content-length', 'accept-ranges', 'content-encoding']) drop(headers, h);
        applyHeadersModule(r, 304, headers);
        out.head(r, 304, headers);
        out.end();
        return DONE;
      }
    }
    applyHeadersModule(r, head.status, headers);
    let parts: { readonly head: string; readonly range: ByteRange }[] = [{ head: '', range: { start: 0, end: size } }];
    let trailer = '';
    let status = head.status;
    if (main && allowRanges) {
      const etag = headers.find(([n]) => n.toLowerCase() === 'etag')?.[1];
      const ranges = rangesFor(r, size, entryLastModifiedSec(head), typeof etag === 'string' ? etag : undefined);
      if (ranges === 416) {
        keepForRangeNotSatisfiable(r, [...r.pendingHeaders, ...headers], size);
        return statusOutcome(416);
      }
      // the range filter's Content-Range replaces any the upstream sent
      if (Array.isArray(ranges)) drop(headers, 'content-range');
      if (Array.isArray(ranges) && ranges.length === 1) {
        status = 206;
        parts = [{ head: '', range: ranges[0]! }];
        headers.push(['Content-Range', `bytes ${ranges[0]!.start}-${ranges[0]!.end - 1}/${size}`]);
      } else if (Array.isArray(ranges)) {
        status = 206;
        const type = headers.find(([n]) => n.toLowerCase() === 'content-type')?.[1];
        const boundary = String(ex.cx.tempFiles.next()).padStart(20, '0');
        parts = ranges.map((range) => ({
          head: `\r\n--${boundary}\r\n${type ? `Content-Type: ${String(type)}\r\n` : ''}Content-Range: bytes ${range.start}-${range.end - 1}/${size}\r\n\r\n`,
          range,
        }));
        trailer = `\r\n--${boundary}--\r\n`;
        put(headers, 'Content-Type', `multipart/byteranges; boundary=${boundary}`);
      } else if (ranges === undefined) headers.push(['Accept-Ranges', 'bytes']);
      if (status === 206) {
        const length = parts.reduce((n, p) => n + p.head.length + p.range.end - p.range.start, trailer.length);
        if (headers.some(([n]) => n.toLowerCase() === 'content-length')) put(headers, 'Content-Length', String(length));
      }
    }
    r.action = 'sending cached response to client';
    out.head(r, status, headers);
    if (out.headOnly) {
      out.end();
      return DONE;
    }
    for (const [i, part] of parts.entries()) {
      if (part.head && !writeBody(ex, Buffer.from(part.head, 'latin1'))) return DONE;
      // the body's last bytes end the response, as nginx's last buffer (the filters then see it whole)
      const last = i === parts.length - 1 && !trailer;
      if (!(await streamPart(ex, file, head.bodyOffset + part.range.start, part.range.end - part.range.start, last))) return DONE;
      if (last) return DONE;
    }
    if (trailer && !writeBody(ex, Buffer.from(trailer, 'latin1'))) return DONE;
    out.end();
    return DONE;
  } finally {
    file.close();
  }
}

/** `Last-Modified` of entries' headers in seconds, by header list (the same list while an entry's file is: `KnownHead`). */
const lastModifiedOf = new WeakMap<ReadEntryHead['headers'], number | undefined>();

/** The entry's `Last-Modified` in seconds, for the not-modified and range filters; parsed once per entry file. */
function entryLastModifiedSec(head: ReadEntryHead): number | undefined {
  if (lastModifiedOf.has(head.headers)) return lastModifiedOf.get(head.headers);
  const sec = lastModifiedSec(head.headers);
  lastModifiedOf.set(head.headers, sec);
  return sec;
}

/** Writes bytes of the body; false when the client is gone. */
function writeBody(ex: Exchange, bytes: Buffer): boolean {
  if (ex.out.gone) return false;
  ex.r.bodyBytesSent += bytes.length;
  ex.out.write(bytes);
  return true;
}

/** How much of the file is read at a time. */
const READ_BYTES = WORKER_READ_BYTES;

/**
 * Streams `length` bytes of the entry's file from `position`, waiting for
 * the client to take each piece; with `last`, the last piece ends the
 * response. False when the client went away or the file could not be read
 * (the connection is then closed, as nginx does).
 */
async function streamPart(ex: Exchange, file: EntryFile, position: number, length: number, last: boolean): Promise<boolean> {
  const { r, out, cx } = ex;
  let left = length;
  let at = position;
  if (left === 0 && last) out.end();
  while (left > 0) {
    if (out.gone) return false;
    let piece: Buffer;
    try {
      // in the worker (aio off) the bytes go out before anything else runs: the worker's read buffer is shared
      piece = r.loc.aioThreads ? await file.read(at, Math.min(READ_BYTES, left)) : file.readInWorker(at, Math.min(READ_BYTES, left));
    } catch (err) {
      logRequest(cx, r, 'crit', `pread() of a cache file failed (${(err as Error).message})`);
      out.abort();
      return false;
    }
    if (piece.length === 0) {
      logRequest(cx, r, 'crit', 'cache file is too small');
      out.abort();
      return false;
    }
    left -= piece.length;
    at += piece.length;
    r.bodyBytesSent += piece.length;
    if (last && left === 0) {
      out.end(piece);
      wroteReadBuffer(piece, out);
      return true;
    }
    const ok = out.write(piece);
    wroteReadBuffer(piece, out);
    if (!ok) await new Promise<void>((resolve) => out.onDrain(resolve));
  }
  return true;
}
