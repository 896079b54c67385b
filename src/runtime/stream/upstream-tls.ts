/**
 * TLS to a stream upstream (`ngx_stream_proxy_ssl_init_connection`,
 * `ngx_stream_proxy_ssl_name`, `ngx_stream_proxy_ssl_handshake` in
 * `src/stream/ngx_stream_proxy_module.c`): the handshake on a connected
 * socket, SNI only with `proxy_ssl_server_name on` and never for an IP
 * address, with `proxy_ssl_verify` the chain then the name checked as
 * http's proxy checks them, and a session kept per peer for the next
 * connection unless `proxy_ssl_session_reuse off`.
 */
import type { Socket } from 'node:net';
import { isIP } from 'node:net';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import type { StreamUpstreamTls } from '../../config/modules/stream-proxy-ssl.js';
import { mapUpstreamError } from '../upstream/errors.js';
import { peerChain, sslName, upstreamTlsOptions, verifyPeer, type PeerChain } from '../upstream/tls.js';
import type { StreamSession } from './session.js';

/** The last session of each peer, by settings (nginx keeps it in the peer, `ngx_stream_upstream_set_round_robin_peer_session`). */
const sessions = new WeakMap<StreamUpstreamTls, Map<string, { readonly session: Buffer; readonly peer: PeerChain | undefined }>>();

/** What became of a handshake: the secured socket, or the line to log (its level, and the message without ` while …`). */
export type UpstreamHandshake = { readonly socket: TLSSocket } | { readonly level: 'error' | 'crit' | 'info'; readonly message: string };

/**
 * Runs the TLS handshake on `raw` (connected to `peerName`) for a session
 * whose upstream group is `groupName`; `done` once it completed and passed
 * the checks, or failed (the caller tries the next upstream).
 */
export function upstreamHandshake(
  s: StreamSession, raw: Socket, tls: StreamUpstreamTls, peerName: string, groupName: string, done: (r: UpstreamHandshake) => void,
): void {
  const name = sslName(tls.name ? tls.name.evaluate(s) : groupName);
  const sni = tls.serverName && name !== '' && isIP(name.replace(/^\[|\]$/g, '')) === 0 ? name : undefined;
  let kept = sessions.get(tls);
  if (!kept) sessions.set(tls, (kept = new Map()));
  const previous = tls.sessionReuse ? kept.get(peerName) : undefined;
  const socket = tlsConnect({
    socket: raw,
    ...(sni ? { servername: sni } : {}),
    ...upstreamTlsOptions(tls),
    ...(previous ? { session: previous.session } : {}),
  });
  let settled = false;
  let peer: PeerChain | undefined;
  if (tls.sessionReuse) {
    socket.on('session', (session: Buffer) => kept!.set(peerName, { session, peer: peer ?? peerChain(socket) }));
  }
  socket.once('secureConnect', () => {
    settled = true;
    peer = peerChain(socket) ?? (socket.isSessionReused() ? previous?.peer : undefined);
    const failure = tls.verify ? verifyPeer(socket, name, tls.verifyDepth, peer) : undefined;
    if (failure) {
      kept!.delete(peerName);
      socket.destroy();
      const f = mapUpstreamError(failure, 'connect');
      done({ level: 'error', message: f.message });
      return;
    }
    done({ socket });
  });
  socket.once('error', (err: Error & { code?: string }) => {
    if (settled) return;
    settled = true;
    socket.destroy();
    if (err.code === 'ECONNRESET' && (err as NodeJS.ErrnoException).syscall === undefined) {
      done({ level: 'info', message: 'peer closed connection in SSL handshake' });
      return;
    }
    const f = mapUpstreamError(err, 'connect');
    done({ level: f.level ?? 'error', message: f.message });
  });
}
