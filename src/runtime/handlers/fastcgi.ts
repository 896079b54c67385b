/**
 * The FastCGI handler (`ngx_http_fastcgi_module.c`): sends the request as
 * FastCGI records over TCP or a unix socket (params from `fastcgi_param`
 * plus the request headers as `HTTP_*`, the body as STDIN), reads the
 * response as nginx does (fastcgi-protocol.ts: STDERR logged as `FastCGI
 * sent in stderr: "…"`, the CGI header, STDOUT), turns `Status:` and
 * `Location:` into the response status, and streams the body to the client
 * through the same buffering as proxied responses. With `fastcgi_keep_conn
 * on` and an `upstream` block that keeps connections, the connection serves
 * later requests (fastcgi-connections.ts).
 */
import { connect, type Socket } from 'node:net';
import type { Readable } from 'node:stream';
import type { LogLevel } from '../../log/levels.js';
import type { FastcgiConf, UpstreamGroup } from '../../config/route-table.js';
import { systemErrorText } from '../../os-errors.js';
import { logRequest } from '../context.js';
import { DONE, statusOutcome, type Exchange, type Outcome } from '../exchange.js';
import { accelRedirectOf, keepForRedirect } from './accel-redirect.js';
import type { HttpRequestState } from '../request.js';
import { bodyStream, keepPassedBody, readRequestBody, requestHasBody, type RequestBody } from '../request-body.js';
import { applyHeadersModule, keptHeaders } from '../respond.js';
import { accelBuffering, ResponseSpool } from '../spool.js';
import { takeAccelCharset } from '../filters/charset.js';
import { takeAccelLimitRate } from '../limit-rate.js';
import { bodyTurns } from '../turn-budget.js';
import { allowSingleRange, cacheStart, type CacheStore } from '../cache/upstream-cache.js';
import {
  mapUpstreamError, READING_BODY, READING_HEADER, SendTimeoutError, upstreamFailure, upstreamTimeout, type UpstreamFailure,
} from '../upstream/errors.js';
import type { FastcgiConnection } from '../upstream/fastcgi-connections.js';
import {
  beginRequestBody, encodeParams, encodeRecords, FastcgiResponseError, FCGI, REQUEST_ID, ResponseReader, StderrCaught, type BodyReading,
} from '../upstream/fastcgi-protocol.js';
import { nextConditionOf, type NextCondition, type PeerAttempts } from '../upstream/round-robin.js';
import { dynamicPeer, endAttempt, firstPeer, startAttempt, stickyAnswered } from './upstream-peer.js';
import { cutOff, interceptsError, nextOrAnswer, responseFailed } from './upstream-attempt.js';

/** Where to connect: a TCP peer (of a group when `group` is set) or a unix socket, and the name nginx logs. */
type FastcgiAddress =
  | { readonly host: string; readonly port: number; readonly name: string; readonly group: string | undefined }
  | { readonly path: string; readonly name: string };

/** The first address, and the group's attempts when it belongs to one. */
interface FastcgiChoice {
  readonly peer: FastcgiAddress;
  readonly attempts: PeerAttempts | undefined;
}

/**
 * The params of a request: `fastcgi_param` in order, then the request
 * headers as `HTTP_*` (repeated ones joined), the Host header first and as
 * nginx 1.30 rebuilds it: `$host$is_request_port$request_port` (the
 * server's name for a request without a host).
 */
export function params(r: HttpRequestState, conf: FastcgiConf): [string, string][] {
  const out: [string, string][] = [];
  for (const p of conf.params) {
    const v = p.value.evaluate(r);
    if (p.ifNotEmpty && v === '') continue;
    out.push([p.name, v]);
  }
  if (!conf.passRequestHeaders) return out;
  const main = r.parent ?? r;
  if (main.host && !conf.paramNames.has('HTTP_HOST')) out.push(['HTTP_HOST', main.requestPort ? `${main.host}:${main.requestPort}` : main.host]);
  const raw = r.rawHeaders;
  const seen = new Set<string>();
  for (let i = 0; i < raw.length; i += 2) {
    const name = `HTTP_${raw[i]!.toUpperCase().replace(/-/g, '_')}`;
    if (name === 'HTTP_HOST' || conf.paramNames.has(name)) continue;
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

/** The first address of the request, or the status to answer. */
async function address(ex: Exchange, conf: FastcgiConf): Promise<FastcgiChoice | number> {
  const { r, cx } = ex;
  if (conf.target.kind === 'unix') return { peer: { path: conf.target.path, name: `unix:${conf.target.path}` }, attempts: undefined };
  if (conf.target.kind === 'group') {
    return firstPeer(ex, cx.table.upstreams.get(conf.target.group)!, conf, 'fastcgi', '');
  }
  const text = conf.target.address.evaluate(r);
  if (text.startsWith('unix:')) return { peer: { path: text.slice(5), name: text }, attempts: undefined };
  const m = /^(\[[^\]]+\]|[^:/]+)(?::(\d+))?$/.exec(text);
  if (!m) {
    logRequest(cx, r, 'error', `invalid host in upstream "${text}"`);
    return 500;
  }
  if (m[2] === undefined && !cx.table.upstreams.has(m[1]!.toLowerCase())) {
    logRequest(cx, r, 'error', `no port in upstream "${text}"`);
    return 500;
  }
  return dynamicPeer(ex, m[1]!, m[2] === undefined ? undefined : Number(m[2]), 0, conf, 'fastcgi', '');
}

/** The response header as nginx takes it (`ngx_http_fastcgi_process_header`): the status, its reason, the headers to pass. */
interface CgiHeader {
  readonly status: number;
  readonly reason: string | undefined;
  readonly headers: [string, string][];
  /** Every header as sent, for `$upstream_http_*`. */
  readonly all: [string, string][];
  readonly contentLength: number;
}

/** The headers `ngx_http_header_filter` drops from a 204 sent without a status line of the upstream's. */
const NO_CONTENT_DROPS = new Set(['content-type', 'content-length', 'last-modified']);

/**
 * The status from `Status:` (its first three characters, the whole value as
 * the status line when longer), 302 for a `Location:` without one, else 200.
 * A 204 without a status line goes out without `Content-Type`,
 * `Content-Length` and `Last-Modified`, as nginx's header filter sends its
 * own 204s.
 * @throws FastcgiResponseError `upstream sent invalid status "…"`
 */
function cgiHeader(lines: [string, string][], conf: FastcgiConf): CgiHeader {
  const headers: [string, string][] = [];
  let status: number | undefined;
  let reason: string | undefined;
  let location = false;
  let statusLine = false;
  let contentLength = -1;
  for (const [name, value] of lines) {
    const lower = name.toLowerCase();
    if (lower === 'status') {
      if (!/^\d{3}/.test(value)) throw new FastcgiResponseError(`upstream sent invalid status "${value}"`);
      status = Number(value.slice(0, 3));
      reason = value.slice(3).trim() || undefined;
      statusLine = value.length > 3;
    } else if (lower === 'location') location = true;
    else if (lower === 'content-length' && /^\d+$/.test(value)) contentLength = Number(value);
    if (conf.hideHeaders.has(lower)) continue;
    headers.push([name, value]);
  }
  return {
    status: status ?? (location ? 302 : 200),
    reason: status === undefined && location ? 'Moved Temporarily' : reason,
    headers: status === 204 && !statusLine ? headers.filter(([name]) => !NO_CONTENT_DROPS.has(name.toLowerCase())) : headers,
    all: lines,
    contentLength,
  };
}

/** Sends the request to the FastCGI server. */
export async function fastcgiRequest(ex: Exchange): Promise<Outcome> {
  const { r } = ex;
  const conf = r.loc.fastcgi!;
  // a client that leaves from now on (while its body is read, the cache looked up) ends the attempt as soon as it starts
  if (!conf.ignoreClientAbort) ex.out.onAbort(() => undefined);
  const hasBody = conf.passRequestBody && ex.body !== undefined && requestHasBody(r, ex.body);
  let body: FastcgiBody | undefined;
  if (hasBody && !conf.requestBuffering) {
    // fastcgi_request_buffering off: STDIN records go out as the body arrives (read by sendBody; paused until then)
    ex.body!.pause();
    keepPassedBody(r, ex.body!);
    body = { kind: 'passed', stream: ex.body! };
  } else if (hasBody) {
    const read = await readRequestBody(ex);
    if ('status' in read) return read.status === 0 ? { kind: 'close' } : statusOutcome(read.status);
    body = read;
  }
  try {
    const start = conf.cache ? await cacheStart(ex, conf.cache, fastcgiRequest) : undefined;
    return start?.kind === 'served' ? start.outcome : await exchange(ex, conf, body, start?.store);
  } finally {
    if (body?.kind === 'file') await body.file.handle.close().catch(() => undefined);
  }
}

/** The body of a FastCGI request: read whole first, or passed on as it arrives (`fastcgi_request_buffering off`). */
type FastcgiBody = RequestBody | { readonly kind: 'passed'; readonly stream: Readable };

/** The client sent none of a body passed on for `client_body_timeout`: nginx ends the request with 408, silently. */
class BodyTimeoutError extends Error {}

/** The client went away while its body was passed on: nginx's `client prematurely closed connection`, status 400. */
class ClientGoneError extends Error {}

/**
 * A body passed on that its connection refused as it arrived (an HTTP/2
 * stream's DATA past its `Content-Length`, or short of it): the request ends
 * with its `status` and the connection's message, logged at `level`.
 */
class BodyRefusedError extends Error {
  constructor(message: string, readonly status: number, readonly level: LogLevel) {
    super(message);
  }
}

/** Sends the request to the first address, then to the next ones of its group while `fastcgi_next_upstream` says so. */
async function exchange(ex: Exchange, conf: FastcgiConf, body: FastcgiBody | undefined, store: CacheStore | undefined): Promise<Outcome> {
  const choice = await address(ex, conf);
  if (typeof choice === 'number') {
    store?.abort();
    return statusOutcome(choice);
  }
  let result: Outcome | NextAddress = { kind: 'next', peer: choice.peer };
  for (let retry = false; result.kind === 'next'; retry = true) result = await attempt(ex, conf, body, result.peer, choice.attempts, retry, store);
  // whatever did not reach the store's commit is not cached
  store?.abort();
  return result;
}

/** An attempt gave up on its server: the request goes to `peer` (`ngx_http_upstream_next`). */
interface NextAddress {
  readonly kind: 'next';
  readonly peer: FastcgiAddress;
}

/** The group whose idle connections a request to `addr` may use and keep, when `fastcgi_keep_conn` is on. */
function keepingGroup(ex: Exchange, conf: FastcgiConf, addr: FastcgiAddress): UpstreamGroup | undefined {
  if (!conf.keepConn || 'path' in addr || addr.group === undefined) return undefined;
  const group = ex.cx.table.upstreams.get(addr.group.toLowerCase());
  return group && group.keepalive > 0 ? group : undefined;
}

/**
 * One attempt at `addr`, on a kept connection or a new one: resolves with
 * how the request goes on once the response is done or given up, or with
 * the next address to try (`ngx_http_upstream_next`).
 */
async function attempt(
  ex: Exchange, conf: FastcgiConf, body: FastcgiBody | undefined, addr: FastcgiAddress, attempts: PeerAttempts | undefined, retry: boolean,
  store: CacheStore | undefined,
): Promise<Outcome | NextAddress> {
  const { r, cx, out } = ex;
  const state = startAttempt(ex, `fastcgi://${addr.name}${'path' in addr ? ':' : ''}`, addr, retry);
  const group = keepingGroup(ex, conf, addr);
  const kept = group ? cx.fastcgi.take(group, addr.name) : undefined;
  let socket: Socket;
  if (kept) socket = kept.socket;
  else {
    socket = 'path' in addr ? connect({ path: addr.path }) : connect({ host: addr.host, port: addr.port });
    socket.setNoDelay(true);
    socket.once('close', cx.upstreams.track());
  }
  const connection: FastcgiConnection = { socket, requests: (kept?.requests ?? 0) + 1, openedAtMs: kept?.openedAtMs ?? Date.now() };
  // this attempt's bytes on the connection, for $upstream_bytes_sent and _received
  const [readAtStart, writtenAtStart] = [socket.bytesRead, socket.bytesWritten];
  const wire = { get sent(): number { return socket.bytesWritten - writtenAtStart; }, get received(): number { return socket.bytesRead - readAtStart; } };
  let bodyBytes = 0;
  r.action = 'connecting to upstream';
  let stage: 'connect' | 'header' | 'body' | 'done' = 'connect';
  /** The spool paused the connection (the client or the disk is behind). */
  let spoolPaused = false;
  /** The connection waits for a later turn of the event loop (`bodyTurns`). */
  let yielded = false;
  /** The connection waits for the cache's file to take what was read (`CacheStore.drained`). */
  let storing = false;
  const resumeSocket = (): void => {
    if (!spoolPaused && !yielded && !storing) socket.resume();
  };
  let spool: ResponseSpool | undefined;
  let settled = false;
  let bodySent = !body;

  return new Promise<Outcome | NextAddress>((resolve) => {
    const connectTimer = kept ? undefined : setTimeout(() => fail(upstreamTimeout('connect')), conf.connectTimeoutMs);
    const done = (): void => resolve(DONE);
    /** Stops listening to the socket; it is closed, or kept for the next request when `keep`. */
    const release = (keep: boolean): void => {
      endAttempt(state, wire, bodyBytes);
      clearTimeout(connectTimer);
      socket.off('connect', onConnect).off('timeout', onTimeout).off('error', onError).off('close', onClose).off('data', onData);
      if (keep && group) cx.fastcgi.keep(group, addr.name, connection);
      else socket.destroy();
    };
    const settle = (): void => {
      if (settled) return;
      settled = true;
      release(false);
      resolve(DONE);
    };
    /** Gives up on this server for `condition`: the next one, or nginx's answer. */
    const next = (condition: NextCondition, failure: UpstreamFailure | undefined): void => {
      settled = true;
      release(false);
      const following = nextOrAnswer(ex, attempts, {
        condition, failure, requestSent: stage !== 'connect', bodyUnbuffered: body?.kind === 'passed', scheme: 'fastcgi', uri: '',
      }, store);
      if (following instanceof Promise) void following.then(resolve);
      else resolve({ kind: 'next', peer: following });
    };
    /** Ends the request after a failure: a response already started is cut off, else `status` is sent. */
    const giveUp = (status: number): void => {
      const outcome = cutOff(ex, status, spool);
      if (settled) return;
      settled = true;
      release(false);
      resolve(outcome);
    };
    const fail = (failure: UpstreamFailure): void => {
      if (settled) return;
      // a HEAD whose response was being cached: its header is sent (nginx sent it before reading the body)
      if (stage === 'body' && out.headOnly) out.flushHead();
      if ((stage === 'connect' || stage === 'header') && !out.started) {
        next(failure.condition, failure);
        return;
      }
      settled = true;
      release(false);
      void responseFailed(ex, failure, spool).then(resolve);
    };
    /** A response nginx refuses: an invalid header while the header is read, else what `err` says. */
    const invalid = (err: Error): void => {
      const code = err instanceof FastcgiResponseError ? err.code : 'invalid-header';
      fail(stage !== 'body' ? upstreamFailure('invalid-header', err.message, READING_HEADER) : upstreamFailure(code, err.message, READING_BODY));
    };

    /** The CGI header: status, next server, intercepted errors, or the response head and how to read the body. */
    const onHeader = (lines: [string, string][], room: number): BodyReading | 'stop' => {
      let parsed: CgiHeader;
      try {
        parsed = cgiHeader(lines, conf);
      } catch (err) {
        invalid(err as Error);
        return 'stop';
      }
      const up = state;
      const condition = nextConditionOf(parsed.status);
      if (attempts && condition && attempts.mayRetry(condition, r.method, true, false, true)) {
        up.status = parsed.status;
        next(condition, undefined);
        return 'stop';
      }
      const stale = condition !== undefined && store?.staleFor(condition);
      if (stale || store?.revalidates(parsed.status)) {
        // the expired entry goes out instead (use_stale), or fresh again (a 304 to a revalidation)
        attempts?.done();
        up.status = parsed.status;
        up.headers = parsed.all.flat();
        stage = 'done';
        settled = true;
        release(false);
        const sending = stale ? store!.sendStale() : store!.sendRevalidated(up.headers);
        void sending.then((sent) => sent ?? statusOutcome(stale ? parsed.status : 502), () => DONE).then(resolve);
        return 'stop';
      }
      const answered = attempts?.current;
      attempts?.done();
      stage = 'body';
      up.status = parsed.status;
      up.headerTimeMs = Date.now() - up.startMs;
      up.bytesReceived = wire.received;
      up.headers = parsed.all.flat();
      stickyAnswered(ex, attempts, answered);
      if (conf.accelLimitRate) takeAccelLimitRate(r, up.headers);
      if (conf.accelCharset) takeAccelCharset(r, up.headers);
      if (interceptsError(ex, conf.interceptErrors, parsed.status, up.headers, store)) {
        stage = 'done';
        r.action = 'sending to client';
        settled = true;
        release(false);
        resolve(statusOutcome(parsed.status));
        return 'stop';
      }
      const redirect = conf.accelRedirect ? accelRedirectOf(up.headers) : undefined;
      if (redirect !== undefined) {
        r.action = READING_HEADER;
        keepForRedirect(r, up.headers);
        stage = 'done';
        settled = true;
        release(false);
        resolve({ kind: 'accel', value: redirect });
        return 'stop';
      }
      const accel = conf.accelBuffering ? parsed.all.find(([n]) => n.toLowerCase() === 'x-accel-buffering') : undefined;
      const buffering = accel ? accelBuffering(accel[1], conf.buffering) : conf.buffering;
      const caching = store?.begin(parsed.status, parsed.reason ?? '', up.headers, parsed.headers, buffering) ?? false;
      if (caching) allowSingleRange(r, parsed.headers);
      // the headers the request kept (nginx's headers_out: sticky's cookie, those kept across an internal
      // redirect) come before the upstream's, and are not the cached response's
      parsed.headers.unshift(...keptHeaders(r));
      applyHeadersModule(r, parsed.status, parsed.headers);
      out.head(r, parsed.status, parsed.headers, parsed.reason);
      const finalized = r.takeFilterFinalizeStatus();
      if (finalized !== undefined) {
        // ngx_http_upstream_send_response: a header filter's status finalizes the request, the cache entry freed
        store?.abort();
        stage = 'done';
        settled = true;
        release(false);
        resolve(statusOutcome(finalized));
        return 'stop';
      }
      // nginx finalizes the upstream request once the header of a HEAD, 204 or 304 response is sent, unless it is being cached
      if (!caching && (out.headOnly || parsed.status === 204 || parsed.status === 304)) {
        stage = 'done';
        r.action = 'sending to client';
        settled = true;
        release(false);
        out.end();
        done();
        return 'stop';
      }
      // unbuffered, what came with the header is read before nginx says it reads the body (`ngx_http_upstream_process_non_buffered_upstream`)
      r.action = buffering ? READING_BODY : READING_HEADER;
      spool = new ResponseSpool(out, buffering === conf.buffering ? conf : { ...conf, buffering }, cx.tempFiles, {
        onTempFile: (path) => logRequest(cx, r, 'warn', `an upstream response is buffered to a temporary file ${path}`),
        pauseUpstream: () => {
          spoolPaused = true;
          socket.pause();
        },
        resumeUpstream: () => {
          spoolPaused = false;
          resumeSocket();
        },
        onFileError: (err, path) => fail(upstreamFailure('temp-file', `write() to "${path ?? conf.tempPath.dir}" failed (${systemErrorText(err)})`, READING_BODY)),
      }, room);
      return { contentLength: parsed.contentLength, buffered: buffering };
    };

    const reader = new ResponseReader({ bufferSize: conf.bufferSizeBytes, bodyBufferSize: conf.bufferBytes, keepConn: conf.keepConn, catchStderr: conf.catchStderr }, {
      stderr: (text) => logRequest(cx, r, 'error', `FastCGI sent in stderr: "${text}"`),
      warn: (message) => logRequest(cx, r, 'warn', message),
      header: onHeader,
      stdout: (data) => {
        bodyBytes += data.length;
        if (store && store.write(data) > conf.memoryBytes && !storing) {
          storing = true;
          socket.pause();
          store.drained(() => {
            storing = false;
            if (!settled) resumeSocket();
          });
        }
        if (out.headOnly) return;
        r.bodyBytesSent += data.length;
        spool!.push(data);
      },
      end: (reusable) => {
        stage = 'done';
        r.action = 'sending to client';
        settled = true;
        release(reusable && bodySent);
        // a cached response is in place before the response ends, as nginx renames the file first
        void (store?.commit() ?? Promise.resolve()).then(() => {
          spool!.end();
          return spool!.done;
        }).then(done);
      },
    });

    const onConnect = (): void => {
      clearTimeout(connectTimer);
      state.connectTimeMs = Date.now() - state.startMs;
      stage = 'header';
      r.action = READING_HEADER;
      socket.setTimeout(conf.readTimeoutMs);
      // a body passed on that has arrived whole has its length known, as nginx's preread body has ($content_length of a chunked one)
      if (body?.kind === 'passed' && r.bodyLength === undefined && (body.stream as Readable & { complete?: boolean }).complete) {
        r.bodyLength = body.stream.readableLength;
      }
      const records: Buffer[] = [];
      encodeRecords(FCGI.BEGIN_REQUEST, REQUEST_ID, beginRequestBody(conf.keepConn), records);
      encodeRecords(FCGI.PARAMS, REQUEST_ID, encodeParams(params(r, conf)), records);
      encodeRecords(FCGI.PARAMS, REQUEST_ID, Buffer.alloc(0), records);
      if (!body) {
        encodeRecords(FCGI.STDIN, REQUEST_ID, Buffer.alloc(0), records);
        socket.write(Buffer.concat(records));
      } else {
        sendBody(socket, records, body, conf.sendTimeoutMs, r.loc.clientBodyTimeoutMs).then(() => {
          bodySent = true;
        }, (err: Error) => {
          if (err instanceof BodyTimeoutError) {
            r.timedOut = true;
            giveUp(408);
          } else if (err instanceof BodyRefusedError) {
            logRequest(cx, r, err.level, err.message);
            giveUp(err.status);
          } else if (err instanceof ClientGoneError) {
            logRequest(cx, r, 'info', 'client prematurely closed connection');
            r.status = 400;
            spool?.abort();
            out.abort();
            settle();
          } else fail(mapUpstreamError(err as Error & { code?: string }, 'header'));
        });
      }
    };
    const onTimeout = (): void => fail(upstreamTimeout(stage === 'body' ? 'body' : 'header'));
    const onError = (err: NodeJS.ErrnoException): void => {
      clearTimeout(connectTimer);
      if (stage === 'connect') fail(mapUpstreamError(err, 'connect', false, 'path' in addr ? addr.name : undefined));
      else fail(mapUpstreamError(err, stage === 'body' ? 'body' : 'header', conf.buffering));
    };
    const onClose = (): void => {
      clearTimeout(connectTimer);
      if (settled) return;
      if (stage === 'header') {
        fail(upstreamFailure('premature-close', 'upstream prematurely closed connection', READING_HEADER));
        return;
      }
      if (stage !== 'body') return;
      // the connection's end is the response's without keep_conn (`ngx_http_upstream_process_request`)
      try {
        reader.eof();
      } catch (err) {
        invalid(err as Error);
        return;
      }
      if (conf.keepConn) {
        fail(upstreamFailure('premature-close', 'upstream prematurely closed connection', READING_BODY));
        return;
      }
      stage = 'done';
      r.action = 'sending to client';
      settled = true;
      endAttempt(state, wire, bodyBytes);
      void (store?.commit() ?? Promise.resolve()).then(() => {
        spool!.end();
        return spool!.done;
      }).then(done);
    };
    const onData = (chunk: Buffer): void => {
      if (settled) return;
      if (stage === 'body') r.action = READING_BODY;
      try {
        reader.push(chunk);
        if (stage === 'body' && !bodyTurns.spend(chunk.length) && !yielded) {
          yielded = true;
          socket.pause();
          bodyTurns.wait(() => {
            yielded = false;
            if (!settled) resumeSocket();
          });
        }
      } catch (err) {
        if (err instanceof StderrCaught) {
          if (!settled) next('invalid_header', undefined);
          return;
        }
        if (err instanceof FastcgiResponseError) {
          invalid(err);
          return;
        }
        logRequest(cx, r, 'crit', `jinx internal error reading a FastCGI response: ${(err as Error).stack ?? String(err)}`);
        giveUp(500);
      }
    };
    socket.on('timeout', onTimeout).on('error', onError).on('close', onClose).on('data', onData);
    if (kept) onConnect();
    else socket.once('connect', onConnect);
    if (!conf.ignoreClientAbort) out.onAbort(() => {
      spool?.abort();
      settle();
      // the request ends with its client: its connection closes (an HTTP/1.x one that only shut down its side too)
      out.abort();
    });
  });
}

/**
 * Reads a body passed on as it arrives, each read bounded by
 * `client_body_timeout` (`ngx_http_read_unbuffered_request_body`).
 * @throws BodyTimeoutError, ClientGoneError, BodyRefusedError
 */
async function* passedChunks(stream: Readable, timeoutMs: number): AsyncGenerator<Buffer> {
  const it = stream.iterator({ destroyOnReturn: false }) as AsyncIterator<Buffer>;
  for (;;) {
    let timer: NodeJS.Timeout | undefined;
    const next = await Promise.race([
      it.next().catch((err: { status?: number; level?: LogLevel; message?: string }) => {
        if (err.status === undefined) return undefined;
        throw new BodyRefusedError(err.message ?? '', err.status, err.level ?? 'error');
      }),
      new Promise<'timeout'>((resolve) => {
        timer = setTimeout(() => resolve('timeout'), timeoutMs);
      }),
    ]).finally(() => clearTimeout(timer));
    if (next === 'timeout') throw new BodyTimeoutError();
    if (next === undefined || (next.done && !stream.readableEnded)) throw new ClientGoneError();
    if (next.done) return;
    // what else has arrived goes in the same record, as nginx sends what its buffer holds
    const more = stream.read() as Buffer | null;
    yield more ? Buffer.concat([next.value, more]) : next.value;
  }
}

/**
 * Sends `head` (the BEGIN_REQUEST and PARAMS records) with the request body
 * as STDIN records, then the empty STDIN record. What of the body is at
 * hand goes out in the same write as the params (a body read whole in
 * memory, the part of a passed body already received), as nginx's output
 * chain writes it. A write the server does not take within `sendTimeoutMs`
 * (`fastcgi_send_timeout`) rejects with `SendTimeoutError`; a body passed
 * on as it arrives waits at most `bodyTimeoutMs` for each read.
 */
async function sendBody(socket: Socket, head: Buffer[], body: FastcgiBody, sendTimeoutMs: number, bodyTimeoutMs: number): Promise<void> {
  const write = (records: Buffer[]): Promise<void> => new Promise((res, rej) => {
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
  const stdin = (data: Buffer, into: Buffer[] = []): Buffer[] => {
    encodeRecords(FCGI.STDIN, REQUEST_ID, data, into);
    return into;
  };
  if (body.kind === 'memory') {
    if (body.data.length > 0) stdin(body.data, head);
    await write(stdin(Buffer.alloc(0), head));
    return;
  }
  let source: AsyncIterable<Buffer>;
  if (body.kind === 'passed') {
    const received = body.stream.read() as Buffer | null;
    if (received) stdin(received, head);
    source = passedChunks(body.stream, bodyTimeoutMs);
  } else source = bodyStream(body) as AsyncIterable<Buffer>;
  await write(head);
  // a chunk the body's end came with (an HTTP/2 DATA frame with END_STREAM, the last bytes of a length)
  // goes out in one write with the empty record, as nginx sends both from the read that found the end
  const it = source[Symbol.asyncIterator]();
  let next = await it.next();
  while (!next.done) {
    const following = it.next();
    const peeked = await Promise.race([following, new Promise<undefined>((resolve) => setImmediate(() => resolve(undefined)))]);
    if (peeked?.done) {
      await write(stdin(Buffer.alloc(0), stdin(next.value)));
      return;
    }
    await write(stdin(next.value));
    next = peeked ?? await following;
  }
  await write(stdin(Buffer.alloc(0)));
}
