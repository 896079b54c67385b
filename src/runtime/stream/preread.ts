/**
 * The preread phase with `ssl_preread on` (`ngx_stream_core_preread_phase`,
 * `ngx_stream_ssl_preread_handler`, `ngx_stream_ssl_preread_parse_record`):
 * the client's first bytes are read, up to `preread_buffer_size` and within
 * `preread_timeout`, until they hold a whole ClientHello (its version, SNI
 * name and ALPN protocols kept for `$ssl_preread_*`) or are not one; the
 * bytes are then left for the content phase.
 */
import type { Socket } from 'node:net';
import type { StreamPrereadConf } from '../../config/modules/stream-preread.js';
import type { StreamSession } from './session.js';

/** What was read of a ClientHello. */
export interface PrereadHello {
  readonly protocol: string;
  readonly serverName: string;
  readonly alpnProtocols: string;
}

/** `SSL_get_version()`'s names of the versions a ClientHello may show. */
function versionName(major: number, minor: number): string {
  if (major === 0 && minor === 2) return 'SSLv2';
  if (major !== 3) return '';
  return ['SSLv3', 'TLSv1', 'TLSv1.1', 'TLSv1.2', 'TLSv1.3'][minor] ?? '';
}

/**
 * Reads the ClientHello at the start of `bytes`: `again` while its records
 * are not all there, `declined` when the bytes are not a ClientHello nginx
 * can parse (the session goes on without `$ssl_preread_*`).
 */
export function readClientHello(bytes: Buffer): PrereadHello | 'again' | 'declined' {
  const parts: Buffer[] = [];
  let at = 0;
  while (bytes.length - at >= 5) {
    const p = bytes.subarray(at);
    if ((p[0]! & 0x80) && p[2] === 1 && (p[3] === 0 || p[3] === 3)) {
      // a version 2 ClientHello
      return { protocol: versionName(p[3]!, p[4]!), serverName: '', alpnProtocols: '' };
    }
    if (p[0] !== 0x16 || p[1] !== 3) return 'declined';
    const len = p.readUInt16BE(3);
    if (p.length < len + 5) break;
    parts.push(p.subarray(5, 5 + len));
    at += 5 + len;
    const hs = Buffer.concat(parts);
    if (hs.length >= 1 && hs[0] !== 1) return 'declined';
    if (hs.length >= 4 && hs.length >= 4 + hs.readUIntBE(1, 3)) return parseHello(hs.subarray(4, 4 + hs.readUIntBE(1, 3)));
  }
  return 'again';
}

/** The body of a ClientHello, as `ngx_stream_ssl_preread_parse_record` reads it. */
function parseHello(b: Buffer): PrereadHello | 'declined' {
  let major = b[0] ?? 0;
  let minor = b[1] ?? 0;
  let at = 2 + 32;
  const need = (n: number): boolean => at + n <= b.length;
  if (!need(1)) return 'declined';
  at += 1 + b[at]!;
  if (!need(2)) return 'declined';
  at += 2 + b.readUInt16BE(at);
  if (!need(1)) return 'declined';
  at += 1 + b[at]!;
  if (at > b.length) return 'declined';
  let serverName: string | undefined;
  let alpn: string[] | undefined;
  if (need(2)) at += 2;
  while (at < b.length) {
    if (!need(4)) return 'declined';
    const type = b.readUInt16BE(at);
    const len = b.readUInt16BE(at + 2);
    at += 4;
    if (!need(len)) return 'declined';
    const ext = b.subarray(at, at + len);
    at += len;
    if (type === 0 && serverName === undefined) {
      if (ext.length < 5 || ext[2] !== 0) return 'declined';
      const size = ext.readUInt16BE(3);
      if (ext.readUInt16BE(0) < 3 + size || ext.length < 5 + size) return 'declined';
      serverName = ext.toString('latin1', 5, 5 + size);
    } else if (type === 16 && alpn === undefined) {
      alpn = [];
      const total = ext.length >= 2 ? ext.readUInt16BE(0) : 0;
      for (let p = 2; p < 2 + total;) {
        const size = ext[p] ?? 0;
        if (size === 0 || p + 1 + size > 2 + total) return 'declined';
        alpn.push(ext.toString('latin1', p + 1, p + 1 + size));
        p += 1 + size;
      }
    } else if (type === 43) {
      major = 3;
      minor = 4;
    }
  }
  return { protocol: versionName(major, minor), serverName: serverName ?? '', alpnProtocols: alpn?.join(',') ?? '' };
}

/**
 * Runs the preread phase on `socket` (paused, nothing read yet): `done`
 * once it is over, with the bytes read put back for the content phase; a
 * full buffer is nginx's `preread buffer full` (400), `preread_timeout` or
 * the client's close end the session (200).
 */
export function prereadPhase(session: StreamSession, socket: Socket, conf: StreamPrereadConf, done: () => void): void {
  const chunks: Buffer[] = [];
  let size = 0;
  const finish = (status: number | undefined): void => {
    clearTimeout(timer);
    socket.off('data', onData);
    socket.off('end', onEnd);
    socket.pause();
    if (status !== undefined) {
      session.finalize(status);
      return;
    }
    session.prereadBytes = size;
    if (size > 0) socket.unshift(Buffer.concat(chunks, size));
    done();
  };
  const onData = (chunk: Buffer): void => {
    const room = conf.bufferBytes - size;
    const taken = chunk.length > room ? chunk.subarray(0, room) : chunk;
    chunks.push(taken);
    size += taken.length;
    const all = Buffer.concat(chunks, size);
    const hello = readClientHello(all);
    if (hello === 'again' && size >= conf.bufferBytes) {
      session.log('error', 'preread buffer full');
      finish(400);
      return;
    }
    if (hello === 'again') return;
    if (hello !== 'declined') {
      session.preread = hello;
      // ngx_stream_ssl_preread_servername
      session.selectServer(hello.serverName);
    }
    if (chunk.length > taken.length) {
      chunks.push(chunk.subarray(taken.length));
      size += chunk.length - taken.length;
    }
    finish(undefined);
  };
  const onEnd = (): void => finish(200);
  const timer = setTimeout(() => finish(200), conf.timeoutMs);
  socket.on('data', onData);
  socket.once('end', onEnd);
  socket.resume();
}
