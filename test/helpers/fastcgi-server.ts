/**
 * A FastCGI server whose answers a test scripts, to see what a server sends
 * record by record and to send what php-fpm never does (odd record types,
 * request ids, splits across TCP segments). It decodes requests with its own
 * code, independent of jinx's, and builds response records the same way.
 */
import type { Socket } from 'node:net';
import { startTcpServer } from './harness.js';

/** One record as received. */
export interface SeenRecord {
  readonly type: number;
  readonly requestId: number;
  readonly length: number;
  readonly padding: number;
}

/** A request as the server received it, up to the empty STDIN record. */
export interface SeenRequest {
  readonly role: number;
  readonly flags: number;
  readonly params: [string, string][];
  readonly stdin: Buffer;
  readonly records: SeenRecord[];
}

export interface ScriptedFastcgi {
  readonly port: number;
  readonly requests: SeenRequest[];
  /** TCP connections accepted so far. */
  connections(): number;
}

/** The bytes of one record: version 1, `type`, request id, content, `padding` zero bytes (default: to a multiple of 8). */
export function fcgiRecord(type: number, content: string | Buffer, opts: { requestId?: number; padding?: number; version?: number } = {}): Buffer {
  const body = typeof content === 'string' ? Buffer.from(content, 'latin1') : content;
  const padding = opts.padding ?? (8 - (body.length % 8)) % 8;
  const id = opts.requestId ?? 1;
  const header = Buffer.from([opts.version ?? 1, type, id >> 8, id & 0xff, body.length >> 8, body.length & 0xff, padding, 0]);
  return Buffer.concat([header, body, Buffer.alloc(padding)]);
}

export const STDOUT = 6;
export const STDERR = 7;
export const END_REQUEST = 3;

/** END_REQUEST with application status 0 and FCGI_REQUEST_COMPLETE. */
export const endRequest = (opts: { requestId?: number } = {}): Buffer => fcgiRecord(END_REQUEST, Buffer.alloc(8), opts);

function readLength(b: Buffer, at: number): [number, number] {
  return b[at]! < 128 ? [b[at]!, at + 1] : [b.readUInt32BE(at) & 0x7fffffff, at + 4];
}

function decodeParams(b: Buffer): [string, string][] {
  const out: [string, string][] = [];
  let at = 0;
  while (at < b.length) {
    const [n, a1] = readLength(b, at);
    const [v, a2] = readLength(b, a1);
    out.push([b.toString('latin1', a2, a2 + n), b.toString('latin1', a2 + n, a2 + n + v)]);
    at = a2 + n + v;
  }
  return out;
}

/**
 * Starts a FastCGI server on 127.0.0.1: each request is read to its empty
 * STDIN record and handed to `answer` with the socket, which writes what the
 * case needs (and may keep the connection for the next request). Stopped
 * with its sockets at cleanup.
 */
export async function scriptedFastcgi(answer: (req: SeenRequest, socket: Socket) => void): Promise<ScriptedFastcgi> {
  const requests: SeenRequest[] = [];
  let connections = 0;
  const port = await startTcpServer((sock) => {
    connections++;
    let pending = Buffer.alloc(0);
    let current: { role: number; flags: number; params: Buffer[]; stdin: Buffer[]; records: SeenRecord[] } | undefined;
    sock.on('data', (d: Buffer) => {
      pending = Buffer.concat([pending, d]);
      while (pending.length >= 8) {
        const length = pending.readUInt16BE(4);
        const padding = pending[6]!;
        if (pending.length < 8 + length + padding) break;
        const type = pending[1]!;
        const content = pending.subarray(8, 8 + length);
        const record = { type, requestId: pending.readUInt16BE(2), length, padding };
        pending = pending.subarray(8 + length + padding);
        if (type === 1) current = { role: content.readUInt16BE(0), flags: content[2]!, params: [], stdin: [], records: [] };
        if (!current) continue;
        current.records.push(record);
        if (type === 4) current.params.push(Buffer.from(content));
        if (type === 5 && length > 0) current.stdin.push(Buffer.from(content));
        if (type === 5 && length === 0) {
          const req: SeenRequest = {
            role: current.role, flags: current.flags, params: decodeParams(Buffer.concat(current.params)), stdin: Buffer.concat(current.stdin), records: current.records,
          };
          current = undefined;
          requests.push(req);
          answer(req, sock);
        }
      }
    });
  });
  return { port, requests, connections: () => connections };
}
