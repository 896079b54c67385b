/**
 * `ssl_session_cache builtin|shared:…`: TLS sessions kept for resumption by
 * session id (and TLS 1.3's stateful tickets), for `ssl_session_timeout`,
 * the oldest dropped when the cache is full (`ngx_ssl_new_session` and
 * `ngx_ssl_get_cached_session` in `src/event/ngx_event_openssl.c`). Node.js
 * hands sessions over through the TLS server's `newSession` and
 * `resumeSession` events. A `builtin` cache is its listening address's, in
 * its process (OpenSSL's cache of one context, per nginx worker); a
 * `shared:NAME` cache is the zone's, for every address and worker that
 * names it: a `SessionStore` keeps it (a worker's store is its master's).
 */
import type { Server as TlsServer } from 'node:tls';
import type { SessionCacheConf } from '../config/modules/ssl.js';

interface Entry {
  readonly data: Buffer;
  readonly expiresAtMs: number;
}

/** Where the sessions of shared zones are kept (`ssl_session_cache shared:`, `sticky learn`), by zone name and session id (hex). */
export interface SessionStore {
  /** Keeps a new session; the zone's oldest goes when it holds `maxSessions`. */
  keep(zone: string, sessionId: string, data: Buffer, expiresAtMs: number, maxSessions: number): void;
  /** The session to resume, undefined when unknown or expired. */
  find(zone: string, sessionId: string): Buffer | undefined | Promise<Buffer | undefined>;
}

/** Sessions kept in this process, each zone oldest first. */
export class LocalSessions implements SessionStore {
  private readonly zones = new Map<string, Map<string, Entry>>();

  keep(zone: string, sessionId: string, data: Buffer, expiresAtMs: number, maxSessions: number): void {
    let sessions = this.zones.get(zone);
    if (!sessions) this.zones.set(zone, (sessions = new Map()));
    sessions.delete(sessionId);
    if (sessions.size >= maxSessions) sessions.delete(sessions.keys().next().value!);
    sessions.set(sessionId, { data, expiresAtMs });
  }

  find(zone: string, sessionId: string): Buffer | undefined {
    const sessions = this.zones.get(zone);
    const entry = sessions?.get(sessionId);
    if (!entry) return undefined;
    if (entry.expiresAtMs > Date.now()) return entry.data;
    sessions!.delete(sessionId);
    return undefined;
  }
}

/**
 * Keeps the sessions `server` creates in its cache and resumes them from
 * there: the zone of `shared:NAME` in `shared`, else a cache of this server's own.
 * @param timeoutMs how long a session may be resumed (`ssl_session_timeout`)
 */
export function serveSessions(server: TlsServer, conf: SessionCacheConf, timeoutMs: number, shared: SessionStore): void {
  const store = conf.sharedZone === undefined ? new LocalSessions() : shared;
  const zone = conf.sharedZone ?? '';
  server.on('newSession', (id: Buffer, data: Buffer, done: () => void) => {
    store.keep(zone, id.toString('hex'), data, Date.now() + timeoutMs, conf.maxSessions);
    done();
  });
  server.on('resumeSession', (id: Buffer, done: (err: Error | null, data: Buffer | null) => void) => {
    const found = store.find(zone, id.toString('hex'));
    if (found === undefined || Buffer.isBuffer(found)) done(null, found ?? null);
    else void found.then((data) => done(null, data ?? null));
  });
}
