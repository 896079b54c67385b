/**
 * uwsgi and SCGI servers whose answers a test scripts, to see what a server
 * receives (the packet's modifiers, the parameters in order, the body) and
 * to send what real servers rarely do (split headers, bodies short of or
 * past their length, no status line). Each decodes requests with its own
 * code, independent of jinx's; the body is read to the request's
 * `CONTENT_LENGTH` parameter, as uWSGI and SCGI servers read it.
 */
import type { Socket } from 'node:net';
import { startTcpServer } from './harness.js';

/** A request as the server received it. */
export interface SeenCgiRequest {
  /** uwsgi's modifier bytes; 0 for SCGI. */
  readonly modifier1: number;
  readonly modifier2: number;
  readonly params: [string, string][];
  readonly body: Buffer;
}

export interface ScriptedCgiServer {
  readonly port: number;
  readonly requests: SeenCgiRequest[];
}

/** The header of a request at the start of `b`, and where the body starts; undefined while it is incomplete. */
type HeaderDecoder = (b: Buffer) => { modifier1: number; modifier2: number; params: [string, string][]; bodyAt: number } | undefined;

/** uwsgi: modifier1, a 16-bit little-endian size, modifier2, then pairs of 16-bit little-endian lengths and strings. */
const uwsgiHeader: HeaderDecoder = (b) => {
  if (b.length < 4) return undefined;
  const size = b.readUInt16LE(1);
  if (b.length < 4 + size) return undefined;
  const params: [string, string][] = [];
  const end = 4 + size;
  /** The length-prefixed string at `at`, or undefined when what is left is not one (`uwsgi_string`'s bytes). */
  const field = (at: number): string | undefined => {
    if (at + 2 > end || at + 2 + b.readUInt16LE(at) > end) return undefined;
    return b.toString('latin1', at + 2, at + 2 + b.readUInt16LE(at));
  };
  let at = 4;
  for (;;) {
    const name = field(at);
    const value = name === undefined ? undefined : field(at + 2 + name.length);
    if (name === undefined || value === undefined) break;
    params.push([name, value]);
    at += 4 + name.length + value.length;
  }
  if (at < end) params.push(['(uwsgi_string)', b.toString('latin1', at, end)]);
  return { modifier1: b[0]!, modifier2: b[3]!, params, bodyAt: end };
};

/** SCGI: a netstring `LENGTH:name\0value\0…,`. */
const scgiHeader: HeaderDecoder = (b) => {
  const colon = b.indexOf(0x3a);
  if (colon === -1) return undefined;
  const size = Number(b.toString('latin1', 0, colon));
  if (b.length < colon + 1 + size + 1) return undefined;
  const fields = b.toString('latin1', colon + 1, colon + 1 + size).split('\0');
  const params: [string, string][] = [];
  for (let i = 0; i + 1 < fields.length; i += 2) params.push([fields[i]!, fields[i + 1]!]);
  return { modifier1: 0, modifier2: 0, params, bodyAt: colon + 1 + size + 1 };
};

async function scripted(
  decode: HeaderDecoder, answer: (req: SeenCgiRequest, socket: Socket) => void, tls?: { readonly cert: string; readonly key: string },
): Promise<ScriptedCgiServer> {
  const requests: SeenCgiRequest[] = [];
  const port = await startTcpServer((sock) => {
    let pending = Buffer.alloc(0);
    let answered = false;
    sock.on('data', (d: Buffer) => {
      if (answered) return;
      pending = Buffer.concat([pending, d]);
      const head = decode(pending);
      if (!head) return;
      const length = Number(head.params.find(([n]) => n === 'CONTENT_LENGTH')?.[1] || 0);
      if (pending.length < head.bodyAt + length) return;
      answered = true;
      const req = { modifier1: head.modifier1, modifier2: head.modifier2, params: head.params, body: Buffer.from(pending.subarray(head.bodyAt)) };
      requests.push(req);
      answer(req, sock);
    });
  }, tls);
  return { port, requests };
}

/**
 * Starts a uwsgi server on 127.0.0.1 (over TLS with `tls`'s certificate and key, as for `suwsgi://`) that hands each
 * request, read whole, to `answer`; stopped with its sockets at cleanup.
 */
export const scriptedUwsgi = (
  answer: (req: SeenCgiRequest, socket: Socket) => void, tls?: { readonly cert: string; readonly key: string },
): Promise<ScriptedCgiServer> => scripted(uwsgiHeader, answer, tls);

/** Starts an SCGI server on 127.0.0.1 that hands each request, read whole, to `answer`; stopped with its sockets at cleanup. */
export const scriptedScgi = (answer: (req: SeenCgiRequest, socket: Socket) => void): Promise<ScriptedCgiServer> => scripted(scgiHeader, answer);
