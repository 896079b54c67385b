/**
 * `ssl_certificate_cache max=N inactive=TIME valid=TIME`: certificates read
 * per handshake (`ssl_certificate` with variables), kept by file pair as
 * `ngx_ssl_cache_connection_fetch` (`src/event/ngx_event_openssl_cache.c`)
 * keeps them: an entry unused for `inactive` seconds is dropped, one older
 * than `valid` seconds is read again when either file changed (inode or
 * modification time), and the least recently used goes when `max` is reached.
 */
import { statSync } from 'node:fs';
import type { CertificatePair } from '../config/certificates.js';
import type { CertificateCacheConf } from '../config/modules/ssl.js';

interface Entry {
  readonly pair: CertificatePair;
  /** The files' identity when read: inode and mtime of both. */
  readonly identity: string;
  checkedAtMs: number;
  usedAtMs: number;
}

/** The identity of a pair's files, '' when either cannot be read. */
function identityOf(pair: { certPath: string; keyPath: string }): string {
  try {
    return [pair.certPath, pair.keyPath].map((p) => {
      const st = statSync(p);
      return `${st.ino}:${st.mtimeMs}`;
    }).join('|');
  } catch {
    return '';
  }
}

/** One `ssl_certificate_cache` (servers that inherit it share it, as in nginx). */
export class CertificateCache {
  /** Entries by `cert\0key`, least recently used first. */
  private readonly entries = new Map<string, Entry>();

  constructor(private readonly conf: CertificateCacheConf) {}

  /**
   * The pair for `certPath` and `keyPath`: from the cache when still valid,
   * else from `load` (whose errors pass through; failures are not kept).
   */
  fetch(certPath: string, keyPath: string, load: () => CertificatePair): CertificatePair {
    const key = `${certPath}\0${keyPath}`;
    const now = Date.now();
    let entry = this.entries.get(key);
    if (entry) {
      this.entries.delete(key);
      const inactive = now - entry.usedAtMs > this.conf.inactiveSec * 1000;
      if (!inactive && now - entry.checkedAtMs >= this.conf.validSec * 1000) {
        if (identityOf(entry.pair) === entry.identity) entry.checkedAtMs = now;
        else entry = undefined;
      }
      if (inactive) entry = undefined;
    }
    if (!entry) {
      const pair = load();
      entry = { pair, identity: identityOf(pair), checkedAtMs: now, usedAtMs: now };
      if (this.entries.size >= this.conf.maxEntries) this.entries.delete(this.entries.keys().next().value!);
    }
    entry.usedAtMs = now;
    this.entries.set(key, entry);
    return entry.pair;
  }
}
