/**
 * A stream session (`ngx_stream_session_t`, `src/stream/ngx_stream_handler.c`
 * and `ngx_stream_core_module.c`): a TCP connection or the datagrams of one
 * UDP client, with what its variables read, its error-log context
 * (`ngx_stream_log_error`: ` while ACTION, client: ADDR, server: LISTEN`,
 * then the proxy's `, upstream: "…", bytes from/to client:…`), its phases
 * (PROXY protocol, realip, `set`, `allow`/`deny`, content) and its end
 * (`ngx_stream_finalize_session`: the access log, then the connection closed).
 */
import { cidrContains } from '../../config/cidr.js';
import type { ProxyProtocolHeader } from '../../config/proxy-protocol-tlv.js';
import type { StreamAccessLog, StreamListenGroup, StreamServer, StreamTable } from '../../config/route-table.js';
import type { StreamUpstreamState, StreamView } from '../../config/stream-view.js';
import type { StreamTlsConf } from '../../config/modules/stream-ssl.js';
import type { TlsView } from '../../config/request-view.js';
import type { AccessLogFiles } from '../../log/access-log.js';
import type { ErrorLogFiles } from '../../log/error-log.js';
import type { LogLevel } from '../../log/levels.js';
import { appendFileSync } from 'node:fs';
import type { Socket } from 'node:net';
import { TLSSocket } from 'node:tls';
import { systemErrorText } from '../../os-errors.js';
import type { ConnectionNumbers } from '../connection-numbers.js';
import type { LimitConnStore } from '../limit-conn-zones.js';
import type { NameResolver } from '../upstream/resolver.js';
import type { RoundRobin } from '../upstream/round-robin.js';

/** What the sessions of one configuration use. */
export interface StreamEnv {
  readonly table: StreamTable;
  readonly errorLog: ErrorLogFiles;
  readonly accessLog: AccessLogFiles;
  readonly resolver: NameResolver;
  readonly roundRobin: RoundRobin;
  readonly numbers: ConnectionNumbers;
  /** The `limit_conn_zone` counts (of the process, or of every worker through the master). */
  readonly limitConn: LimitConnStore;
  /** Whether the server is stopping or the configuration was replaced (nginx's `ngx_exiting`). */
  exiting(): boolean;
}

/** The client side of a session: a TCP socket, or a UDP client's datagrams. */
export interface StreamClient {
  /** Sends bytes (a datagram for UDP); `done` once written. Returns false when the caller should wait for `drain`. */
  write(bytes: Buffer, done?: (err?: Error | null) => void): boolean;
  /** Whether bytes written are still held to be sent (a write not done at once): their buffer must not change until its `done`. */
  holding(): boolean;
  /** Stops reading (TCP) until `resume`. */
  pause(): void;
  resume(): void;
  /** Closes the connection once what was written is sent (TCP), or forgets the client (UDP). */
  close(): void;
  /** Shuts the connection's sending side once what was written is sent (`proxy_half_close`; TCP only). */
  shutdown(): void;
  /** Closes at once. */
  destroy(): void;
}

const IPV4_MAPPED = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/;

/** An address as `ngx_sock_ntop` prints it, without its port. */
export const plainAddr = (a: string | undefined): string => (a ? IPV4_MAPPED.exec(a)?.[1] ?? a : '');

/** An address with its port (`ngx_sock_ntop(…, 1)`): `127.0.0.1:5000`, `[::1]:5000`, `unix:` without one. */
export const addrWithPort = (addr: string, port: number): string =>
  (addr.startsWith('unix:') ? addr : addr.includes(':') ? `[${addr}]:${port}` : `${addr}:${port}`);

/**
 * `ngx_close_connection` of a session's connection: a plain TCP socket with
 * nothing left to write is closed at once (the kernel sends what it holds,
 * then the FIN, as nginx's close() without a shutdown()); one with bytes
 * still to write, already shut for writing, or a TLS one (its close_notify
 * first) is closed once they are written.
 */
export function closeConnection(sock: Socket): void {
  if (sock.writableLength === 0 && !sock.writableEnded && !sock.connecting && !(sock instanceof TLSSocket)) sock.destroy();
  else sock.destroySoon();
}

/** A session of the stream module. */
export class StreamSession implements StreamView {
  readonly vars: (string | undefined)[];
  captures: RegExpExecArray | null = null;
  readonly connectionId: number;
  remoteAddr: string;
  remotePort: number;
  readonly startMs = Date.now();
  bytesReceived = 0;
  bytesSent = 0;
  status = 200;
  readonly upstreams: StreamUpstreamState[] = [];
  proxyProtocol: ProxyProtocolHeader | undefined;
  /** nginx's `c->log->action`. */
  action: string | undefined = 'initializing connection';
  /** The proxy's part of the error-log context (`ngx_stream_proxy_log_error`), once it runs. */
  upstreamContext: (() => string) | undefined;
  /** Called when the session ends, before the access log (the proxy closes its upstream). */
  onFinalize: ((status: number) => void) | undefined;
  finalized = false;
  /** What `ssl_preread` read of the ClientHello. */
  preread: StreamView['preread'];
  /** Bytes the preread phase read (nginx's `c->buffer`; it peeks at a plain connection instead, `ngx_stream_preread_can_peek`). */
  prereadBytes = 0;
  /** The TLS handshake's results, once it completed (`listen … ssl`). */
  tls: TlsView | undefined;

  /** `$server_name`. */
  get serverName(): string {
    return this.server.name;
  }
  /** `$limit_conn_status`. */
  limitConnStatus: string | undefined;
  /** Run once the session has ended and been logged (nginx's pool cleanups: limit_conn's counts). */
  readonly cleanups: (() => void)[] = [];

  /**
   * `ngx_stream_find_virtual_server` for an SNI name: the server of the
   * address whose `server_name` matches it (exact, `*.` and `.` wildcards
   * longest first, `.*` wildcards, then regexes in order, their named
   * captures set) becomes the session's; none leaves the server as it is.
   * An empty name or one `ngx_stream_validate_host` refuses matches nothing.
   */
  selectServer(name: string): void {
    const host = name.toLowerCase().replace(/\.$/, '');
    if (host === '' || host.startsWith('.') || /[\/\\\0]|\.\./.test(host)) return;
    const names = this.group.names;
    let found = names.exact.get(host);
    found ??= names.heads.find(([suffix]) => host.length > suffix.length && host.endsWith(suffix))?.[1];
    found ??= names.tails.find(([prefix]) => host.length > prefix.length && host.startsWith(prefix))?.[1];
    if (!found) {
      for (const r of names.regexes) {
        const m = r.regex.exec(host);
        if (!m) continue;
        this.captures = m;
        for (const c of r.captures) this.vars[c.index] = m.groups?.[c.name] ?? '';
        found = r.server;
        break;
      }
    }
    if (found) this.server = found;
  }

  /** `ssl_verify_client` and the settings of `$ssl_curve`, of the session's server. */
  get tlsServer(): StreamTlsConf | undefined {
    return this.server.tls;
  }

  /**
   * @param server the server of the address the client came to (an SNI name may choose another one: `selectServer`)
   * @param addrText that address as nginx prints it (`addr_conf->addr_text`)
   */
  constructor(
    readonly env: StreamEnv,
    readonly group: StreamListenGroup,
    public server: StreamServer,
    readonly addrText: string,
    readonly client: StreamClient,
    readonly udp: boolean,
    readonly peerAddr: string,
    readonly peerPort: number,
    readonly serverAddr: string,
    readonly serverPort: number,
  ) {
    this.vars = new Array<string | undefined>(env.table.variableCount);
    this.connectionId = env.numbers.next();
    this.remoteAddr = peerAddr;
    this.remotePort = peerPort;
  }

  /** `ngx_stream_log_error`'s context of a line. */
  private context(): string {
    const action = this.action ? ` while ${this.action}` : '';
    return `${action}, ${this.udp ? 'udp ' : ''}client: ${this.remoteAddr}, server: ${this.group.addrText}${this.upstreamContext?.() ?? ''}`;
  }

  /** Whether a line at `level` goes to one of the server's error logs at least (a caller skips building one that none takes). */
  logs(level: LogLevel): boolean {
    return this.env.errorLog.admits(this.server.errorLogs, level);
  }

  /** Writes a line to the server's error logs, with the session's context unless `bare` (nginx's lines with `c->log->handler = NULL`). */
  log(level: LogLevel, message: string, bare = false): void {
    if (!this.logs(level)) return;
    this.env.errorLog.write(this.server.errorLogs, level, message, this.connectionId, bare ? '' : this.context());
  }

  /**
   * `ngx_connection_error`: `MESSAGE (ERRNO: TEXT)`, at info for the
   * errors of a broken or timed-out connection on the client's side (its
   * `log_error` is `NGX_ERROR_INFO`), at error on the upstream's.
   */
  connectionError(err: unknown, message: string, upstream: boolean): void {
    const code = (err as NodeJS.ErrnoException)?.code;
    const quiet = ['ECONNRESET', 'EPIPE', 'ENOTCONN', 'ETIMEDOUT', 'ECONNREFUSED', 'ENETDOWN', 'ENETUNREACH', 'EHOSTDOWN', 'EHOSTUNREACH'].includes(code ?? '');
    this.log(quiet && !upstream ? 'info' : 'error', `${message} (${systemErrorText(err)})`);
  }

  /** The first line of a session (`ngx_stream_init_connection`). */
  logConnected(): void {
    if (!this.logs('info')) return;
    const text = `*${this.connectionId} ${this.udp ? 'udp ' : ''}client ${addrWithPort(this.peerAddr, this.peerPort)} connected to ${this.addrText}`;
    this.env.errorLog.write(this.server.errorLogs, 'info', text, undefined, '');
  }

  /**
   * `ngx_stream_realip_handler`: with `set_real_ip_from` matching the
   * connection's peer, the PROXY protocol header's address replaces the client's.
   */
  applyRealIp(): void {
    const pp = this.proxyProtocol;
    if (!pp || this.server.realIpFrom.length === 0) return;
    const trusted = this.server.realIpFrom.some((c) => (c === 'unix' ? this.peerAddr === 'unix:' : cidrContains(c, this.peerAddr)));
    if (!trusted) return;
    this.remoteAddr = pp.srcAddr;
    this.remotePort = pp.srcPort;
  }

  /** `ngx_stream_set_handler`: each `set` of the server, in order. */
  runSets(): void {
    for (const s of this.server.sets) this.vars[s.index] = s.value.evaluate(this);
  }

  /**
   * `ngx_stream_access_handler`: the first rule matching the client decides;
   * a deny is `access forbidden by rule` (error) and the status 403.
   * @returns whether the session may go on
   */
  checkAccess(): boolean {
    for (const rule of this.server.access) {
      const matches = rule.all
        || (rule.family === 'unix' ? this.remoteAddr === 'unix:'
          : cidrContains({ family: rule.family as 'ipv4' | 'ipv6', bytes: rule.addr, prefixLength: rule.prefixLength }, this.remoteAddr));
      if (!matches) continue;
      if (rule.allow) return true;
      this.log('error', 'access forbidden by rule');
      return false;
    }
    return true;
  }

  /** `ngx_stream_finalize_session`: the status, the proxy's end, the access log, then the connection is closed. */
  finalize(status: number): void {
    if (this.finalized) return;
    this.finalized = true;
    this.status = status;
    this.onFinalize?.(status);
    this.writeAccessLog();
    this.client.close();
    for (const c of this.cleanups) c();
  }

  /**
   * The connection went to another listening socket (`pass`): the session
   * ends without an access-log line; its cleanups (limit_conn's counts, on
   * the connection's pool in nginx) run when `socket` closes.
   */
  passed(socket: Socket): void {
    this.finalized = true;
    socket.once('close', () => {
      for (const c of this.cleanups) c();
    });
  }

  /** `ngx_stream_log_handler`: each `access_log` whose `if=` holds. */
  private writeAccessLog(): void {
    for (const t of this.server.accessLogs) {
      if (t.condition) {
        const c = t.condition.evaluate(this);
        if (c === '' || c === '0') continue;
      }
      const line = t.format.render(this) + '\n';
      if (t.pathValue) this.writeNamed(t, line);
      else this.env.accessLog.writeLine(t, line);
    }
  }

  /** `ngx_stream_log_script_write`: a file named by variables, opened for the line. */
  private writeNamed(t: StreamAccessLog, line: string): void {
    const path = t.pathValue!.evaluate(this);
    try {
      appendFileSync(path, Buffer.from(line, 'latin1'), { mode: 0o644 });
    } catch (err) {
      this.log('crit', `open() "${path}" failed (${systemErrorText(err)})`);
    }
  }
}
