/**
 * The stream module's variables (`src/stream/ngx_stream_variables.c`,
 * `ngx_stream_upstream.c`'s `$upstream_*`, `ngx_stream_realip_module.c`'s
 * `$realip_remote_*`), read off a `StreamView`.
 */
import { hostname } from 'node:os';
import { NGINX_VERSION } from '../../version.js';
import type { StreamUpstreamState, StreamView } from '../stream-view.js';
import type { VariableDef } from '../variables.js';
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
  { name: 'server_addr', get: (s) => s.serverAddr },
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
];
