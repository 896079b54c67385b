/**
 * `ssl_session_cache builtin|shared:…`: TLS sessions kept for resumption by
 * session id (and TLS 1.3's stateful tickets), for `ssl_session_timeout`,
 * the oldest dropped when the cache is full (`ngx_ssl_new_session` and
 * `ngx_ssl_get_cached_session` in `src/event/ngx_event_openssl.c`). Node.js
 * hands sessions over through the TLS server's `newSession` and
 * `resumeSession` events; one cache serves a listening address.
 */
import type { Server as TlsServer } from 'node:tls';

interface Entry {
  readonly data: Buffer;
  readonly expiresAtMs: number;
}

/** The sessions of one listening address, by session id (hex), oldest first. */
export class SessionCache {
  private readonly sessions = new Map<string, Entry>();

  /**
   * @param maxSessions sessions kept at most
   * @param timeoutMs how long a session may be resumed (`ssl_session_timeout`)
   */
  constructor(private readonly maxSessions: number, private readonly timeoutMs: number) {}

  /** Keeps the sessions `server` creates and resumes them from here. */
  serve(server: TlsServer): void {
    server.on('newSession', (id: Buffer, data: Buffer, done: () => void) => {
      const key = id.toString('hex');
      this.sessions.delete(key);
      if (this.sessions.size >= this.maxSessions) this.sessions.delete(this.sessions.keys().next().value!);
      this.sessions.set(key, { data, expiresAtMs: Date.now() + this.timeoutMs });
      done();
    });
    server.on('resumeSession', (id: Buffer, done: (err: Error | null, data: Buffer | null) => void) => {
      const key = id.toString('hex');
      const entry = this.sessions.get(key);
      if (entry && entry.expiresAtMs <= Date.now()) this.sessions.delete(key);
      done(null, entry && entry.expiresAtMs > Date.now() ? entry.data : null);
    });
  }
}
