/**
 * Connections to upstream servers: one undici `Pool` per peer and connection
 * settings, and the peers' balancing state (round-robin.ts).
 */
import { Pool } from 'undici';
import type { ConnectionNumbers } from '../connection-numbers.js';
import { RoundRobin } from './round-robin.js';

/**
 * Connection settings of a location (`proxy_connect_timeout`,
 * `proxy_buffer_size`): a `ProxyConf` is one. Pools are cached per peer and
 * settings object, so a location's requests find their pool without building a key.
 */
export interface PoolSettings {
  readonly connectTimeoutMs: number;
  /** Bytes allowed for the status line and headers (`proxy_buffer_size`). */
  readonly bufferSizeBytes: number;
}

/** A peer as the proxy connects to it: address, its `IP:port` name, keepalive timeout, group. */
export interface PoolPeer {
  readonly host: string;
  readonly port: number;
  readonly name: string;
  readonly keepaliveTimeoutMs: number;
  /** The upstream group whose connection cache it uses; undefined for an address from variables. */
  readonly group: string | undefined;
}

/** The upstream connection pools of a running configuration. */
export class UpstreamClients {
  /** Every pool, by group, scheme, address and settings. */
  private readonly pools = new Map<string, Pool>();
  /** The same pools by peer object (configured peers are long-lived) and settings object. */
  private readonly byPeer = new WeakMap<PoolPeer, Map<PoolSettings, { http?: Pool; https?: Pool }>>();
  /** The peers' round-robin and failure state. */
  readonly roundRobin = new RoundRobin();

  /** @param numbers takes a number for every connection opened, as nginx's connection counter */
  constructor(private readonly numbers: ConnectionNumbers) {}

  /** The pool for `scheme://peer` with `settings`. */
  pool(scheme: 'http' | 'https', peer: PoolPeer, settings: PoolSettings): Pool {
    let mine = this.byPeer.get(peer);
    if (!mine) this.byPeer.set(peer, (mine = new Map()));
    let entry = mine.get(settings);
    if (!entry) mine.set(settings, (entry = {}));
    const cached = entry[scheme];
    if (cached) return cached;
    const key = `${peer.group ?? ''}|${scheme}://${peer.name}|${peer.keepaliveTimeoutMs}|${settings.connectTimeoutMs}|${settings.bufferSizeBytes}`;
    let pool = this.pools.get(key);
    if (!pool) {
      const host = peer.host.includes(':') ? `[${peer.host}]` : peer.host;
      pool = new Pool(`${scheme}://${host}:${peer.port}`, {
        // nginx does not verify upstream certificates unless proxy_ssl_verify is on
        connect: { timeout: settings.connectTimeoutMs, rejectUnauthorized: false },
        maxHeaderSize: settings.bufferSizeBytes,
        keepAliveTimeout: peer.keepaliveTimeoutMs,
        keepAliveMaxTimeout: peer.keepaliveTimeoutMs,
        pipelining: 1,
      });
      // every attempt to connect takes a connection number, successful or not
      pool.on('connect', () => this.numbers.next()).on('connectionError', () => this.numbers.next());
      this.pools.set(key, pool);
    }
    entry[scheme] = pool;
    return pool;
  }

  /** FastCGI connections open right now (undici's pools count their own). */
  private otherConnections = 0;

  /** Counts a connection made outside the pools (FastCGI) until `release`; it takes a connection number. */
  track(): () => void {
    this.numbers.next();
    this.otherConnections++;
    let released = false;
    return () => {
      if (!released) this.otherConnections--;
      released = true;
    };
  }

  /** Upstream connections open right now, for `worker_connections`. */
  connectionCount(): number {
    let n = this.otherConnections;
    for (const pool of this.pools.values()) n += pool.stats.connected;
    return n;
  }

  /** Closes every pool (at shutdown, or when a reloaded configuration replaces this one). */
  async close(): Promise<void> {
    const pools = [...this.pools.values()];
    this.pools.clear();
    await Promise.allSettled(pools.map((p) => p.close()));
  }
}
