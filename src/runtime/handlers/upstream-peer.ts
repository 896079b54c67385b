/**
 * Choosing the upstream peer for a request, and the next one after a
 * failure, shared by `proxy_pass` and `fastcgi_pass`
 * (`ngx_http_upstream_init_request`, `ngx_http_upstream_connect`,
 * `ngx_http_upstream_next` in `ngx_http_upstream.c`): a configured group (an
 * `upstream` block or a name resolved at start) goes through its peers by
 * round robin (see round-robin.ts); an address computed from variables is
 * used as is when it is an IP, names an `upstream` block, or is resolved at
 * request time through `resolver` (`no resolver defined to resolve NAME`,
 * `NAME could not be resolved (3: Host not found)`: 502); the addresses of
 * a resolved name are gone through by round robin as a group of their own
 * (`ngx_http_upstream_create_round_robin_peer`).
 */
import { createHash } from 'node:crypto';
import { isIP } from 'node:net';
import type { NextUpstreamConf, UpstreamGroup, UpstreamPeer } from '../../config/route-table.js';
import type { CompiledValue } from '../../config/variables.js';
import { SAMESITE_VALUES, STICKY_MAX_EXPIRES } from '../../config/modules/upstream-sticky.js';
import { cookieTime, MAX_EXPIRES_TEXT } from '../../config/modules/userid.js';
import { systemErrorText } from '../../os-errors.js';
import { logRequest } from '../context.js';
import type { Exchange } from '../exchange.js';
import { upstreamAttempt, type HttpRequestState, type UpstreamState } from '../request.js';
import type { UpstreamFailure } from '../upstream/errors.js';
import { ResolveError } from '../upstream/resolver.js';
import { PeerAttempts, RoundRobin, type NextCondition } from '../upstream/round-robin.js';

/** The peer to connect to, and how the connection may be kept. */
export interface ChosenPeer {
  readonly host: string;
  readonly port: number;
  /** `IP:port` as nginx prints it, `unix:PATH` for a unix domain socket. */
  readonly name: string;
  /** The socket file of a peer on a unix domain socket (absent otherwise). */
  readonly path?: string;
  /** Idle connections the group keeps at most (`keepalive N`; 0: none). */
  readonly keepalive: number;
  readonly keepaliveTimeoutMs: number;
  /** `keepalive_time` of the group: a connection open longer is closed after its request. */
  readonly keepaliveTimeMs: number;
  /** Requests one kept connection carries at most (`keepalive_requests` of the group). */
  readonly keepaliveRequests: number;
  /** The upstream group whose idle connections it uses (nginx keeps them per `upstream` block); undefined for an address from variables. */
  readonly group: string | undefined;
}

/** A peer and, for a group, the attempts it belongs to (undefined: one peer, no retries). */
export interface PeerChoice {
  readonly peer: ChosenPeer;
  readonly attempts: PeerAttempts | undefined;
}

/** `IP:port`, with brackets for IPv6. */
export function peerName(host: string, port: number): string {
  return isIP(host) === 6 ? `[${host}]:${port}` : `${host}:${port}`;
}

/** The `ChosenPeer` of each configured peer, made once (a peer belongs to one group). */
const configured = new WeakMap<UpstreamPeer, ChosenPeer>();

/** Groups made of a name's addresses for one request: no `upstream` block, no kept connections. */
const resolvedGroups = new WeakSet<UpstreamGroup>();

function chosen(group: UpstreamGroup, peer: UpstreamPeer): ChosenPeer {
  let c = configured.get(peer);
  if (!c) {
    c = {
      host: peer.host, port: peer.port, name: peer.name, keepalive: group.keepalive, keepaliveTimeoutMs: group.keepaliveTimeoutMs,
      keepaliveTimeMs: group.keepaliveTimeMs, keepaliveRequests: group.keepaliveRequests, group: resolvedGroups.has(group) ? undefined : group.name,
      ...(peer.unixPath !== undefined ? { path: peer.unixPath } : {}),
    };
    configured.set(peer, c);
  }
  return c;
}

/**
 * nginx's `no live upstreams while connecting to upstream`: the `upstream:`
 * field names the group (`http://backend/uri`). Returns 502, the status to answer.
 */
function logNoLiveUpstreams(ex: Exchange, group: UpstreamGroup, scheme: string, uri: string): number {
  const { r, cx } = ex;
  const state = upstreamAttempt(`${scheme}://${group.name}${uri}`, group.name, attemptsUpTo(r.upstream));
  state.status = 502;
  state.responseTimeMs = 0;
  r.upstream = state;
  r.action = 'connecting to upstream';
  logRequest(cx, r, 'error', 'no live upstreams');
  return 502;
}

/** The attempts of a request up to and including `state`, oldest first. */
function attemptsUpTo(state: UpstreamState | undefined): readonly UpstreamState[] {
  return state ? [...state.earlier, state] : [];
}

/**
 * Ends an attempt (nginx's `ngx_http_upstream_finalize_request` and
 * `ngx_http_upstream_next` fill in the state): its response time, and the
 * bytes of its connection when it had one.
 */
export function endAttempt(state: UpstreamState | undefined, wire?: { readonly sent: number; readonly received: number }, bodyBytes = 0): void {
  if (!state || state.responseTimeMs !== undefined) return;
  state.responseTimeMs = Date.now() - state.startMs;
  state.responseLength = bodyBytes;
  if (wire) {
    state.bytesSent = wire.sent;
    state.bytesReceived = wire.received;
  }
}

/**
 * The first peer of `group` for a request with next-upstream settings
 * `conf`, by the group's balancer (`ip_hash` hashes the request's client
 * address, `hash` its key) and `sticky`; when none is usable, logs `no live
 * upstreams` and returns 502, the status to answer. `scheme` and `uri` make
 * the log's `upstream:` field. A promise only while `sticky learn` asks the
 * master for a session.
 */
export function firstPeer(
  ex: Exchange, group: UpstreamGroup, conf: NextUpstreamConf, scheme: string, uri: string,
): PeerChoice | number | Promise<PeerChoice | number> {
  if (!group.sticky) return pickFirst(ex, group, conf, scheme, uri, undefined, undefined);
  // ngx_http_upstream_sticky_get_id: a server ID, or with `learn` a session
  const id = firstValue(ex.r, group.sticky.lookup);
  const learn = group.sticky.learn;
  if (!learn || id === undefined) return pickFirst(ex, group, conf, scheme, uri, id, id);
  const found = ex.cx.sessions.find(learn.zone, sessionKey(id));
  if (found instanceof Promise) return found.then((data) => pickFirst(ex, group, conf, scheme, uri, id, data?.toString('latin1')));
  return pickFirst(ex, group, conf, scheme, uri, id, found?.toString('latin1'));
}

/** `firstPeer` once the server ID the request names (`sid`), if any, is known; `id` is the request's own sticky value. */
function pickFirst(
  ex: Exchange, group: UpstreamGroup, conf: NextUpstreamConf, scheme: string, uri: string, id: string | undefined, sid: string | undefined,
): PeerChoice | number {
  const key = group.hashKey ? group.hashKey.evaluate(ex.r) : ex.r.clientAddr;
  const attempts = new PeerAttempts(ex.cx.upstreams.roundRobin, group, conf, key, sid);
  if (id !== undefined) stickyIds.set(attempts, id);
  // the peer is held (for the counts of least_conn and max_conns) until the request ends, whatever
  // ends it: the main request, or a background subrequest that may outlive it
  const owner = ownerOf(ex.r);
  const peer = attempts.pick();
  owner.atEnd(() => attempts.finish());
  if (!peer) return logNoLiveUpstreams(ex, group, scheme, uri);
  setStickyCookie(ex.r, attempts, peer);
  return { peer: chosen(group, peer), attempts };
}

/** The request whose end frees an upstream peer: the main request, or a background subrequest that may outlive it. */
function ownerOf(r: HttpRequestState): HttpRequestState {
  let owner = r;
  while (owner.parent && !owner.background) owner = owner.parent;
  return owner;
}

/** The sticky value each request's attempts started with (nginx's `stp->id`), for `sticky learn`. */
const stickyIds = new WeakMap<PeerAttempts, string>();

/** What a `sticky learn` zone keys a session by: the MD5 of its ID (nginx's `ngx_http_upstream_sticky_sess_init_key`). */
function sessionKey(id: string): string {
  return createHash('md5').update(id, 'latin1').digest('hex');
}

/**
 * `ngx_http_upstream_sticky_learn_peer`, for a response from a peer of a
 * group with `sticky learn`: the first non-empty `create` variable names a
 * session kept for the peer; without one, a session the request named is
 * kept alive (its peer updated). With `header` now, else when the request
 * ends; `$upstream_*` must know the response header (`UpstreamState.headers`).
 */
export function stickyAnswered(ex: Exchange, attempts: PeerAttempts | undefined, peer: UpstreamPeer | undefined): void {
  const learn = attempts?.group.sticky?.learn;
  if (!learn || peer?.sid === undefined) return;
  const id = stickyIds.get(attempts!);
  const { r, cx } = ex;
  const keep = (): void => {
    const created = firstValue(r, learn.create);
    const data = Buffer.from(peer.sid!, 'latin1');
    const expiresAtMs = Date.now() + learn.timeoutMs;
    if (created !== undefined) return cx.sessions.keep(learn.zone, sessionKey(created), data, expiresAtMs, learn.maxSessions);
    if (id === undefined) return;
    const key = sessionKey(id);
    const known = cx.sessions.find(learn.zone, key);
    const refresh = (found: Buffer | undefined): void => {
      if (found) cx.sessions.keep(learn.zone, key, data, expiresAtMs, learn.maxSessions);
    };
    if (known instanceof Promise) void known.then(refresh);
    else refresh(known);
  };
  if (learn.afterHeader) keep();
  else ownerOf(r).atEnd(keep);
}

/** The first non-empty value of `values` for the request (`ngx_http_upstream_sticky_get_id`). */
function firstValue(r: HttpRequestState, values: readonly CompiledValue[]): string | undefined {
  for (const v of values) {
    const value = v.evaluate(r);
    if (value !== '') return value;
  }
  return undefined;
}

/** The `Set-Cookie` entry `sticky cookie` keeps in a request's headers for the peers of one upstream request (nginx's `stp->cookie`). */
const stickyEntries = new WeakMap<PeerAttempts, [string, string]>();

/**
 * `ngx_http_upstream_sticky_cookie_insert`, after a peer is picked: the
 * request's kept headers (nginx's `headers_out`, which the upstream's
 * headers follow, and error pages and internal redirects keep) get the
 * cookie naming it, `NAME=ID`, then `expires` and `max-age`, `domain`,
 * `httponly`, `secure`, `samesite` (a value from variables that is not
 * strict, lax or none is `strict`), `path`; a later peer of the same
 * upstream request replaces the value. Nothing without `sticky cookie`.
 */
function setStickyCookie(r: HttpRequestState, attempts: PeerAttempts, peer: UpstreamPeer): void {
  const cookie = attempts.group.sticky?.cookie;
  if (!cookie || peer.sid === undefined) return;
  let out = `${cookie.name}=${peer.sid}`;
  if (cookie.expiresSec === STICKY_MAX_EXPIRES) out += `${MAX_EXPIRES_TEXT}; max-age=315360000`;
  else if (cookie.expiresSec !== undefined) out += `; expires=${cookieTime(Math.floor(Date.now() / 1000) + cookie.expiresSec)}; max-age=${cookie.expiresSec}`;
  const domain = cookie.domain?.evaluate(r) ?? '';
  if (domain !== '') out += `; domain=${domain}`;
  if (cookie.httponly) out += '; httponly';
  if (cookie.secure) out += '; secure';
  let samesite = cookie.samesite?.evaluate(r) ?? '';
  if (samesite !== '' && cookie.samesite!.constant === undefined && !SAMESITE_VALUES.includes(samesite.toLowerCase())) samesite = 'strict';
  if (samesite !== '') out += `; samesite=${samesite}`;
  if (cookie.path !== '') out += `; path=${cookie.path}`;
  const entry = stickyEntries.get(attempts);
  if (entry) {
    entry[1] = out;
    return;
  }
  const added: [string, string] = ['Set-Cookie', out];
  stickyEntries.set(attempts, added);
  r.pendingHeaders.push(added);
}

/** The client status nginx answers when it gives up on a peer for `condition` (`ngx_http_upstream_next`). */
function statusFor(condition: NextCondition): number {
  if (condition === 'timeout') return 504;
  if (condition.startsWith('http_')) return Number(condition.slice(5));
  return 502;
}

/** What `nextUpstream` needs to know of the attempt that failed. */
export interface FailedAttempt {
  readonly condition: NextCondition;
  /** The failure to log; undefined for a response status that is retried (`http_502` …), which nginx does not log. */
  readonly failure: UpstreamFailure | undefined;
  /** Part of the request was written to the peer (nginx's `u->request_sent`). */
  readonly requestSent: boolean;
  /** The request body is read while it is sent (`proxy_request_buffering off`). */
  readonly bodyUnbuffered: boolean;
  readonly scheme: string;
  readonly uri: string;
}

/**
 * `ngx_http_upstream_next`: logs the failure (a timeout after the peer is
 * released, as nginx does), releases the peer (`upstream server temporarily
 * disabled` when it reached `max_fails`), and returns the next peer when
 * the conditions allow another one, else the status to answer.
 */
export function nextUpstream(ex: Exchange, attempts: PeerAttempts | undefined, failed: FailedAttempt): ChosenPeer | number {
  const { r, cx } = ex;
  const { condition, failure } = failed;
  if (failure) r.action = failure.action;
  if (failure && condition !== 'timeout') logRequest(cx, r, failure.level ?? 'error', failure.message);
  if (attempts?.release(condition)) logRequest(cx, r, 'warn', 'upstream server temporarily disabled');
  if (failure && condition === 'timeout') logRequest(cx, r, 'error', failure.message);
  const status = failure?.status ?? statusFor(condition);
  if (r.upstream) r.upstream.status = status;
  endAttempt(r.upstream);
  if (!attempts || !attempts.mayRetry(condition, r.method, failed.requestSent, failed.bodyUnbuffered)) return status;
  const peer = attempts.pick();
  if (!peer) return logNoLiveUpstreams(ex, attempts.group, failed.scheme, failed.uri);
  setStickyCookie(r, attempts, peer);
  return chosen(attempts.group, peer);
}

/**
 * Starts the `$upstream_*` state of an attempt at `peer`; on a `retry`,
 * after the request's earlier attempts (each ended).
 */
export function startAttempt(ex: Exchange, logName: string, peer: ChosenPeer | { readonly name: string }, retry: boolean): UpstreamState {
  const { r } = ex;
  const earlier = retry ? r.upstream : undefined;
  endAttempt(earlier);
  r.upstream = upstreamAttempt(logName, peer.name, attemptsUpTo(earlier));
  return r.upstream;
}

/**
 * The addresses a name resolved to at request time, as one request's group
 * (`ngx_http_upstream_create_round_robin_peer`: weight 1, `max_fails=1`,
 * `fail_timeout=10s`): another address is tried after a failure. Their
 * balancing state is the request's own.
 */
function resolvedGroup(name: string, addrs: readonly string[], port: number, conf: NextUpstreamConf): PeerChoice {
  const group: UpstreamGroup = {
    name, keepalive: 0, keepaliveTimeoutMs: 60_000, keepaliveTimeMs: 3_600_000, keepaliveRequests: 0, balancer: 'round_robin', hashKey: undefined,
    zone: undefined,
    peers: addrs.map((addr) => ({
      name: peerName(addr, port), host: addr, port, unixPath: undefined, server: name, weight: 1, backup: false, down: false, maxConns: 0,
      maxFails: 1, failTimeoutMs: 10_000,
    })),
  };
  resolvedGroups.add(group);
  const attempts = new PeerAttempts(new RoundRobin(), group, conf);
  return { peer: chosen(group, attempts.pick()!), attempts };
}

/**
 * The peer for a host and port computed at request time, or the status to
 * answer (502 when the name cannot be resolved). While the
 * name is resolved, a client that leaves ends the request (499, nginx's
 * `[info] epoll_wait() reported that client prematurely closed connection`)
 * unless `ignoreClientAbort` is set.
 */
export async function dynamicPeer(
  ex: Exchange, hostText: string, port: number | undefined, defaultPort: number, conf: NextUpstreamConf & { readonly ignoreClientAbort: boolean },
  scheme: string, uri: string,
): Promise<PeerChoice | number> {
  const { r, cx } = ex;
  const host = hostText.replace(/^\[|\]$/g, '');
  const effectivePort = port ?? defaultPort;
  const fixed = (addr: string): PeerChoice => ({
    peer: { host: addr, port: effectivePort, name: peerName(addr, effectivePort), keepalive: 0, keepaliveTimeoutMs: 60_000, keepaliveTimeMs: 3_600_000, keepaliveRequests: 1000,
      group: undefined },
    attempts: undefined,
  });
  if (isIP(host)) return fixed(host);
  // ngx_http_upstream_init_request: an upstream block by its name without a port, or the
  // implicit upstream of a static proxy_pass/fastcgi_pass to the same host and port
  const key = hostText.toLowerCase();
  const group = cx.table.upstreams.get(port === undefined ? key : `${key}:${port}`);
  if (group) {
    return firstPeer(ex, group, conf, scheme, uri);
  }
  const resolverConf = r.loc.resolver;
  // a `resolver` with parameters only has no server to ask (nginx refuses it: `no name servers defined`)
  if (!resolverConf || resolverConf.servers.length === 0) {
    logRequest(cx, r, 'error', `no resolver defined to resolve ${hostText}`);
    return 502;
  }
  const client = new AbortController();
  let clientError: NodeJS.ErrnoException | undefined;
  if (!conf.ignoreClientAbort) {
    ex.out.onAbort((err) => {
      clientError = err;
      client.abort();
    });
  }
  let addrs: readonly string[];
  try {
    addrs = await cx.resolver.resolve(hostText, resolverConf, r.loc.resolverTimeoutMs, client.signal);
  } catch (err) {
    if (client.signal.aborted) {
      const errno = clientError?.code !== undefined && /^E[A-Z]+$/.test(clientError.code) ? ` (${systemErrorText(clientError)})` : '';
      // (an HTTP/2 stream's end was logged by the stream: ngx_http_upstream_check_broken_connection)
      if (r.protocol !== 'HTTP/2.0') logRequest(cx, r, 'info', `epoll_wait() reported that client prematurely closed connection${errno}`);
      return 499;
    }
    logRequest(cx, r, 'error', err instanceof ResolveError ? err.message : `${hostText} could not be resolved`);
    return 502;
  }
  if (addrs.length === 1) return fixed(addrs[0]!);
  return resolvedGroup(hostText, addrs, effectivePort, conf);
}
