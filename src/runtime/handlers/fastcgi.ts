/**
 * The FastCGI handler (`ngx_http_fastcgi_module.c`): sends the request as
 * FastCGI records over TCP or a unix socket (params from `fastcgi_param`
 * plus the request headers as `HTTP_*`, the body as STDIN), logs every STDERR
 * record as `FastCGI sent in stderr: "…"`, turns the CGI header (`Status:`,
 * `Location:`) into the response status, and streams STDOUT to the client
 * through the same buffering as proxied responses.
 */
import { connect, type Socket } from 'node:net';
import type { FastcgiConf } from '../../config/route-table.js';
import { systemErrorText } from '../../os-errors.js';
import { logRequest } from '../context.js';
import type { Exchange } from '../exchange.js';
import { finalize } from '../phases.js';
import type { HttpRequestState } from '../request.js';
import { bodyStream, readRequestBody, type RequestBody } from '../request-body.js';
import { applyHeadersModule } from '../respond.js';
import { accelBuffering, ResponseSpool } from '../spool.js';
import { mapUpstreamError, SendTimeoutError, upstreamTimeout, type UpstreamFailure } from '../upstream/errors.js';
import {
  beginRequestBody, encodeParams, encodeRecords, FastcgiProtocolError, FCGI, RecordParser, stderrText,
} from '../upstream/fastcgi-protocol.js';
import { nextConditionOf, type NextCondition, type PeerAttempts } from '../upstream/round-robin.js';
import { dynamicPeer, firstPeer, nextUpstream, startAttempt } from './upstream-peer.js';

const REQUEST_ID = 1;
const READING_HEADER = 'reading response header from upstream';

/** Where to connect: a TCP peer or a unix socket, and the name nginx logs. */
type FastcgiAddress = { readonly host: string; readonly port: number; readonly name: string } | { readonly path: string; readonly name: string };

/** The first address, and the group's attempts when it belongs to one. */
interface FastcgiChoice {
  readonly peer: FastcgiAddress;
  readonly attempts: PeerAttempts | undefined;
}

/** The params of a request: `fastcgi_param` in order, then the request headers as `HTTP_*`. */
function params(r: HttpRequestState, conf: FastcgiConf): [string, string][] {
  const out: [string, string][] = [];
  for (const p of conf.params) {
    const v = p.value.evaluate(r);
    if (p.ifNotEmpty && v === '') continue;
    out.push([p.name, v]);
  }
  if (!conf.passRequestHeaders) return out;
  const raw = r.rawHeaders;
  const seen = new Set<string>();
  for (let i = 0; i < raw.length; i += 2) {
    const name = `HTTP_${raw[i]!.toUpperCase().replace(/-/g, '_')}`;
    if (conf.paramNames.has(name)) continue;
    if (seen.has(name)) {
      const prev = out.find(([n]) => n === name)!;
      prev[1] += `${name === 'HTTP_COOKIE' ? '; ' : ', '}${raw[i + 1]}`;
      continue;
    }
    seen.add(name);
    out.push([name, raw[i + 1]!]);
  }
  return out;
}

async function address(ex: Exchange, conf: FastcgiConf): Promise<FastcgiChoice | undefined> {
  const { r, cx } = ex;
  if (conf.target.kind === 'unix') return { peer: { path: conf.target.path, name: `unix:${conf.target.path}` }, attempts: undefined };
  if (conf.target.kind === 'group') {
    const choice = firstPeer(ex, cx.table.upstreams.get(conf.target.group)!, conf, 'fastcgi', '');
    if (typeof choice !== 'number') return choice;
    await finalize(ex, choice);
    return undefined;
  }
  const text = conf.target.address.evaluate(r);
  if (text.startsWith('unix:')) return { peer: { path: text.slice(5), name: text }, attempts: undefined };
  const m = /^(\[[^\]]+\]|[^:/]+)(?::(\d+))?$/.exec(text);
  if (!m) {
    logRequest(cx, r, 'error', `invalid host in upstream "${text}"`);
    await finalize(ex, 500);
    return undefined;
  }
  if (m[2] === undefined && !cx.table.upstreams.has(m[1]!.toLowerCase())) {
    logRequest(cx, r, 'error', `no port in upstream "${text}"`);
    await finalize(ex, 500);
    return undefined;
  }
  return dynamicPeer(ex, m[1]!, m[2] === undefined ? undefined : Number(m[2]), 0, conf, 'fastcgi', '');
}

/** Parses the CGI header block: status and the headers to pass. */
function parseHeader(text: string, conf: FastcgiConf): { status: number; reason: string | undefined; headers: [string, string][] } | undefined {
  const headers: [string, string][] = [];
  let status: number | undefined;
  let reason: string | undefined;
  let location = false;
  for (const line of text.split(/\r?\n/)) {
    if (line === '') continue;
    const colon = line.indexOf(':');
    if (colon <= 0) return undefined;
    const name = line.slice(0, colon);
    const value = line.slice(colon + 1).trim();
    const lower = name.toLowerCase();
    if (lower === 'status') {
      const m = /^(\d{3})(?:\s+(.*))?$/.exec(value);
      if (!m) return undefined;
      status = Number(m[1]);
      reason = m[2];
    }
    if (lower === 'location') location = true;
    if (conf.hideHeaders.has(lower)) continue;
    headers.push([name, value]);
  }
  return { status: status ?? (location ? 302 : 200), reason: status === undefined && location ? 'Moved Temporarily' : reason, headers };
}

/** Sends the request to the FastCGI server. */
export async function fastcgiRequest(ex: Exchange): Promise<void> {
  const { r } = ex;
  const conf = r.loc.fastcgi!;
  const hasBody = conf.passRequestBody && ex.body !== undefined
    && (r.headers['content-length'] !== undefined ? r.headers['content-length'] !== '0' : r.headers['transfer-encoding'] !== undefined);
  let body: RequestBody | undefined;
  if (hasBody) {
    const read = await readRequestBody(ex);
    if ('status' in read) {
      if (read.status === 0) ex.out.abort();
      else await finalize(ex, read.status);
      return;
    }
    body = read;
  }
  try {
    await exchange(ex, conf, body);
  } finally {
    if (body?.kind === 'file') await body.file.handle.close().catch(() => undefined);
  }
}

/** Sends the request to the first address, then to the next ones of its group while `fastcgi_next_upstream` says so. */
async function exchange(ex: Exchange, conf: FastcgiConf, body: RequestBody | undefined): Promise<void> {
  const choice = await address(ex, conf);
  if (!choice) return;
  let peer: FastcgiAddress | undefined = choice.peer;
  for (let retry = false; peer; retry = true) peer = await attempt(ex, conf, body, peer, choice.attempts, retry);
}

/**
 * One attempt at `addr`: resolves when the response is done or answered, or
 * with the next address to try (`ngx_http_upstream_next`).
 */
async function attempt(
  ex: Exchange, conf: FastcgiConf, body: RequestBody | undefined, addr: FastcgiAddress, attempts: PeerAttempts | undefined, retry: boolean,
): Promise<FastcgiAddress | undefined> {
  const { r, cx, out } = ex;
  startAttempt(ex, `fastcgi://${addr.name}${'path' in addr ? ':' : ''}`, addr, retry);
  const started = Date.now();
  r.action = 'connecting to upstream';
  const socket: Socket = 'path' in addr ? connect({ path: addr.path }) : connect({ host: addr.host, port: addr.port });
  socket.setNoDelay(true);
  socket.once('close', cx.upstreams.track());
  let stage: 'connect' | 'header' | 'body' | 'done' = 'connect';
  let headerBytes = Buffer.alloc(0);
  let spool: ResponseSpool | undefined;
  let settled = false;

  return new Promise<FastcgiAddress | undefined>((resolve) => {
    const settle = (): void => {
      if (settled) return;
      settled = true;
      socket.destroy();
      resolve(undefined);
    };
    const done = (): void => resolve(undefined);
    /** Gives up on this server for `condition`: the next one, or nginx's answer. */
    const next = (condition: NextCondition, failure: UpstreamFailure | undefined): void => {
      settled = true;
      clearTimeout(connectTimer);
      socket.destroy();
      const following = nextUpstream(ex, attempts, { condition, failure, requestSent: stage !== 'connect', bodyUnbuffered: false, scheme: 'fastcgi', uri: '' });
      if (typeof following !== 'number') {
        resolve(following);
        return;
      }
      r.action = 'sending to client';
      void finalize(ex, following).then(done, done);
    };
    const fail = (failure: UpstreamFailure): void => {
      if (settled) return;
      if ((stage === 'connect' || stage === 'header') && !out.started) {
        next(failure.condition, failure);
        return;
      }
      r.action = failure.action;
      logRequest(cx, r, 'error', failure.message);
      r.action = 'sending to client';
      spool?.abort();
      socket.destroy();
      if (out.started) {
        out.abort();
        settle();
        return;
      }
      settled = true;
      void finalize(ex, failure.status).then(done, done);
    };
    const connectTimer = setTimeout(() => fail(upstreamTimeout('connect')), conf.connectTimeoutMs);
    socket.once('connect', () => {
      clearTimeout(connectTimer);
      stage = 'header';
      r.action = READING_HEADER;
      socket.setTimeout(conf.readTimeoutMs);
      const records: Buffer[] = [];
      encodeRecords(FCGI.BEGIN_REQUEST, REQUEST_ID, beginRequestBody(conf.keepConn), records);
      encodeRecords(FCGI.PARAMS, REQUEST_ID, encodeParams(params(r, conf)), records);
      encodeRecords(FCGI.PARAMS, REQUEST_ID, Buffer.alloc(0), records);
      if (!body) encodeRecords(FCGI.STDIN, REQUEST_ID, Buffer.alloc(0), records);
      socket.write(Buffer.concat(records));
      if (body) void sendBody(socket, body, conf.sendTimeoutMs).catch((err: Error) => fail(mapUpstreamError(err as Error & { code?: string }, 'header')));
    });
    socket.on('timeout', () => fail(upstreamTimeout(stage === 'body' ? 'body' : 'header')));
    socket.on('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(connectTimer);
      if (stage === 'connect') fail(mapUpstreamError(err, 'connect'));
      else fail(mapUpstreamError(err, stage === 'body' ? 'body' : 'header', conf.buffering));
    });
    socket.on('close', () => {
      clearTimeout(connectTimer);
      if (stage === 'header') fail({ status: 502, message: 'upstream prematurely closed connection', action: READING_HEADER, condition: 'error' });
      else if (stage === 'body') fail({ status: 502, message: 'upstream prematurely closed FastCGI request', action: 'reading upstream', condition: 'error' });
    });

    const parser = new RecordParser();
    const onStdout = (data: Buffer): void => {
      if (stage === 'body') {
        if (!out.headOnly && spool) {
          r.bodyBytesSent += data.length;
          spool.push(data);
        }
        return;
      }
      headerBytes = Buffer.concat([headerBytes, data]);
      const text = headerBytes.toString('latin1');
      let end = text.indexOf('\r\n\r\n');
      let sep = 4;
      const lf = text.indexOf('\n\n');
      if (lf !== -1 && (end === -1 || lf < end)) [end, sep] = [lf, 2];
      if (end === -1) {
        if (headerBytes.length > conf.bufferSizeBytes) fail({ status: 502, message: 'upstream sent too big header', action: READING_HEADER, condition: 'invalid_header' });
        return;
      }
      if (end + sep > conf.bufferSizeBytes) {
        fail({ status: 502, message: 'upstream sent too big header', action: READING_HEADER, condition: 'invalid_header' });
        return;
      }
      const parsed = parseHeader(text.slice(0, end), conf);
      if (!parsed) {
        fail({ status: 502, message: 'upstream sent invalid header', action: READING_HEADER, condition: 'invalid_header' });
        return;
      }
      const up = r.upstream!;
      const condition = nextConditionOf(parsed.status);
      if (attempts && condition && attempts.mayRetry(condition, r.method, true, false, true)) {
        up.status = parsed.status;
        next(condition, undefined);
        return;
      }
      attempts?.done();
      stage = 'body';
      r.action = 'reading upstream';
      up.status = parsed.status;
      up.headerTimeMs = Date.now() - started;
      up.headers = parsed.headers.flat();
      if (conf.interceptErrors && parsed.status >= 300 && r.loc.errorPages.has(parsed.status)) {
        stage = 'done';
        settled = true;
        socket.destroy();
        void finalize(ex, parsed.status).then(done, done);
        return;
      }
      const headers = parsed.headers.filter(([n]) => n.toLowerCase() !== 'status');
      applyHeadersModule(r, parsed.status, headers);
      out.head(r, parsed.status, headers, parsed.reason);
      const headerLength = Buffer.byteLength(text.slice(0, end + sep), 'latin1');
      const accel = conf.accelBuffering ? parsed.headers.find(([n]) => n.toLowerCase() === 'x-accel-buffering') : undefined;
      const buffering = accel ? accelBuffering(accel[1], conf.buffering) : conf.buffering;
      spool = new ResponseSpool(out, buffering === conf.buffering ? conf : { ...conf, buffering }, cx.tempFiles, {
        onTempFile: (path) => logRequest(cx, r, 'warn', `an upstream response is buffered to a temporary file ${path}`),
        pauseUpstream: () => socket.pause(),
        resumeUpstream: () => socket.resume(),
        onFileError: (err, path) => fail({ status: 502, message: `write() to "${path ?? conf.tempPath.dir}" failed (${systemErrorText(err)})`, action: 'reading upstream', condition: 'error' }),
      }, conf.bufferSizeBytes - headerLength);
      const rest = headerBytes.subarray(headerLength);
      headerBytes = Buffer.alloc(0);
      if (rest.length > 0) onStdout(rest);
    };

    socket.on('data', (chunk: Buffer) => {
      let records;
      try {
        records = parser.push(chunk);
      } catch (err) {
        fail({ status: 502, message: (err as FastcgiProtocolError).message, action: READING_HEADER, condition: 'error' });
        return;
      }
      for (const rec of records) {
        if (settled) return;
        if (rec.type === FCGI.STDERR) {
          if (rec.content.length > 0) logRequest(cx, r, 'error', `FastCGI sent in stderr: "${stderrText(rec.content)}"`);
        } else if (rec.type === FCGI.STDOUT) {
          if (rec.content.length > 0) onStdout(rec.content);
        } else if (rec.type === FCGI.END_REQUEST) {
          if (stage === 'header') {
            fail({ status: 502, message: 'upstream prematurely closed FastCGI stdout', action: READING_HEADER, condition: 'error' });
            return;
          }
          stage = 'done';
          r.action = 'sending to client';
          socket.destroy();
          if (!spool) {
            settle();
            return;
          }
          spool.end();
          settled = true;
          void spool.done.then(done);
          return;
        }
      }
    });
    if (!conf.ignoreClientAbort) out.onAbort(() => {
      spool?.abort();
      settle();
    });
  });
}

/**
 * Streams a buffered request body as STDIN records, then the empty STDIN
 * record. A write the server does not take within `sendTimeoutMs`
 * (`fastcgi_send_timeout`) rejects with `SendTimeoutError`.
 */
async function sendBody(socket: Socket, body: RequestBody, sendTimeoutMs: number): Promise<void> {
  const source = bodyStream(body);
  const write = (buf: Buffer): Promise<void> => new Promise((res, rej) => {
    const records: Buffer[] = [];
    encodeRecords(FCGI.STDIN, REQUEST_ID, buf, records);
    if (socket.write(Buffer.concat(records))) {
      res();
      return;
    }
    const drained = (): void => {
      clearTimeout(timer);
      socket.off('drain', drained).off('close', drained);
      res();
    };
    const timer = setTimeout(() => {
      socket.off('drain', drained).off('close', drained);
      rej(new SendTimeoutError());
    }, sendTimeoutMs);
    socket.once('drain', drained).once('close', drained);
  });
  if (Buffer.isBuffer(source)) await write(source);
  else for await (const chunk of source as AsyncIterable<Buffer>) await write(chunk);
  const end: Buffer[] = [];
  encodeRecords(FCGI.STDIN, REQUEST_ID, Buffer.alloc(0), end);
  socket.write(Buffer.concat(end));
}
