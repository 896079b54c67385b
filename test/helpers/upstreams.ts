/**
 * Upstream servers for proxy tests: an echo server that answers with what it
 * received (method, target, headers in order, body) and counts the TCP
 * connections it accepted.
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { startUpstream } from './harness.js';

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
