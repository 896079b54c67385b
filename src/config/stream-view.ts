/**
 * What the stream module's variables, `map`s and log formats read of a
 * session (`ngx_stream_session_t`): the runtime's stream session implements
 * it, as `HttpRequestState` implements `RequestView`.
 */
import type { ProxyProtocolHeader } from './proxy-protocol-tlv.js';
import type { TlsView } from './request-view.js';

/** One upstream server tried by a session (`ngx_stream_upstream_state_t`). */
export interface StreamUpstreamState {
  /** The peer's name (`127.0.0.1:8081`), or the upstream's name when no peer was found. */
  readonly peer: string;
  /** ms from the start of the attempt; undefined: not connected (`-`). */
  connectMs: number | undefined;
  firstByteMs: number | undefined;
  sessionMs: number | undefined;
  bytesSent: number;
  bytesReceived: number;
}

/** A stream session as its variables see it. */
export interface StreamView {
  /** Indexed variables (`set`, `map`). */
  readonly vars: (string | undefined)[];
  captures: RegExpExecArray | null;
  /** `$connection`. */
  readonly connectionId: number;
  /** `$protocol`: `TCP` or `UDP`. */
  readonly udp: boolean;
  /** `$remote_addr` and `$remote_port`, after `set_real_ip_from` (`unix:` and 0 on a unix domain socket). */
  readonly remoteAddr: string;
  readonly remotePort: number;
  /** `$realip_remote_addr` and `$realip_remote_port`: the peer of the connection. */
  readonly peerAddr: string;
  readonly peerPort: number;
  /** `$server_addr`, `$server_port`. */
  readonly serverAddr: string;
  readonly serverPort: number;
  /** What the PROXY protocol header said. */
  readonly proxyProtocol: ProxyProtocolHeader | undefined;
  /** When the session started, ms since the epoch. */
  readonly startMs: number;
  /** `$bytes_received`, `$bytes_sent`: of the client connection. */
  readonly bytesReceived: number;
  readonly bytesSent: number;
  /** `$status`: 200, 400, 403, 500, 502, 503. */
  readonly status: number;
  /** The upstream servers tried, in order. */
  readonly upstreams: readonly StreamUpstreamState[];
  /** What the TLS handshake of a `listen … ssl` connection settled, once it completed (`$ssl_*`). */
  readonly tls: TlsView | undefined;
  /** `$server_name`: the first `server_name` of the session's server. */
  readonly serverName: string;
  /** What `ssl_preread` read of the ClientHello (`$ssl_preread_*`); undefined when it read none. */
  readonly preread: { readonly protocol: string; readonly serverName: string; readonly alpnProtocols: string } | undefined;
  /** `ssl_verify_client` of the session's server (`$ssl_client_*` are empty without it) and `$ssl_curve`'s settings. */
  readonly tlsServer: { readonly verifyClient: string; readonly preferServerCiphers: boolean; readonly ecdhCurve: string } | undefined;
  /** `$limit_conn_status`: `PASSED`, `REJECTED`, `REJECTED_DRY_RUN`; undefined until limit_conn counted the session. */
  readonly limitConnStatus: string | undefined;
}
