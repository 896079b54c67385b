/**
 * Upstream servers for proxy tests: an echo server that answers with what it
 * received (method, target, headers in order, body) and counts the TCP
 * connections it accepted; a raw TCP server whose answers a test scripts
 * (silence, slowness, resets, oversized headers); a listening port that never
 * accepts, so that connecting to it times out; a WebSocket echo server; a
 * DNS server over UDP; an HTTPS server that tells what it saw of the TLS
 * connection.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createSocket } from 'node:dgram';
import { once } from 'node:events';
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer, type ServerOptions } from 'node:https';
import { connect, createServer as createNetServer, type AddressInfo, type Server, type Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { onCleanup, startUpstream } from './harness.js';

/** What an echo upstream saw of one request. */
export interface Echo {
  readonly name: string;
  readonly method: string;
  readonly url: string;
  readonly httpVersion: string;
  /** Header name/value pairs as received (original case and order). */
  readonly headers: readonly [string, string][];
  readonly bodyLength: number;
  readonly bodySha1: string;
  readonly body: string;
}

export interface EchoUpstream {
  readonly port: number;
  /** TCP connections accepted so far. */
  connections(): number;
  /** Requests received so far. */
  readonly seen: Echo[];
}

/**
 * Starts an upstream that answers every request with 200 and its `Echo` as
 * JSON (`Content-Type: application/json`). `respond` may answer instead
 * (return true when it did).
 */
export async function echoUpstream(name: string, respond?: (req: IncomingMessage, res: ServerResponse, echo: Echo) => boolean): Promise<EchoUpstream> {
  const seen: Echo[] = [];
  let connections = 0;
  const up = await startUpstream((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const headers: [string, string][] = [];
      for (let i = 0; i < req.rawHeaders.length; i += 2) headers.push([req.rawHeaders[i]!, req.rawHeaders[i + 1]!]);
      const echo: Echo = {
        name, method: req.method ?? '', url: req.url ?? '', httpVersion: req.httpVersion, headers,
        bodyLength: body.length, bodySha1: createHash('sha1').update(body).digest('hex'), body: body.toString('latin1').slice(0, 200),
      };
      seen.push(echo);
      if (respond?.(req, res, echo)) return;
      const text = JSON.stringify(echo);
      res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
      res.end(text);
    });
  });
  up.server.on('connection', () => { connections++; });
  return { port: up.port, connections: () => connections, seen };
}

/** Parses an echo response body. */
export const echoOf = (body: string): Echo => JSON.parse(body) as Echo;

/** A raw TCP upstream whose answer to each request a test scripts. */
export interface ScriptedUpstream {
  readonly port: number;
  /** Requests (request lines) received so far. */
  readonly requestLines: string[];
}

/**
 * Starts a TCP server on 127.0.0.1 that reads each connection's request head
 * and hands the request line and socket to `answer`, which writes (or does
 * not write) whatever the case needs. Stopped, with its sockets, at cleanup.
 */
export async function scriptedUpstream(answer: (requestLine: string, socket: Socket) => void): Promise<ScriptedUpstream> {
  const sockets = new Set<Socket>();
  const requestLines: string[] = [];
  const server = createNetServer((sock) => {
    sockets.add(sock);
    sock.on('close', () => sockets.delete(sock));
    sock.on('error', () => undefined);
    let head = '';
    const onData = (d: Buffer): void => {
      head += d.toString('latin1');
      if (!head.includes('\r\n\r\n')) return;
      sock.off('data', onData);
      const line = head.slice(0, head.indexOf('\r\n'));
      requestLines.push(line);
      answer(line, sock);
    };
    sock.on('data', onData);
  });
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
  onCleanup(() => new Promise<void>((res) => {
    for (const s of sockets) s.destroy();
    server.close(() => res());
  }));
  return { port: (server.address() as AddressInfo).port, requestLines };
}

/** How a test DNS server answers: an A record, NXDOMAIN, or never. */
export type DnsBehaviour = { readonly a: string } | 'nxdomain' | 'silent';

/**
 * Starts a DNS server over UDP on 127.0.0.1 answering every query as
 * `behaviour` says (RFC 1035 messages built by hand: the question is echoed,
 * an A answer has TTL 60). Returns its port; stopped at cleanup.
 */
export async function dnsServer(behaviour: DnsBehaviour): Promise<number> {
  const sock = createSocket('udp4');
  sock.on('message', (msg, rinfo) => {
    if (behaviour === 'silent' || msg.length < 12) return;
    let end = 12;
    while (end < msg.length && msg[end] !== 0) end += msg[end]! + 1;
    const question = msg.subarray(12, end + 5);
    const header = Buffer.alloc(12);
    msg.copy(header, 0, 0, 2);
    const nx = behaviour === 'nxdomain';
    header.writeUInt16BE(0x8180 | (nx ? 3 : 0), 2);
    header.writeUInt16BE(1, 4);
    header.writeUInt16BE(nx ? 0 : 1, 6);
    const parts = [header, question];
    if (!nx) {
      const answer = Buffer.alloc(16);
      answer.writeUInt16BE(0xc00c, 0);
      answer.writeUInt16BE(1, 2);
      answer.writeUInt16BE(1, 4);
      answer.writeUInt32BE(60, 6);
      answer.writeUInt16BE(4, 10);
      behaviour.a.split('.').forEach((octet, i) => answer.writeUInt8(Number(octet), 12 + i));
      parts.push(answer);
    }
    sock.send(Buffer.concat(parts), rinfo.port, rinfo.address);
  });
  await new Promise<void>((res) => sock.bind(0, '127.0.0.1', () => res()));
  onCleanup(() => new Promise<void>((res) => sock.close(() => res())));
  return sock.address().port;
}

/**
 * A port where connecting times out: a child process listens with a backlog
 * of one and blocks its event loop, so it never accepts; two connections
 * made here fill the accept queue, and the kernel drops the SYNs of the next
 * ones. Stopped by the test's cleanup.
 */
export async function unacceptingPort(): Promise<number> {
  const script = `const s = require('node:net').createServer();
s.listen({ port: 0, host: '127.0.0.1', backlog: 1 }, () => process.stdout.write(s.address().port + '\\n',
  () => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 300000)));`;
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const fillers: Socket[] = [];
  onCleanup(() => {
    for (const f of fillers) f.destroy();
    child.kill('SIGKILL');
  });
  const [line] = (await once(child.stdout!, 'data')) as [Buffer];
  const port = Number(line.toString().trim());
  for (let i = 0; i < 2; i++) {
    const sock = connect(port, '127.0.0.1');
    sock.on('error', () => undefined);
    fillers.push(sock);
    await once(sock, 'connect');
  }
  return port;
}

/** A WebSocket echo upstream: what it saw of each handshake, and how many of its connections are still open. */
export interface WsEchoUpstream {
  readonly port: number;
  /** Request headers of each handshake, lowercase names. */
  readonly handshakes: Record<string, string | string[] | undefined>[];
  /** Connections upgraded and not yet closed. */
  open(): number;
}

/**
 * Starts a WebSocket echo server (RFC 6455, a small subset: unfragmented
 * frames): it answers the handshake with 101, sends back every text or
 * binary message, answers a close frame with one and closes, and answers
 * `GET /ws/refuse` with 403 instead of upgrading.
 */
export async function wsEchoUpstream(): Promise<WsEchoUpstream> {
  const handshakes: Record<string, string | string[] | undefined>[] = [];
  const sockets = new Set<Socket>();
  const server = createHttpServer((_req, res) => {
    res.writeHead(426, { 'Content-Type': 'text/plain', 'Content-Length': '16' });
    res.end('upgrade needed\n\n');
  });
  server.on('upgrade', (req: IncomingMessage, socket: Socket) => {
    handshakes.push({ ...req.headers });
    socket.on('error', () => undefined);
    if (req.url === '/ws/refuse') {
      socket.end('HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: 7\r\nConnection: close\r\n\r\nrefused');
      return;
    }
    const accept = createHash('sha1').update(`${String(req.headers['sec-websocket-key'])}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`);
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    let buf = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      for (;;) {
        const frame = readWsFrame(buf);
        if (!frame) return;
        buf = buf.subarray(frame.size);
        if (frame.opcode === 8) {
          socket.end(wsFrame(8, frame.payload));
          return;
        }
        if (frame.opcode === 1 || frame.opcode === 2) socket.write(wsFrame(frame.opcode, frame.payload));
      }
    });
  });
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
  onCleanup(() => new Promise<void>((res) => {
    for (const s of sockets) s.destroy();
    server.close(() => res());
  }));
  return { port: (server.address() as AddressInfo).port, handshakes, open: () => sockets.size };
}

/** One frame from the start of `buf` (client frames are masked), or undefined when it is not complete. */
function readWsFrame(buf: Buffer): { opcode: number; payload: Buffer; size: number } | undefined {
  if (buf.length < 2) return undefined;
  const opcode = buf[0]! & 0x0f;
  const masked = (buf[1]! & 0x80) !== 0;
  let length = buf[1]! & 0x7f;
  let offset = 2;
  if (length === 126) {
    if (buf.length < 4) return undefined;
    length = buf.readUInt16BE(2);
    offset = 4;
  } else if (length === 127) {
    if (buf.length < 10) return undefined;
    length = Number(buf.readBigUInt64BE(2));
    offset = 10;
  }
  const maskBytes = masked ? 4 : 0;
  if (buf.length < offset + maskBytes + length) return undefined;
  const payload = Buffer.from(buf.subarray(offset + maskBytes, offset + maskBytes + length));
  if (masked) for (let i = 0; i < payload.length; i++) payload[i]! ^= buf[offset + (i % 4)]!;
  return { opcode, payload, size: offset + maskBytes + length };
}

/** An unmasked frame, as a server sends it. */
function wsFrame(opcode: number, payload: Buffer): Buffer {
  let head: Buffer;
  if (payload.length < 126) head = Buffer.from([0x80 | opcode, payload.length]);
  else if (payload.length < 65536) {
    head = Buffer.from([0x80 | opcode, 126, 0, 0]);
    head.writeUInt16BE(payload.length, 2);
  } else {
    head = Buffer.alloc(10);
    head[0] = 0x80 | opcode;
    head[1] = 127;
    head.writeBigUInt64BE(BigInt(payload.length), 2);
  }
  return Buffer.concat([head, payload]);
}

/** What a TLS upstream saw of one request's connection. */
export interface TlsSeen {
  /** The SNI the client sent, or false. */
  readonly sni: string | false;
  /** Whether the connection resumed a TLS session (`isSessionReused()`). */
  readonly resumed: boolean;
  readonly protocol: string | null;
  /** The CN of the client certificate, or null. */
  readonly client: string | null;
}

export interface TlsUpstream {
  readonly port: number;
  /** One entry per request, in order. */
  readonly seen: TlsSeen[];
}

/**
 * Starts an HTTPS server on 127.0.0.1 with `options` (certificate, key,
 * versions, client certificates) that answers every request with 200 and
 * its `TlsSeen` as JSON. Stopped, with its connections, at cleanup.
 */
export async function tlsUpstream(options: ServerOptions): Promise<TlsUpstream> {
  const seen: TlsSeen[] = [];
  const server = createHttpsServer(options, (req, res) => {
    const sock = req.socket as TLSSocket;
    const peer = sock.getPeerCertificate();
    const entry: TlsSeen = {
      sni: (sock as TLSSocket & { servername?: string | false }).servername ?? false,
      resumed: sock.isSessionReused(),
      protocol: sock.getProtocol(),
      client: peer && typeof peer.subject?.CN === 'string' ? peer.subject.CN : null,
    };
    seen.push(entry);
    const text = JSON.stringify(entry);
    req.resume();
    res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
    res.end(text);
  });
  server.on('tlsClientError', () => undefined);
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
  onCleanup(() => new Promise<void>((res) => { server.closeAllConnections(); server.close(() => res()); }));
  return { port: (server.address() as AddressInfo).port, seen };
}

/** Sends `body` in pieces of `size` bytes, a few milliseconds apart, so that each reaches jinx's filters on its own. */
export function sendInPieces(res: ServerResponse, body: string, size = 4): void {
  let at = 0;
  const next = (): void => {
    if (at >= body.length) {
      res.end();
      return;
    }
    res.write(body.slice(at, at + size));
    at += size;
    setTimeout(next, 3);
  };
  next();
}

/**
 * An upstream that records the request head of every request it receives
 * (the bytes up to the empty line, with the body length) and answers 200.
 */
export async function recordingUpstream(): Promise<{ port: number; seen: string[] }> {
  const seen: string[] = [];
  const server: Server = createNetServer((socket) => {
    let buf = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      for (;;) {
        const end = buf.indexOf('\r\n\r\n');
        if (end === -1) return;
        const head = buf.toString('latin1', 0, end);
        const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
        if (buf.length < end + 4 + length) return;
        // header names lowercased: undici writes its own `host` so (README, "Differences from nginx")
        const lines = head.split('\r\n').filter((l) => !/^(x-real-ip|connection):/i.test(l));
        seen.push(`${[lines[0], ...lines.slice(1).map((l) => l.replace(/^[^:]*/, (n) => n.toLowerCase()))].join(' | ')} [body ${length}]`);
        buf = buf.subarray(end + 4 + length);
        socket.write('HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nup\n');
      }
    });
    socket.on('error', () => undefined);
  });
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', res));
  onCleanup(() => new Promise<void>((res) => server.close(() => res())));
  return { port: (server.address() as { port: number }).port, seen };
}

/**
 * An upstream that answers every request with `chunk` repeated up to
 * `totalBytes` (its `Content-Length`, with `headers`), written as the
 * connection takes it (a slow reader holds it back).
 */
export async function repeatingUpstream(chunk: Buffer, totalBytes: number, headers: Readonly<Record<string, string>> = {}): Promise<{ port: number }> {
  return startUpstream((_req, res) => {
    res.writeHead(200, { ...headers, 'Content-Length': String(totalBytes) });
    let sent = 0;
    const pump = (): void => {
      while (sent < totalBytes) {
        sent += chunk.length;
        if (!res.write(chunk)) {
          res.once('drain', pump);
          return;
        }
      }
      res.end();
    };
    pump();
  });
}
