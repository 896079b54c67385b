/**
 * The one place jinx reads a private field of a Node.js object: the TCP
 * socket under a client's TLS socket.
 */
import type { Socket } from 'node:net';

/**
 * The accepted TCP socket a TLS socket runs over, or `socket` itself when
 * it is not a TLS socket. A server-side `tls.TLSSocket` is made by
 * `tls.Server` from the socket its `connection` event is given, and Node.js
 * 20 has no public way back to that socket: `lib/_tls_wrap.js` keeps it in
 * the private `_parent` (`null` on a plain `net.Socket`), read here only.
 */
export function tcpSocketOf(socket: Socket): Socket {
  return (socket as Socket & { _parent?: Socket | null })._parent ?? socket;
}
