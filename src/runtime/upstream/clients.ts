/**
 * Connections to upstream servers: the connections of each peer and
 * connection settings (peer-connections.ts), the idle connections each
 * `upstream` block keeps, and the peers' balancing state (round-robin.ts).
 */
import buildConnector from 'undici/lib/core/connect.js';
import { isAbsolute } from 'node:path';
import { loadCertificatePair, type CertificatePair } from '../../config/certificates.js';
import type { UpstreamTlsConf } from '../../config/route-table.js';
import type { ConnectionNumbers } from '../connection-numbers.js';
import { WorkerConnectionsError } from './errors.js';
import { RoundRobin, type PeerEvent } from './round-robin.js';
import { tlsConnector } from './tls.js';
import { IdleConnections, PeerConnections } from './peer-connections.js';
import { H2PeerConnections } from './h2-connections.js';
import { retireAfter } from './undici-socket.js';
import { upstreamOnRead, upstreamReadBytes } from './read-buffers.js';
import type { Socket } from 'node:net';

/**
 * Connection settings of a location (`proxy_connect_timeout`,
 * `proxy_buffer_size`, `proxy_ssl_*`): a `ProxyConf` is one. Pools are cached
 * per peer and settings object, so a location's requests find their pool
 * without building a key.
 */
export interface PoolSettings {
  readonly connectTimeoutMs: number;
  /** Bytes allowed for the status line and headers (`proxy_buffer_size`). */
  readonly bufferSizeBytes: number;
  /** `proxy_buffers` number × size: an HTTP/1.x connection reads at most this much at once (`upstreamReadBytes`). */
  readonly memoryBytes: number;
  /** How to speak TLS to an `https` peer; undefined: nginx's defaults. */
  readonly tls?: UpstreamTlsConf | undefined;
  /** `2`: the peer speaks HTTP/2 (`grpc_pass`); else HTTP/1.1 through undici. */
  readonly httpVersion: string;
}

/** The connections of a peer, whichever HTTP they speak. */
export type PeerPool = PeerConnections | H2PeerConnections;

/** `proxy_ssl_*` as nginx defaults them, for an `https` pool whose settings have none. */
const DEFAULT_TLS: UpstreamTlsConf = {
  key: 'default', serverName: false, name: undefined, verify: false, verifyDepth: 1, trusted: undefined, certificate: undefined,
  certificateFiles: undefined, passwords: undefined, crl: undefined, protocols: ['TLSv1.2', 'TLSv1.3'], ciphers: 'DEFAULT', sessionReuse: true,
};

/** A peer as the proxy connects to it: address, its `IP:port` name, keepalive timeout, group. */
export interface PoolPeer {
  readonly host: string;
  readonly port: number;
  /** `IP:port`, or `unix:PATH`. */
  readonly name: string;
  /** The socket file of a peer on a unix domain socket. */
  readonly path?: string;
  /** Idle connections its group keeps at most (`keepalive N` of its `upstream` block; 0: none, each connection closes after its request). */
  readonly keepalive: number;
  readonly keepaliveTimeoutMs: number;
  /** `keepalive_time`: a connection open longer than this is closed after its request. */
  readonly keepaliveTimeMs: number;
  /** `keepalive_requests`: a connection is closed after carrying this many requests. */
  readonly keepaliveRequests: number;
  /** The upstream group whose connection cache it uses; undefined for an address from variables. */
  readonly group: string | undefined;
}

/** The upstream connections of a running configuration. */
export class UpstreamClients {
  /** Every peer's connections, by group, scheme, address and settings. */
  private readonly pools = new Map<string, PeerPool>();
  /** The same by peer object (configured peers are long-lived) and settings object. */
  private readonly byPeer = new WeakMap<PoolPeer, Map<PoolSettings, { http?: PeerPool; https?: PeerPool }>>();
  /** The idle connections of each `upstream` block, by name. */
  private readonly idle = new Map<string, IdleConnections>();
  /** The peers' round-robin and failure state. */
  readonly roundRobin: RoundRobin;

  /**
   * @param numbers takes a number for every connection opened, as nginx's connection counter
   * @param admit tells whether one more connection fits in `worker_connections`
   *   (`workerConnections`), after closing idle ones to make room
   * @param sharePeerEvent where the failures of peers in groups with `zone` are told (`RoundRobin`)
   */
  constructor(
    private readonly numbers: ConnectionNumbers,
    private readonly admit: () => boolean,
    private readonly workerConnections: number,
    sharePeerEvent?: (event: PeerEvent) => void,
  ) {
    this.roundRobin = new RoundRobin(sharePeerEvent);
  }
  /** Client certificates of `proxy_ssl_certificate` with variables, by file pair, read once for this configuration. */
  private readonly clientCertificates = new Map<string, CertificatePair>();
  /** Settings with such a certificate, by the settings and file pair: their pools are found by object as the others. */
  private readonly withCertificate = new WeakMap<PoolSettings, Map<string, PoolSettings>>();

  /**
   * The settings for an `https` request when `proxy_ssl_certificate` has
   * variables (`ngx_http_upstream_ssl_certificate`): `settings` when the
   * certificate is empty, else settings with the certificate read from the
   * files (relative paths against the configuration directory).
   * @throws ConfigError nginx's message when the files cannot be used
   *   (`cannot load certificate "PATH": …`, `SSL_use_PrivateKey("PATH") failed (…)`)
   */
  clientCertificate(settings: PoolSettings, cert: string, key: string): PoolSettings {
    const tls = settings.tls;
    if (!tls?.certificateFiles || cert === '') return settings;
    const full = (p: string): string => (isAbsolute(p) ? p : tls.certificateFiles!.confPrefix + p);
    const [certPath, keyPath] = [full(cert), full(key)];
    const files = `${certPath}\0${keyPath}`;
    let mine = this.withCertificate.get(settings);
    if (!mine) this.withCertificate.set(settings, (mine = new Map()));
    let derived = mine.get(files);
    if (!derived) {
      let pair = this.clientCertificates.get(files);
      if (!pair) this.clientCertificates.set(files, (pair = loadCertificatePair(certPath, keyPath, true, tls.passwords)));
      derived = {
        connectTimeoutMs: settings.connectTimeoutMs,
        bufferSizeBytes: settings.bufferSizeBytes,
        memoryBytes: settings.memoryBytes,
        httpVersion: settings.httpVersion,
        tls: { ...tls, key: `${tls.key}|${files}`, certificate: pair, certificateFiles: undefined },
      };
      mine.set(files, derived);
    }
    return derived;
  }

  /** The connections to `scheme://peer` with `settings`. */
  pool(scheme: 'http' | 'https', peer: PoolPeer, settings: PoolSettings): PeerPool {
    let mine = this.byPeer.get(peer);
    if (!mine) this.byPeer.set(peer, (mine = new Map()));
    let entry = mine.get(settings);
    if (!entry) mine.set(settings, (entry = {}));
    const cached = entry[scheme];
    if (cached) return cached;
    const tls = scheme === 'https' ? settings.tls ?? DEFAULT_TLS : undefined;
    const http2 = settings.httpVersion === '2';
    const readBytes = upstreamReadBytes(settings.memoryBytes, tls !== undefined);
    const key = `${peer.group ?? ''}|${scheme}${http2 ? '+h2' : ''}://${peer.name}|${peer.keepalive}|${peer.keepaliveTimeoutMs}|${peer.keepaliveTimeMs}|${peer.keepaliveRequests}|${settings.connectTimeoutMs}|${settings.bufferSizeBytes}|${readBytes}|${tls?.key ?? ''}`;
    let pool = this.pools.get(key);
    if (!pool) {
      // a unix domain socket is reached through undici's `socketPath`; the origin only names it
      const origin = peer.path !== undefined ? `${scheme}://localhost` : `${scheme}://${peer.host.includes(':') ? `[${peer.host}]` : peer.host}:${peer.port}`;
      const socketPath = peer.path !== undefined ? { socketPath: peer.path } : {};
      // a connection is kept only in a group's cache; keepalive_requests 1 and keepalive_timeout 0 keep none
      const kept = peer.keepalive > 0 && peer.group !== undefined && peer.keepaliveRequests > 1 && peer.keepaliveTimeoutMs > 0;
      // HTTP/1.x reads into a buffer of the connection's own (read-buffers.ts); HTTP/2's session reads its socket itself
      const onread = http2 ? undefined : upstreamOnRead(readBytes);
      const connector = tls ? tlsConnector(tls, settings.connectTimeoutMs, peer.path, http2, onread)
        : buildConnector({ timeout: settings.connectTimeoutMs, ...socketPath, ...(onread ? { onread } : {}) });
      // a new connection needs room within worker_connections, as nginx's ngx_get_connection
      const admitted = (opts: Parameters<buildConnector.connector>[0], callback: Parameters<buildConnector.connector>[1]): void => {
        if (!this.admit()) {
          callback(new WorkerConnectionsError(this.workerConnections), null);
          return;
        }
        connector(opts, (...args) => {
          const socket = args[1];
          if (socket && kept) retireAfter(socket as Socket, peer.keepaliveTimeMs);
          callback(...args);
        });
      };
      pool = http2 ? this.h2Pool(scheme, peer, kept, admitted, settings.bufferSizeBytes) : new PeerConnections({
        origin,
        cache: kept ? this.idleConnections(peer.group!, peer.keepalive) : undefined,
        client: {
          connect: admitted,
          maxHeaderSize: settings.bufferSizeBytes,
          // keepalive_timeout of an idle connection (one not kept is closed after its response; undici wants a positive time)
          keepAliveTimeout: Math.max(peer.keepaliveTimeoutMs, 1),
          keepAliveMaxTimeout: Math.max(peer.keepaliveTimeoutMs, 1),
          pipelining: 1,
          // ngx_http_upstream_keepalive_close_handler's count: undici closes a socket after the request
          // that finds this many before it (sent with `connection: close`)
          maxRequestsPerClient: kept ? peer.keepaliveRequests - 1 : undefined,
        },
        // every attempt to connect takes a connection number, successful or not (one refused for want of room never started)
        onConnectAttempt: (err) => {
          if (!(err instanceof WorkerConnectionsError)) this.numbers.next();
        },
      });
      this.pools.set(key, pool);
    }
    entry[scheme] = pool;
    return pool;
  }

  /**
   * The HTTP/2 connections of `grpc_pass` to `peer`: every attempt to
   * connect takes a connection number, as for the proxy's.
   */
  private h2Pool(scheme: 'http' | 'https', peer: PoolPeer, kept: boolean, connect: buildConnector.connector, maxHeaderBytes: number): H2PeerConnections {
    return new H2PeerConnections({
      maxHeaderBytes,
      protocol: `${scheme}:`,
      hostname: peer.path !== undefined ? 'localhost' : peer.host,
      port: peer.port,
      connect: (opts, callback) => {
        connect(opts, (...args) => {
          if (!(args[0] instanceof WorkerConnectionsError)) this.numbers.next();
          callback(...args);
        });
      },
      cache: kept ? this.idleConnections(peer.group!, peer.keepalive) : undefined,
      keepaliveRequests: peer.keepaliveRequests,
      keepaliveTimeoutMs: peer.keepaliveTimeoutMs,
      keepaliveTimeMs: peer.keepaliveTimeMs,
    });
  }

  /** The idle connections of group `name`, which keeps `max` at most (its first peer's settings make them). */
  private idleConnections(name: string, max: number): IdleConnections {
    let idle = this.idle.get(name);
    if (!idle) this.idle.set(name, (idle = new IdleConnections(max)));
    return idle;
  }

  /** FastCGI connections open right now (the peers' connections count their own). */
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
    for (const pool of this.pools.values()) n += pool.connected;
    return n;
  }

  /** Closes every connection, busy ones after their request (at shutdown, or when a reloaded configuration replaces this one). */
  async close(): Promise<void> {
    const pools = [...this.pools.values()];
    this.pools.clear();
    await Promise.allSettled(pools.map((p) => p.close()));
  }
}
