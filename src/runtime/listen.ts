/**
 * Listening sockets: one TCP server per address:port of the route table,
 * which tells each connection's protocol from its first bytes and reports
 * to the server through `ListenHooks`. On a TLS address node:tls picks the
 * certificate by SNI with nginx's server-name rules, and the handshake is
 * refused for a server with `ssl_reject_handshake on`.
 */
import { createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net';
import { constants as cryptoConstants, createHash, createHmac } from 'node:crypto';
import { chmodSync } from 'node:fs';
import { isAbsolute } from 'node:path';
import { createSecureContext, createServer as createTlsServer, type SecureContext, type SecureContextOptions, type Server as TlsServer, type TLSSocket } from 'node:tls';
import { loadCertificatePair, type CertificatePair } from '../config/certificates.js';
import type { CertificateCacheConf, TlsServerConf } from '../config/modules/ssl.js';
import { CertificateCache } from './certificate-cache.js';
import { serveSessions, type SessionStore } from './session-cache.js';
import type { ListenGroup, RouteTable, ServerSet, VirtualServer } from '../config/route-table.js';
import { ConfigError } from '../errors.js';
import { systemErrorText } from '../os-errors.js';
import type { HttpRequestState } from './request.js';
import { findServer } from './server-names.js';
import { readProxyProtocol, type ProxyProtocolRead } from './proxy-protocol.js';
import { boundTlsWrites } from './write-copies.js';

/** Every server on a listen group's address, whichever name or local address selects it. */
function serversOf(group: ListenGroup): Set<VirtualServer> {
  const out = new Set<VirtualServer>();
  for (const set of [group.servers, ...group.byLocalAddr.values()]) {
    for (const vs of [set.defaultServer, ...set.exact.values(), ...set.headWildcards.map((x) => x[1]),
      ...set.tailWildcards.map((x) => x[1]), ...set.regexes.map((x) => x.server)]) out.add(vs);
  }
  return out;
}

/**
 * The session id context of a server's TLS context, as
 * `ngx_ssl_session_id_context` makes one: a digest of the module
 * (`HTTP`, `STREAM`), the server's certificates and, when client
 * certificates are asked for, the CAs they are checked against. A session
 * or ticket resumes only where the context is the same, so one made with
 * another server's certificate, or checked against other CAs, is not taken
 * (nginx 1.7.5, CVE-2014-3616). MD5 in hex: node:tls takes a string of at
 * most 32 bytes.
 */
function sessionIdContext(module: 'HTTP' | 'STREAM', tls: Omit<TlsServerConf, 'certificateValues'>): string {
  const md5 = createHash('md5').update(module);
  for (const c of tls.certificates) md5.update(c.cert);
  if (tls.verifyClient !== 'off') for (const ca of [tls.clientCa, tls.trusted]) if (ca) md5.update(ca);
  return md5.digest('hex');
}

/**
 * The node:tls context options of a server's TLS settings (`ngx_ssl_create`,
 * `ngx_ssl_protocols`, `ngx_ssl_ciphers`, `ngx_ssl_client_certificate`,
 * `ngx_ssl_session_id_context` …); session tickets are encrypted with the
 * server's `ssl_session_ticket_key`, else with `ticketKeys` (without
 * either, the context makes its own).
 */
export function secureContextOptions(
  tls: Omit<TlsServerConf, 'certificateValues'>, ticketKeys: Buffer | undefined, module: 'HTTP' | 'STREAM' = 'HTTP',
): SecureContextOptions {
  const keys = tls.ticketKey ?? ticketKeys;
  const minVersion = tls.protocols.includes('TLSv1') ? 'TLSv1' : tls.protocols.includes('TLSv1.1') ? 'TLSv1.1'
    : tls.protocols.includes('TLSv1.2') ? 'TLSv1.2' : 'TLSv1.3';
  const maxVersion = tls.protocols.includes('TLSv1.3') ? 'TLSv1.3' : tls.protocols.includes('TLSv1.2') ? 'TLSv1.2'
    : tls.protocols.includes('TLSv1.1') ? 'TLSv1.1' : 'TLSv1';
  return {
    cert: tls.certificates.map((c) => c.cert),
    key: tls.certificates.map((c) => c.key),
    ciphers: tls.ciphers,
    honorCipherOrder: tls.preferServerCiphers,
    minVersion,
    maxVersion,
    sessionTimeout: tls.sessionTimeoutSec,
    sessionIdContext: sessionIdContext(module, tls),
    ecdhCurve: tls.ecdhCurve,
    ...(tls.dhparam ? { dhparam: tls.dhparam } : {}),
    ...(!tls.sessionTickets ? { secureOptions: cryptoConstants.SSL_OP_NO_TICKET } : keys ? { ticketKeys: keys } : {}),
    // client certificates are checked against ssl_client_certificate and ssl_trusted_certificate (both named
    // to clients: node:tls has one list); the phases refuse as nginx does
    ...(tls.verifyClient !== 'off' && (tls.clientCa || tls.trusted) ? { ca: [tls.clientCa, tls.trusted].filter((b) => b !== undefined) } : {}),
    ...(tls.crl ? { crl: tls.crl } : {}),
  };
}

/** TLS contexts of one configuration, by server. */
export class TlsContexts {
  private readonly contexts = new Map<VirtualServer, SecureContext>();
  private readonly options = new Map<VirtualServer, SecureContextOptions>();
  private readonly certificateless = new Map<VirtualServer, SecureContext>();
  /** `ssl_certificate_cache`s, one per directive (servers inheriting one share it). */
  private readonly caches = new Map<CertificateCacheConf, CertificateCache>();

  /**
   * Builds a TLS context for every server on a TLS address.
   * @param ticketKeys 48 bytes the master made, from which each server
   *   without an `ssl_session_ticket_key` gets keys of its own, the same in
   *   every worker (nginx's workers inherit their master's contexts, each
   *   with its own keys); without, each context makes its own
   */
  constructor(table: RouteTable, private readonly ticketKeys?: Buffer) {
    for (const group of table.listens) if (group.ssl) for (const server of serversOf(group)) this.load(server);
  }

  private load(server: VirtualServer): void {
    const tls = server.tls;
    if (this.options.has(server) || !tls || (tls.certificates.length === 0 && !tls.certificateValues)) return;
    // the servers are loaded in the table's order, the same in every worker of a generation
    const keys = this.ticketKeys && createHmac('sha512', this.ticketKeys).update(String(this.options.size)).digest().subarray(0, 48);
    const options = secureContextOptions(tls, keys);
    this.options.set(server, options);
    if (!tls.certificateValues) this.contexts.set(server, createSecureContext(options));
  }

  /**
   * The context for one handshake with a server whose certificates have
   * variables (`ngx_http_ssl_certificate`): every pair is evaluated for `r`
   * (a request of the connection, `$ssl_server_name` set) and read from its
   * files now (or taken from `ssl_certificate_cache`), relative paths against
   * the configuration's directory.
   * @throws ConfigError nginx's message for the first pair that cannot be
   *   used (`cannot load certificate "PATH": …`, `SSL_use_PrivateKey("PATH") failed (…)`)
   */
  forHandshake(server: VirtualServer, r: HttpRequestState): SecureContext {
    const values = server.tls!.certificateValues!;
    const full = (p: string): string => (isAbsolute(p) ? p : values.confPrefix + p);
    let cache = values.cache && this.caches.get(values.cache);
    if (values.cache && !cache) this.caches.set(values.cache, (cache = new CertificateCache(values.cache)));
    const pairs = values.pairs.map((p) => {
      const [cert, key] = [full(p.cert.evaluate(r)), full(p.key.evaluate(r))];
      const load = (): CertificatePair => loadCertificatePair(cert, key, true, values.passwords);
      return cache ? cache.fetch(cert, key, load) : load();
    });
    return createSecureContext({ ...this.options.get(server), cert: pairs.map((p) => p.cert), key: pairs.map((p) => p.key) });
  }

  /**
   * A server's settings without any certificate: a handshake given it ends
   * with OpenSSL's `handshake_failure` alert, as nginx's ends with an alert
   * when `ngx_http_ssl_certificate` fails (`internal_error`) or
   * `ssl_reject_handshake` refuses it (`unrecognized_name`), where a
   * `SNICallback` error would reset the connection.
   */
  withoutCertificate(server: VirtualServer): SecureContext {
    let ctx = this.certificateless.get(server);
    if (!ctx) this.certificateless.set(server, (ctx = createSecureContext(this.options.get(server))));
    return ctx;
  }

  /** Whether a server's certificates are read per handshake (they have variables). */
  perHandshake(server: VirtualServer): boolean {
    return server.tls?.certificateValues !== undefined;
  }

  /**
   * Whether handshakes on `group`'s address ask for a client certificate:
   * Node.js sets this per listening socket, not per SNI context, so it is on
   * when any server there has `ssl_verify_client`.
   */
  requestsCertificates(group: ListenGroup): boolean {
    return [...serversOf(group)].some((vs) => (vs.tls?.verifyClient ?? 'off') !== 'off');
  }

  /** Options of a server's context, for the socket's default (clients without SNI). */
  optionsOf(server: VirtualServer): SecureContextOptions {
    return this.options.get(server) ?? {};
  }

  /** The context for a server, or undefined when it has no certificate. */
  get(server: VirtualServer): SecureContext | undefined {
    return this.contexts.get(server);
  }
}

/**
 * A listening server: a TCP server (`front`) that hands each connection to
 * jinx's HTTP/1.x connection (`http1/connection.ts`), to its HTTP/2
 * connection (`http2/connection.ts`: h2c with prior knowledge, with `http2
 * on`), or on a TLS address to node:tls first (`tls`, whose default context
 * a reload replaces), whose secured connections go to HTTP/2 or HTTP/1.x by ALPN.
 */
export interface Listener {
  readonly front: NetServer;
  readonly tls: TlsServer | undefined;
}

/** How a listening server reaches the current configuration. */
export interface ListenHooks {
  /** The group this socket serves in the current configuration. */
  group(key: string): ListenGroup | undefined;
  tls(): TlsContexts;
  /** Where the sessions of `ssl_session_cache shared:NAME` zones are kept. */
  readonly sslSessions: SessionStore;
  /** A TCP connection was accepted (before any TLS handshake); it may be refused or may make room. */
  onAccept(socket: Socket): void;
  /**
   * The PROXY protocol header a connection on a `proxy_protocol` address
   * started with: what it said (undefined for `UNKNOWN` and headers without
   * addresses), or the error-log line of a broken one (the socket is closed after).
   */
  onProxyProtocol(socket: Socket, read: ProxyProtocolRead): void;
  /**
   * A connection that sent nothing: it closed, or `client_header_timeout`
   * (of the address's default server) passed; the socket is closed after.
   * `proxyProtocol` tells that its PROXY protocol header was still awaited.
   */
  onNothingRead(socket: Socket, why: 'closed' | 'timed out', proxyProtocol: boolean): void;
  /** `client_header_timeout` of the address's default server, in ms: how long a new connection may send nothing. */
  firstByteTimeoutMs(): number;
  /**
   * The first TLS record of a connection (its ClientHello), before the
   * handshake starts. True refuses the handshake (`ssl_reject_handshake`):
   * the client gets nginx's `unrecognized_name` alert and the connection closes.
   */
  onClientHello(socket: Socket, bytes: Buffer): boolean;
  /**
   * A connection that speaks HTTP/1.x: a plain one (with the bytes the front
   * already read), or a TLS one whose handshake completed.
   */
  onHttp1(socket: Socket, first: Buffer | undefined): void;
  /**
   * The context for a handshake with `server`, whose certificates have
   * variables (`TlsContexts.forHandshake`), on `socket`, for the SNI name
   * `serverName` ('' without SNI); when they cannot be read (the hook logs
   * why), a context without certificates, which fails the handshake.
   */
  handshakeContext(server: VirtualServer, socket: TLSSocket, serverName: string): SecureContext;
  /**
   * The client of a TLS socket sent a server name (node:tls calls
   * `SNICallback` only then); `rejected` when `ssl_reject_handshake` of the
   * server it names refuses the handshake.
   */
  onServerName(socket: TLSSocket, rejected: boolean): void;
  /** A TLS handshake failed (or was refused by `ssl_reject_handshake`). */
  onTlsError(err: Error, socket: TLSSocket): void;
  /**
   * A connection that speaks HTTP/2: a plain one starting with the
   * connection preface (with the bytes the front already read), or a TLS one
   * whose client chose `h2` by ALPN.
   */
  onHttp2(socket: Socket, first: Buffer): void;
}

/** The protocols `ngx_http_ssl_alpn_select` offers, in its order of preference, with and without HTTP/2. */
const ALPN_HTTP1 = ['http/1.1', 'http/1.0', 'http/0.9'];
const ALPN_WITH_H2 = ['h2', ...ALPN_HTTP1];

/** The servers of the address a connection arrived on (`hc->addr_conf`). */
function addressServers(group: ListenGroup, localAddress: string | undefined): ServerSet {
  const addr = localAddress?.startsWith('::ffff:') ? localAddress.slice(7) : localAddress ?? '';
  return group.byLocalAddr.get(addr) ?? group.servers;
}

/** Whether a plain connection may start HTTP/2 (`listen … http2`, or `http2 on` in the address's default server). */
const http2Accepted = (set: ServerSet): boolean => set.http2Listen || set.defaultServer.conf.http2;

/** The key of a listen group: address and port. */
export const listenKey = (g: { host: string; port: number }): string => `${g.host}|${g.port}`;

/**
 * Creates (but does not bind) the server for a listen group: a TCP server
 * whose connections are HTTP/1.x, or with `http2 on` HTTP/2 when they start
 * with the connection preface (h2c); on a TLS address, node:tls takes the
 * connections that start with a TLS record (HTTP/2 or HTTP/1.1 chosen by
 * ALPN with `http2 on`), and plain HTTP sent to the TLS port goes to HTTP/1.x
 * (which the phases answer with 497).
 */
export function createListener(group: ListenGroup, hooks: ListenHooks, early?: EarlyListener): Listener {
  const key = listenKey(group);
  const h2 = group.http2;
  if (!group.ssl) {
    // `http2 on` on a plain address: h2c with prior knowledge (the connection preface), else HTTP/1.x;
    // ngx_http_wait_request_handler looks for the preface when the address's default server has `http2 on`
    const front = frontServer(hooks, key, group, (socket, first) => {
      if (h2 && startsWithPreface(first) && http2Accepted(addressServers(hooks.group(key) ?? group, socket.localAddress))) {
        hooks.onHttp2(socket, first);
      } else hooks.onHttp1(socket, first);
    }, early);
    return { front, tls: undefined };
  }
  const tlsOptions = {
    ...hooks.tls().optionsOf(group.servers.defaultServer),
    requestCert: hooks.tls().requestsCertificates(group),
    rejectUnauthorized: false,
    // ngx_http_ssl_alpn_select: the server's order, h2 first when the server the SNI name selects has `http2 on`
    ALPNCallback(this: TLSSocket, hello: { servername: string | false; protocols: string[] }): string | undefined {
      const set = addressServers(hooks.group(key) ?? group, this.localAddress);
      const server = hello.servername ? findServer(set, hello.servername.toLowerCase()) : set.defaultServer;
      const offered = h2 && (set.http2Listen || server.conf.http2) ? ALPN_WITH_H2 : ALPN_HTTP1;
      return offered.find((p) => hello.protocols.includes(p));
    },
    // node:tls calls it on the socket being handshaken
    SNICallback(this: TLSSocket, name: string, cb: (err: Error | null, ctx?: SecureContext) => void) {
      const g = hooks.group(key) ?? group;
      const vs = findServer(g.servers, name.toLowerCase());
      const tls = hooks.tls();
      hooks.onServerName(this, vs.tls?.rejectHandshake === true);
      if (vs.tls?.rejectHandshake) {
        // a name the ClientHello's first record did not show (`onClientHello` refuses the others):
        // a context without certificates, so that OpenSSL ends the handshake with an alert
        return cb(null, tls.withoutCertificate(vs));
      }
      // ngx_http_ssl_servername: a server without certificates keeps the default server's
      const own = tls.get(vs) !== undefined || tls.perHandshake(vs) ? vs : g.servers.defaultServer;
      cb(null, tls.perHandshake(own) ? hooks.handshakeContext(own, this, name) : tls.get(own));
    },
  };
  const tlsServer = createTlsServer(tlsOptions);
  // ssl_session_cache of the address's default server (nginx's is per server chosen by SNI)
  const sessions = group.servers.defaultServer.tls;
  if (sessions?.sessionCache) serveSessions(tlsServer, sessions.sessionCache, sessions.sessionTimeoutSec * 1000, hooks.sslSessions);
  tlsServer.on('secureConnection', (socket: TLSSocket) => {
    boundTlsWrites(socket);
    if (h2 && socket.alpnProtocol === 'h2') {
      hooks.onHttp2(socket, Buffer.alloc(0));
    } else {
      // as on plain connections: a client that shuts down its side after a request still gets the response
      socket.allowHalfOpen = true;
      hooks.onHttp1(socket, undefined);
    }
  });
  tlsServer.on('tlsClientError', (err: Error, socket: TLSSocket) => hooks.onTlsError(err, socket));
  // ngx_http_ssl_handshake: a first byte of 0x16 (a TLS record) starts a handshake; plain HTTP sent to
  // the TLS port is answered by the phases (497, nginx's 400 page)
  const front = frontServer(hooks, key, group, (socket, first) => {
    if (first[0] !== 0x16) {
      hooks.onHttp1(socket, first);
      return;
    }
    if (hooks.onClientHello(socket, first)) {
      socket.end(UNRECOGNIZED_NAME_ALERT, () => socket.destroy());
      return;
    }
    socket.unshift(first);
    // a client that closes in the handshake is seen at once (node:tls closes a half-open socket only then)
    socket.allowHalfOpen = false;
    tlsServer.emit('connection', socket);
  }, early);
  return { front, tls: tlsServer };
}

/** The HTTP/2 client connection preface (RFC 9113 section 3.4, `NGX_HTTP_V2_PREFACE`). */
const H2_PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

/** Whether a connection starts with the whole HTTP/2 connection preface. */
const startsWithPreface = (b: Buffer): boolean => b.length >= H2_PREFACE.length && b.subarray(0, H2_PREFACE.length).equals(H2_PREFACE);

/**
 * The bytes a connection starts with are part of the HTTP/2 preface, not
 * all of it yet: `ngx_http_wait_request_handler` waits for the rest before
 * it tells HTTP/2 from HTTP/1.x.
 */
const incompletePreface = (b: Buffer): boolean => b.length < H2_PREFACE.length && b.equals(H2_PREFACE.subarray(0, b.length));

/** The largest TLS record a ClientHello can come in: 2^14 bytes and a header (RFC 8446 section 5.1). */
const MAX_RECORD = 5 + 16384;

/**
 * The bytes a TLS connection starts with, when they are not yet a whole
 * record: waiting for the rest of its ClientHello.
 */
const incompleteRecord = (b: Buffer): boolean =>
  b[0] === 0x16 && (b.length < 5 || (b.length < 5 + b.readUInt16BE(3) && 5 + b.readUInt16BE(3) <= MAX_RECORD));

/**
 * The record OpenSSL sends for nginx's refusal (`ngx_http_ssl_servername`
 * answers `SSL_AD_UNRECOGNIZED_NAME`): a fatal `unrecognized_name` alert in
 * a TLS 1.2 record (RFC 8446 sections 5.1 and 6).
 */
const UNRECOGNIZED_NAME_ALERT = Buffer.from([0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x70]);

/**
 * A TCP server that reads the first bytes of each connection and hands it,
 * with them, to `route` (paused: whoever takes it reads on): a TLS
 * connection once its first record (the ClientHello) is in. On a
 * `proxy_protocol` address the first bytes read start with the PROXY
 * protocol header, which is taken off first (`ngx_http_wait_request_handler`
 * and `ngx_http_ssl_handshake` read it before anything else); a broken one
 * closes the connection. Connections are half-open capable: a client that
 * shuts down its side still gets its response.
 */
function frontServer(hooks: ListenHooks, key: string, group: ListenGroup, route: (socket: Socket, first: Buffer) => void, early?: EarlyListener): NetServer {
  const accept = (socket: Socket): void => {
    hooks.onAccept(socket);
    if (socket.destroyed) return;
    let first: Buffer | undefined;
    let proxyProtocol = (hooks.group(key) ?? group).proxyProtocol;
    const timer = setTimeout(() => nothing('timed out'), hooks.firstByteTimeoutMs());
    const done = (): void => {
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('end', onEnd);
      socket.off('close', onClose);
    };
    const onData = (chunk: Buffer): void => {
      if (proxyProtocol) {
        proxyProtocol = false;
        const read = readProxyProtocol(chunk);
        hooks.onProxyProtocol(socket, read);
        if (!read.ok) {
          done();
          socket.destroy();
          return;
        }
        chunk = chunk.subarray(read.length);
        if (chunk.length === 0) return;
      }
      first = first ? Buffer.concat([first, chunk]) : chunk;
      if (incompleteRecord(first) || (group.http2 && !group.ssl && incompletePreface(first))) return;
      done();
      socket.pause();
      route(socket, first);
    };
    const nothing = (why: 'closed' | 'timed out'): void => {
      done();
      hooks.onNothingRead(socket, why, proxyProtocol);
      socket.destroy();
    };
    const onEnd = (): void => nothing('closed');
    const onClose = (): void => done();
    socket.on('data', onData);
    socket.once('end', onEnd);
    socket.once('close', onClose);
    socket.resume();
  };
  return early ? early.adopt(accept) : createNetServer(FRONT_OPTIONS, accept);
}

/**
 * Binds a server, with nginx's message on failure:
 * `bind() to 127.0.0.1:80 failed (98: Address already in use)`. A unix
 * domain socket is made readable and writable by everyone, as
 * `ngx_open_listening_sockets` chmods it (0666); closing the server removes
 * its file, as `ngx_close_listening_sockets` does on exit.
 */
export function bindListener({ front: server }: Listener, group: ListenGroup): Promise<void> {
  if (server.listening) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const onError = (err: Error): void => {
      reject(new ConfigError('file', `bind() to ${group.addrText.replace(/^\*/, '0.0.0.0')} failed (${systemErrorText(err)})`));
    };
    server.once('error', onError);
    const options = group.unixPath !== undefined ? { path: group.unixPath } : { host: group.host, port: group.port, ipv6Only: group.host === '::' };
    server.listen(options, () => {
      server.off('error', onError);
      if (group.unixPath !== undefined) chmodSync(group.unixPath, 0o666);
      resolve();
    });
  });
}

/** How every front server is made: connections paused until routed, half-open capable. */
const FRONT_OPTIONS = { pauseOnConnect: true, allowHalfOpen: true } as const;

/** When each connection an `EarlyListener` kept was accepted, in ms since the epoch. */
const earlyAccepts = new WeakMap<Socket, number>();

/** When `socket` was accepted: now, or for a connection an `EarlyListener` kept, then (`client_header_timeout` runs from it). */
export function acceptedAtMs(socket: Socket): number {
  return earlyAccepts.get(socket) ?? Date.now();
}

/**
 * A front server bound before the server that serves it is made: a worker
 * of jinx's master binds its addresses first, so that its master can stop
 * the old workers at once, and keeps the connections it accepts meanwhile
 * (paused, as every front server's) until `adopt`.
 */
export class EarlyListener {
  readonly server: NetServer;
  private queued: Socket[] | undefined = [];

  constructor() {
    this.server = createNetServer(FRONT_OPTIONS, (socket) => {
      earlyAccepts.set(socket, Date.now());
      this.queued?.push(socket);
    });
  }

  /** Hands the server and the connections it kept to `accept`. */
  adopt(accept: (socket: Socket) => void): NetServer {
    const kept = this.queued ?? [];
    this.queued = undefined;
    this.server.removeAllListeners('connection');
    this.server.on('connection', accept);
    for (const socket of kept) if (!socket.destroyed) accept(socket);
    return this.server;
  }
}

/**
 * The order to bind `groups` in: unix domain sockets first. A TCP socket
 * takes connections as soon as it listens, so a client (or a readiness
 * probe) that finds a port open finds the socket files made as well, as
 * with nginx, whose master binds every address before a worker accepts.
 */
export function bindOrder<G extends { readonly unixPath: string | undefined }>(groups: Iterable<G>): G[] {
  const all = [...groups];
  return [...all.filter((g) => g.unixPath !== undefined), ...all.filter((g) => g.unixPath === undefined)];
}

/**
 * Binds every address of `groups` (`bindListener`, once each: a worker's
 * master has bound them already) into an `EarlyListener`, by `listenKey`.
 * @throws ConfigError for the first that cannot be bound, the others closed
 */
export async function listenEarly(groups: readonly ListenGroup[]): Promise<Map<string, EarlyListener>> {
  const out = new Map<string, EarlyListener>();
  try {
    for (const group of bindOrder(groups)) {
      const early = new EarlyListener();
      await bindListener({ front: early.server, tls: undefined }, group);
      out.set(listenKey(group), early);
    }
  } catch (err) {
    for (const early of out.values()) early.server.close();
    throw err;
  }
  return out;
}
