/**
 * The stream module's variables (`src/stream/ngx_stream_variables.c`,
 * `ngx_stream_upstream.c`'s `$upstream_*`, `ngx_stream_realip_module.c`'s
 * `$realip_remote_*`), read off a `StreamView`.
 */
import { hostname } from 'node:os';
import { NGINX_VERSION } from '../../version.js';
import type { StreamUpstreamState, StreamView } from '../stream-view.js';
import type { VariableDef } from '../variables.js';
import type { ClientCertificateView } from '../request-view.js';
import { proxyProtocolTlv } from '../proxy-protocol-tlv.js';
import { binaryAddress, timeIso8601, timeLocal } from './http-variables.js';

/** `%T.%03M`: seconds with milliseconds. */
const seconds = (ms: number): string => `${Math.floor(ms / 1000)}.${String(ms % 1000).padStart(3, '0')}`;

/**
 * `ngx_stream_upstream_addr_variable` and its kin: one value per server
 * tried, joined with `, `; not found before any server was tried.
 */
function perUpstream(s: StreamView, value: (u: StreamUpstreamState) => string): string | undefined {
  if (s.upstreams.length === 0) return undefined;
  return s.upstreams.map(value).join(', ');
}

/** `ngx_stream_upstream_response_time_variable`: `-` for a time not reached. */
const time = (ms: number | undefined): string => (ms === undefined ? '-' : seconds(ms));

/** The client certificate, when the server asks for one (`ssl_verify_client`) and the client sent one. */
function clientCertificate(s: StreamView): ClientCertificateView | undefined {
  if (!s.tlsServer || s.tlsServer.verifyClient === 'off') return undefined;
  return s.tls?.clientCertificate;
}

/** `ngx_stream_ssl_vars` (`src/stream/ngx_stream_ssl_module.c`): as http's, not found without TLS. */
const sslVariables: readonly VariableDef<StreamView>[] = [
  { name: 'ssl_protocol', get: (s) => s.tls?.protocol, changeable: true },
  { name: 'ssl_cipher', get: (s) => s.tls?.cipher, changeable: true },
  { name: 'ssl_ciphers', get: (s) => s.tls?.ciphers, changeable: true },
  { name: 'ssl_curve', get: (s) => s.tls?.curve(s.tlsServer?.preferServerCiphers ?? false, s.tlsServer?.ecdhCurve), changeable: true },
  { name: 'ssl_curves', get: (s) => s.tls?.curves, changeable: true },
  { name: 'ssl_session_id', get: (s) => s.tls?.sessionId, changeable: true },
  { name: 'ssl_session_reused', get: (s) => (s.tls ? (s.tls.sessionReused ? 'r' : '.') : undefined), changeable: true },
  { name: 'ssl_server_name', get: (s) => s.tls?.serverName, changeable: true },
  { name: 'ssl_alpn_protocol', get: (s) => s.tls?.alpnProtocol, changeable: true },
  { name: 'ssl_client_cert', get: (s) => clientCertificate(s)?.tabbed, changeable: true },
  { name: 'ssl_client_raw_cert', get: (s) => clientCertificate(s)?.raw, changeable: true },
  { name: 'ssl_client_escaped_cert', get: (s) => clientCertificate(s)?.escaped, changeable: true },
  { name: 'ssl_client_s_dn', get: (s) => clientCertificate(s)?.subject || undefined, changeable: true },
  { name: 'ssl_client_i_dn', get: (s) => clientCertificate(s)?.issuer || undefined, changeable: true },
  { name: 'ssl_client_serial', get: (s) => clientCertificate(s)?.serial, changeable: true },
  { name: 'ssl_client_fingerprint', get: (s) => clientCertificate(s)?.fingerprint, changeable: true },
  { name: 'ssl_client_verify', get: (s) => (s.tls ? (clientCertificate(s) ? s.tls.verifyResult : 'NONE') : undefined), changeable: true },
  { name: 'ssl_client_v_start', get: (s) => clientCertificate(s)?.validFrom, changeable: true },
  { name: 'ssl_client_v_end', get: (s) => clientCertificate(s)?.validTo, changeable: true },
  // ngx_stream_ssl_preread_vars: not found unless the preread phase read a ClientHello
  { name: 'ssl_preread_protocol', get: (s) => s.preread?.protocol },
  { name: 'ssl_preread_server_name', get: (s) => s.preread?.serverName },
  { name: 'ssl_preread_alpn_protocols', get: (s) => s.preread?.alpnProtocols },
  { name: 'ssl_client_v_remain', get: (s) => clientCertificate(s)?.daysLeft(Date.now()), changeable: true },
];

/** The stream module's variables, with those of `ngx_stream_ssl_module`. */
export const streamVariables: readonly VariableDef<StreamView>[] = [
  { name: 'binary_remote_addr', get: (s) => binaryAddress(s.remoteAddr) },
  { name: 'remote_addr', get: (s) => s.remoteAddr },
  { name: 'remote_port', get: (s) => (s.remotePort === 0 ? '' : String(s.remotePort)) },
  { name: 'realip_remote_addr', get: (s) => s.peerAddr },
  { name: 'realip_remote_port', get: (s) => (s.peerPort === 0 ? '' : String(s.peerPort)) },
  { name: 'proxy_protocol_addr', get: (s) => s.proxyProtocol?.srcAddr },
  { name: 'proxy_protocol_port', get: (s) => (s.proxyProtocol ? String(s.proxyProtocol.srcPort) : undefined) },
  { name: 'proxy_protocol_server_addr', get: (s) => s.proxyProtocol?.dstAddr },
  { name: 'proxy_protocol_server_port', get: (s) => (s.proxyProtocol ? String(s.proxyProtocol.dstPort) : undefined) },
  // ngx_stream_variable_proxy_protocol_tlv: a TLV of the session's PROXY protocol v2 header, by name or 0x type
  { name: 'proxy_protocol_tlv_', prefix: true, get: (s, name) => (s.proxyProtocol ? proxyProtocolTlv(s.proxyProtocol, name).value?.toString('latin1') : undefined) },
  { name: 'server_addr', get: (s) => s.serverAddr },
  { name: 'server_name', get: (s) => s.serverName },
  { name: 'server_port', get: (s) => (s.serverPort === 0 ? '' : String(s.serverPort)) },
  { name: 'bytes_sent', get: (s) => String(s.bytesSent) },
  { name: 'bytes_received', get: (s) => String(s.bytesReceived) },
  { name: 'session_time', get: (s) => seconds(Math.max(0, Date.now() - s.startMs)) },
  { name: 'status', get: (s) => String(s.status).padStart(3, '0') },
  { name: 'connection', get: (s) => String(s.connectionId) },
  { name: 'nginx_version', get: () => NGINX_VERSION },
  { name: 'hostname', get: () => hostname() },
  { name: 'pid', get: () => String(process.pid) },
  { name: 'msec', get: () => (Date.now() / 1000).toFixed(3) },
  { name: 'time_iso8601', get: () => timeIso8601(Date.now()) },
  { name: 'time_local', get: () => timeLocal(Date.now()) },
  { name: 'protocol', get: (s) => (s.udp ? 'UDP' : 'TCP') },
  { name: 'upstream_addr', get: (s) => perUpstream(s, (u) => u.peer) },
  { name: 'upstream_bytes_sent', get: (s) => perUpstream(s, (u) => String(u.bytesSent)) },
  { name: 'upstream_bytes_received', get: (s) => perUpstream(s, (u) => String(u.bytesReceived)) },
  { name: 'upstream_connect_time', get: (s) => perUpstream(s, (u) => time(u.connectMs)) },
  { name: 'upstream_first_byte_time', get: (s) => perUpstream(s, (u) => time(u.firstByteMs)) },
  { name: 'upstream_session_time', get: (s) => perUpstream(s, (u) => time(u.sessionMs)) },
  ...sslVariables,
];
