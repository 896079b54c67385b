/**
 * Connections to upstream servers: one undici `Pool` per peer and connection
 * settings, round-robin peer selection per group (nginx's smooth weighted
 * round robin, `ngx_http_upstream_get_peer` in
 * `ngx_http_upstream_round_robin.c`), skipping `down` peers and using
 * `backup` peers only when no primary is usable.
 */
import { Pool } from 'undici';
import type { UpstreamGroup, UpstreamPeer } from '../../config/route-table.js';

/** Settings that need a pool of their own. */
export interface PoolSettings {
  readonly connectTimeoutMs: number;
  /** Bytes allowed for the status line and headers (`proxy_buffer_size`). */
  readonly maxHeaderSizeBytes: number;
  /** How long an idle kept-alive connection stays open. */
  readonly keepAliveTimeoutMs: number;
}

interface PeerState {
  currentWeight: number;
}

/** The upstream connection pools of a running configuration. */
export class UpstreamClients {
  private readonly pools = new Map<string, Pool>();
  private readonly peerState = new Map<UpstreamPeer, PeerState>();

  /** The pool for `scheme://peer` with `settings`. */
  pool(scheme: 'http' | 'https', peer: { host: string; port: number }, settings: PoolSettings): Pool {
    const key = `${scheme}|${peer.host}|${peer.port}|${settings.connectTimeoutMs}|${settings.maxHeaderSizeBytes}|${settings.keepAliveTimeoutMs}`;
    let pool = this.pools.get(key);
    if (!pool) {
      const host = peer.host.includes(':') ? `[${peer.host}]` : peer.host;
      pool = new Pool(`${scheme}://${host}:${peer.port}`, {
        // nginx does not verify upstream certificates unless proxy_ssl_verify is on
        connect: { timeout: settings.connectTimeoutMs, rejectUnauthorized: false },
        maxHeaderSize: settings.maxHeaderSizeBytes,
        keepAliveTimeout: settings.keepAliveTimeoutMs,
        keepAliveMaxTimeout: settings.keepAliveTimeoutMs,
        pipelining: 1,
      });
      this.pools.set(key, pool);
    }
    return pool;
  }

  /** Picks the next peer of a group, or undefined when every peer is down. */
  pick(group: UpstreamGroup): UpstreamPeer | undefined {
    const choose = (backup: boolean): UpstreamPeer | undefined => {
      let best: UpstreamPeer | undefined;
      let bestState: PeerState | undefined;
      let total = 0;
      for (const peer of group.peers) {
        if (peer.down || peer.backup !== backup) continue;
        let st = this.peerState.get(peer);
        if (!st) this.peerState.set(peer, (st = { currentWeight: 0 }));
        st.currentWeight += peer.weight;
        total += peer.weight;
        if (!bestState || st.currentWeight > bestState.currentWeight) {
          best = peer;
          bestState = st;
        }
      }
      if (bestState) bestState.currentWeight -= total;
      return best;
    };
    return choose(false) ?? choose(true);
  }

  /** FastCGI connections open right now (undici's pools count their own). */
  private otherConnections = 0;

  /** Counts a connection made outside the pools (FastCGI) until `release`. */
  track(): () => void {
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
