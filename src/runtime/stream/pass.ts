/**
 * The content handler of `pass` (`ngx_stream_pass_handler`,
 * `src/stream/ngx_stream_pass_module.c`): the session's connection is handed
 * to the listening socket of this process whose address matches the one
 * `pass` names (`ngx_stream_pass_match`), whose handler then serves it as
 * a connection it accepted (http's, or another stream server's); the
 * session ends there, without an access-log line.
 */
import { isIP, type Socket } from 'node:net';
import { parsePassAddress, type PassAddress } from '../../config/modules/stream-pass.js';
import type { StreamContent } from '../../config/route-table.js';
import type { StreamSession } from './session.js';

/** `NGX_STREAM_PASS_MAX_PASSES`: how many times one connection may be passed. */
const MAX_PASSES = 10;

const OK = 200;
const INTERNAL_SERVER_ERROR = 500;

/** The passes each connection went through (`ngx_stream_pass_check_cycle`'s count on the connection's pool). */
const passes = new WeakMap<Socket, number>();

/** A listening socket's address, as `pass` compares it. */
export interface PassListen {
  readonly host: string;
  readonly port: number;
  readonly unixPath: string | undefined;
}

/**
 * Finds the listening socket (TCP, http or stream) whose address matches
 * `address`: a function that hands it a connection, or undefined when none does.
 */
export type PassTargets = (address: PassAddress) => ((socket: Socket) => void) | undefined;

/**
 * `ngx_stream_pass_match`: a wildcard listen (`0.0.0.0`, `::`) matches an
 * address of its family on its port, another listen its own address and port.
 */
export function passListenMatches(listen: PassListen, address: PassAddress): boolean {
  if (address.unixPath !== undefined || listen.unixPath !== undefined) return listen.unixPath === address.unixPath;
  if (listen.host === '0.0.0.0' || listen.host === '::') return isIP(listen.host) === isIP(address.host) && listen.port === address.port;
  return listen.host === address.host && listen.port === address.port;
}

/** An address as nginx prints it (`addr->name`): `127.0.0.1:80`, `[::1]:80`, `unix:/path`. */
function addressName(address: PassAddress): string {
  if (address.unixPath !== undefined) return `unix:${address.unixPath}`;
  return address.host.includes(':') ? `[${address.host}]:${address.port}` : `${address.host}:${address.port}`;
}

/**
 * Runs `pass` for a TCP session whose bytes come through `io` (the TLS
 * socket once its handshake completed, else the accepted one). The session
 * ends with 500 when the address (with variables) is not one (`… in pass
 * "URL"`, `no addresses in pass "URL"`, `no port in pass "URL"`), when the
 * preread phase read bytes off a TLS connection (`cannot pass connection
 * with preread data`: nginx peeks at a plain one), or after ten passes
 * (`stream pass cycle`); with 200 when no listening socket matches (`port
 * not found for "ADDR"`). Otherwise `detach` takes the session's handlers
 * off the connection, the connection's local address becomes the one
 * passed to (`c->local_sockaddr`), and the listening socket takes it,
 * with the connection's number (`c->number`).
 */
export function passSession(
  session: StreamSession, io: Socket, content: Extract<StreamContent, { kind: 'pass' }>, targets: PassTargets, detach: () => void,
): void {
  session.action = 'passing connection to port';
  if (session.tls && session.prereadBytes > 0) {
    session.log('error', 'cannot pass connection with preread data');
    session.finalize(INTERNAL_SERVER_ERROR);
    return;
  }
  let address = content.address;
  if (!address) {
    const url = content.value!.evaluate(session);
    const parsed = parsePassAddress(url);
    if (!('address' in parsed)) {
      session.log('error', 'err' in parsed ? `${parsed.err} in pass "${url}"` : `no ${parsed.missing} in pass "${url}"`);
      session.finalize(INTERNAL_SERVER_ERROR);
      return;
    }
    address = parsed.address;
  }
  const count = (passes.get(io) ?? 0) + 1;
  if (count > MAX_PASSES) {
    session.log('error', 'stream pass cycle');
    session.finalize(INTERNAL_SERVER_ERROR);
    return;
  }
  passes.set(io, count);
  const hand = targets(address);
  if (!hand) {
    session.log('error', `port not found for "${addressName(address)}"`);
    session.finalize(OK);
    return;
  }
  detach();
  session.passed(io);
  session.env.numbers.keep(io, session.connectionId);
  if (address.unixPath === undefined) {
    Object.defineProperty(io, 'localAddress', { value: address.host, configurable: true });
    Object.defineProperty(io, 'localPort', { value: address.port, configurable: true });
  }
  hand(io);
}
