/**
 * The upstream module (`src/http/ngx_http_upstream.c`,
 * `ngx_http_upstream_keepalive_module.c`): `upstream NAME { server …; keepalive N; }`.
 * Names in `server` are resolved when the configuration is read, as nginx
 * does with `ngx_parse_url`; a name that does not resolve is
 * `host not found in upstream "NAME:PORT"`.
 */
import { createHash } from 'node:crypto';
import { isIP } from 'node:net';
import type { Directive, SourceLoc } from '../../parser/ast.js';
import { ConfigError } from '../../errors.js';
import type { LevelNode } from '../check.js';
import { groupKey, levelsInOrder, type CompileContext } from '../compile-context.js';
import {
  DirectiveFailure, fail, LevelConf, ruleSetter, parseNumber, parseMsec, parseSize, parseTime, rule, slot, type ConfChain, type DirectiveSpec, type SetContext, type TempPathValue,
  type Slot,
} from '../spec.js';
import type { CompiledValue, ValueSource, VariableRegistry } from '../variables.js';
import type { StickyDecl, UpstreamBalancer, UpstreamDecl, UpstreamServerDecl } from '../scope.js';
import { parseUnixPath } from '../listen.js';
import type { CgiPrefix } from './cgi-upstream.js';

const UPSTREAM = 'ngx_http_upstream_module';
const KEEPALIVE = 'ngx_http_upstream_keepalive_module';

/** The `upstream` block a directive is in. */
export function currentUpstream(cx: SetContext): UpstreamDecl {
  return cx.scope.upstreams.get(cx.parentDirective!.args[0]!.toLowerCase())!;
}

/** Splits `host[:port]`, `[v6][:port]`; the port is undefined when absent. */
export function splitHostPort(text: string): { host: string; port: number | undefined } | undefined {
  const v6 = /^\[([^\]]+)\](?::(\d+))?$/.exec(text);
  if (v6) return { host: v6[1]!, port: v6[2] === undefined ? undefined : Number(v6[2]) };
  const m = /^([^:/]+)(?::(\d+))?$/.exec(text);
  if (!m) return undefined;
  return { host: m[1]!, port: m[2] === undefined ? undefined : Number(m[2]) };
}

/** `NGX_HTTP_UPSTREAM_SID_LEN`: a server ID (`route=`) is at most this long, the length of an MD5 in hex. */
const SID_LENGTH = 32;

/**
 * `ngx_http_upstream_server` (and `ngx_stream_upstream_server`): the
 * parameters, then the address, which must resolve now. Without a port the
 * address takes `defaultPort`, or is `no port in upstream "…"` (stream).
 * `sticky`: the http parameters of `sticky` (`route=`, `drain`) are known.
 * @throws DirectiveFailure `invalid parameter "…"`, `route is empty`, `route is longer than 32`, and the address's
 */
export function parseUpstreamServer(
  d: Directive, cx: SetContext, defaultPort: number | undefined, balancer: UpstreamBalancer = 'round_robin', sticky = false,
): UpstreamServerDecl {
  let weight = 1;
  let maxConns = 0;
  let maxFails = 1;
  let failTimeoutMs = 10_000;
  let backup = false;
  let down = false;
  let drain = false;
  let route: string | undefined;
  for (const p of d.args.slice(1)) {
    const num = (prefix: string): number => {
      const n = parseNumber(p.slice(prefix.length));
      if (n === undefined) fail(`invalid parameter "${p}"`);
      return n;
    };
    if (p.startsWith('weight=')) {
      weight = num('weight=');
      if (weight === 0) fail(`invalid parameter "${p}"`);
    } else if (p.startsWith('max_fails=')) maxFails = num('max_fails=');
    else if (p.startsWith('max_conns=')) maxConns = num('max_conns=');
    else if (p.startsWith('fail_timeout=')) {
      const t = parseTime(p.slice(13), true);
      if (t === undefined) fail(`invalid parameter "${p}"`);
      failTimeoutMs = t * 1000;
    } else if (p === 'backup') {
      // ip_hash, hash and random leave NGX_HTTP_UPSTREAM_BACKUP out of the block's flags
      if (!BACKUP_BALANCERS.has(balancer)) fail(`balancing method does not support parameter "${p}"`);
      backup = true;
    }
    else if (p === 'down') down = true;
    else if (sticky && p === 'drain') drain = true;
    else if (sticky && p.startsWith('route=')) {
      route = p.slice('route='.length);
      if (route === '') fail('route is empty');
      if (route.length > SID_LENGTH) fail(`route is longer than ${SID_LENGTH}`);
    } else fail(`invalid parameter "${p}"`);
  }
  const addr = d.args[0]!;
  if (addr.startsWith('unix:')) {
    const unixPath = parseUnixPath(addr, (err) => fail(`${err} in upstream "${addr}"`));
    return { address: addr, host: addr, port: 0, unixPath, weight, maxConns, maxFails, failTimeoutMs, backup, down, drain, route, loc: d.loc };
  }
  const hp = splitHostPort(addr);
  if (!hp || (hp.port !== undefined && (hp.port < 1 || hp.port > 65535))) {
    // ngx_parse_inet_url: the port is what follows the first ':'
    if (!addr.startsWith('[') && addr.includes(':')) fail(`invalid port in upstream "${addr}"`);
    fail(`invalid host in upstream "${addr}"`);
  }
  if (!isIP(hp.host) && !cx.scope.hosts.lookup(hp.host)) fail(`host not found in upstream "${addr}"`);
  const port = hp.port ?? defaultPort;
  if (port === undefined) fail(`no port in upstream "${addr}"`);
  return { address: addr, host: hp.host, port, unixPath: undefined, weight, maxConns, maxFails, failTimeoutMs, backup, down, drain, route, loc: d.loc };
}

/** The methods whose servers may be `backup` (round robin, `least_conn`). */
const BACKUP_BALANCERS: ReadonlySet<UpstreamBalancer> = new Set(['round_robin', 'least_conn']);

const setServer = (d: Directive, cx: SetContext): void => {
  const up = currentUpstream(cx);
  up.servers.push(parseUpstreamServer(d, cx, 80, up.balancer, true));
};

/** `keepalive_timeout`, `keepalive_requests` and `keepalive_time` were set in this upstream block (msec and num slots in nginx). */
const keepaliveTimeoutSet = slot('upstream keepalive_timeout', false);
const keepaliveRequestsSet = slot('upstream keepalive_requests', false);
const keepaliveTimeSet = slot('upstream keepalive_time', false);

/** A load balancing method (or `sticky`, which wraps the one before it) has been chosen in this upstream block. */
export const balancerSet = slot('upstream balancer', false);

/**
 * `ngx_http_upstream_least_conn` (`ngx_http_upstream_least_conn_module.c`),
 * `ngx_http_upstream_ip_hash` (`ngx_http_upstream_ip_hash_module.c`),
 * `ngx_http_upstream_hash` (`ngx_http_upstream_hash_module.c`: `KEY
 * [consistent]`), `ngx_http_upstream_random`
 * (`ngx_http_upstream_random_module.c`: `[two [least_conn]]`): the block's
 * method; choosing a second one is the warning `load balancing method
 * redefined`, and the last one chosen is used. A parameter other than
 * those is `invalid parameter "…"`, after the warning, as nginx checks it.
 */
function setBalancer(d: Directive, cx: SetContext): void {
  const up = currentUpstream(cx);
  // ngx_http_upstream_hash compiles its key before it looks at the method
  const key = d.name === 'hash' ? cx.scope.variables.value(d.args[0]!, d.loc) : undefined;
  if (cx.level.own(balancerSet)) cx.warn('load balancing method redefined', 'balancer-redefined');
  cx.level.replace(balancerSet, true, d.loc);
  // the method replaces the one sticky wraps, and sticky with it
  if (up.sticky) up.sticky.active = false;
  up.hashKey = key;
  up.balancer = balancerOf(d);
}

/**
 * The method a balancer directive chooses (`ip_hash`, `least_conn`, `hash
 * KEY [consistent]`, `random [two [least_conn]]`), for http's and stream's
 * `upstream` blocks alike.
 * @throws DirectiveFailure `invalid parameter "…"`
 */
export function balancerOf(d: Directive): UpstreamBalancer {
  if (d.name === 'hash') {
    const mode = d.args[1];
    if (mode !== undefined && mode !== 'consistent') fail(`invalid parameter "${mode}"`);
    return mode === undefined ? 'hash' : 'chash';
  }
  if (d.name === 'random') {
    const [two, leastConn] = d.args;
    if (two !== undefined && two !== 'two') fail(`invalid parameter "${two}"`);
    if (leastConn !== undefined && leastConn !== 'least_conn') fail(`invalid parameter "${leastConn}"`);
    return two === undefined ? 'random' : 'random_two';
  }
  return d.name === 'ip_hash' ? 'ip_hash' : 'least_conn';
}

/**
 * The `NAME [SIZE]` of an upstream block's `zone` (http's and stream's);
 * without SIZE, 0 bytes.
 * @throws DirectiveFailure `invalid zone name "…"`, `invalid zone size "…"`,
 *   `zone "…" is too small` (under eight pages)
 */
export function upstreamZoneParams(d: Directive): { readonly name: string; readonly sizeBytes: number } {
  const [name, sizeText] = d.args as [string, string | undefined];
  if (name.length === 0) fail(`invalid zone name "${name}"`);
  if (sizeText === undefined) return { name, sizeBytes: 0 };
  const parsed = parseSize(sizeText);
  if (parsed === undefined) fail(`invalid zone size "${sizeText}"`);
  if (parsed < 8 * 4096) fail(`zone "${name}" is too small`);
  return { name, sizeBytes: parsed };
}

/**
 * `ngx_http_upstream_zone` (`ngx_http_upstream_zone_module.c`): `NAME
 * [SIZE]`, at least eight pages; the zone is shared memory of the upstream module.
 */
function setZone(d: Directive, cx: SetContext): void {
  const { name, sizeBytes } = upstreamZoneParams(d);
  cx.scope.sharedZone(name, sizeBytes, UPSTREAM);
  currentUpstream(cx).zone = name;
}

/**
 * An upstream block's time directive of ngx_http_upstream_keepalive_module
 * (`ngx_conf_set_msec_slot`): once per block, a time into `field`.
 */
function upstreamTime(name: string, set: typeof keepaliveTimeSet, field: 'keepaliveTimeoutMs' | 'keepaliveTimeMs'): DirectiveSpec {
  return {
    name, module: KEEPALIVE, contexts: ['upstream'], args: ['TAKE1'], effect: 'runtime',
    set: (d, cx) => {
      if (cx.level.own(set)) throw new DirectiveFailure('is duplicate');
      const ms = parseMsec(d.args[0]!);
      if (ms === undefined) throw new DirectiveFailure('invalid value');
      currentUpstream(cx)[field] = ms;
      cx.level.set(set, true, d.loc);
    },
  };
}

export const upstreamDirectives: readonly DirectiveSpec[] = [
  {
    name: 'upstream', module: UPSTREAM, contexts: ['http'], args: ['TAKE1'], block: 'context', effect: 'runtime',
    set: (d, cx) => {
      const name = d.args[0]!.toLowerCase();
      const existing = cx.scope.upstreams.get(name);
      if (existing?.explicit) fail(`duplicate upstream "${d.args[0]}"`);
      cx.scope.upstreams.set(name, {
        name: d.args[0]!, loc: d.loc, explicit: true, servers: [], keepalive: 32, keepaliveSet: false, keepaliveTimeoutMs: 60_000,
        keepaliveTimeMs: 3_600_000, keepaliveRequests: 1000, balancer: 'round_robin', hashKey: undefined, zone: undefined,
      });
      return { context: 'upstream', level: new LevelConf() };
    },
  },
  { name: 'server', module: UPSTREAM, contexts: ['upstream'], args: ['1MORE'], effect: 'runtime', resolves: 'server', set: setServer },
  {
    name: 'keepalive', module: KEEPALIVE, contexts: ['upstream'], args: ['TAKE1', 'TAKE2'], effect: 'runtime',
    set: (d, cx) => {
      const up = currentUpstream(cx);
      if (up.keepaliveSet) throw new DirectiveFailure('is duplicate');
      const n = parseNumber(d.args[0]!);
      if (n === undefined) fail(`invalid value "${d.args[0]}" in "${d.name}" directive`);
      if (d.args[1] !== undefined && d.args[1] !== 'local') fail(`invalid parameter "${d.args[1]}"`);
      up.keepalive = n;
      up.keepaliveSet = true;
    },
  },
  upstreamTime('keepalive_timeout', keepaliveTimeoutSet, 'keepaliveTimeoutMs'),
  {
    name: 'keepalive_requests', module: KEEPALIVE, contexts: ['upstream'], args: ['TAKE1'], effect: 'runtime',
    set: (d, cx) => {
      if (cx.level.own(keepaliveRequestsSet)) throw new DirectiveFailure('is duplicate');
      const n = parseNumber(d.args[0]!);
      if (n === undefined) throw new DirectiveFailure('invalid number');
      currentUpstream(cx).keepaliveRequests = n;
      cx.level.set(keepaliveRequestsSet, true, d.loc);
    },
  },
  upstreamTime('keepalive_time', keepaliveTimeSet, 'keepaliveTimeMs'),
  {
    name: 'zone', module: 'ngx_http_upstream_zone_module', contexts: ['upstream'], args: ['TAKE1', 'TAKE2'], effect: 'runtime',
    note: 'the peers\' failures (max_fails, fail_timeout) and connection counts (max_conns, least_conn, random two) count in every worker, each worker telling the others through the master; the round-robin position stays each worker\'s',
    set: ruleSetter('zone', rule.repeatable(setZone)),
  },
  {
    name: 'least_conn', module: 'ngx_http_upstream_least_conn_module', contexts: ['upstream'], args: ['NOARGS'], effect: 'runtime',
    set: setBalancer,
  },
  { name: 'ip_hash', module: 'ngx_http_upstream_ip_hash_module', contexts: ['upstream'], args: ['NOARGS'], effect: 'runtime', set: setBalancer },
  { name: 'hash', module: 'ngx_http_upstream_hash_module', contexts: ['upstream'], args: ['TAKE1', 'TAKE2'], effect: 'runtime', set: setBalancer },
  {
    name: 'random', module: 'ngx_http_upstream_random_module', contexts: ['upstream'], args: ['NOARGS', 'TAKE1', 'TAKE2'], effect: 'runtime',
    set: setBalancer,
  },
];

/** A resolved upstream group. */
export interface UpstreamGroup {
  readonly name: string;
  readonly peers: readonly UpstreamPeer[];
  /** Idle connections kept (`keepalive`; 0 for a group made from a `proxy_pass`/`fastcgi_pass` address). */
  readonly keepalive: number;
  readonly keepaliveTimeoutMs: number;
  /** `keepalive_time`: a connection open longer than this is closed after its request. */
  readonly keepaliveTimeMs: number;
  /** Requests a kept connection carries at most (`keepalive_requests`). */
  readonly keepaliveRequests: number;
  /** How a peer is picked (`ip_hash`, `least_conn`, `hash`, `random` …, else round robin). */
  readonly balancer: UpstreamBalancer;
  /** `hash KEY`: the key, evaluated per request (undefined for another method). */
  readonly hashKey: CompiledValue | undefined;
  /** `zone NAME`: the peers' failures and connections count in every worker (without it, in each worker alone, as nginx's). */
  readonly zone: string | undefined;
  /** `sticky` (an `upstream` block's, when no balancing method follows it). */
  readonly sticky?: StickyConf;
}

/** `sticky cookie` or `sticky route` of a group, its values bound (`ngx_http_upstream_sticky_srv_conf_t`). */
export interface StickyConf {
  /** The variables whose first non-empty value is the server ID the request asks for. */
  readonly lookup: readonly CompiledValue[];
  /** `sticky cookie`: the cookie that names the chosen server. */
  readonly cookie: StickyCookieConf | undefined;
  /** `sticky learn`: the sessions learned from responses. */
  readonly learn?: StickyLearnConf;
}

/** `sticky learn`: where the sessions are kept and what names one. */
export interface StickyLearnConf {
  /** The variables whose first non-empty value, once the server answered, is the session to learn. */
  readonly create: readonly CompiledValue[];
  /** The shared zone's name. */
  readonly zone: string;
  /** Sessions the zone holds, about 128 bytes each (nginx: "32k ~ 200 sessions, 1m ~ 8000 sessions"); the least recently used goes first. */
  readonly maxSessions: number;
  readonly timeoutMs: number;
  /** `header`: learned with the response header, not at the request's end. */
  readonly afterHeader: boolean;
}

/** The `Set-Cookie` of `sticky cookie NAME …`. */
export interface StickyCookieConf {
  readonly name: string;
  /** `expires=` in seconds, `STICKY_MAX_EXPIRES` for `max`; undefined: none. */
  readonly expiresSec: number | undefined;
  readonly domain: CompiledValue | undefined;
  /** `path=`: '' for none. */
  readonly path: string;
  readonly httponly: boolean;
  readonly secure: boolean;
  /** `samesite=`: a constant already checked, or a value whose result is checked per request. */
  readonly samesite: CompiledValue | undefined;
}

/** One address of an upstream group. */
export interface UpstreamPeer {
  /** `IP:port` as nginx prints it (`[::1]:80` for IPv6, `unix:PATH` for a unix domain socket). */
  readonly name: string;
  /** The IP address, or `unix:PATH`. */
  readonly host: string;
  /** The port; 0 for a unix domain socket. */
  readonly port: number;
  /** The socket file of a peer on a unix domain socket. */
  readonly unixPath: string | undefined;
  /** The `server` address as written (`localhost:8080`), which consistent hashing hashes; the same for every address of a name. */
  readonly server: string;
  readonly weight: number;
  readonly backup: boolean;
  /** `down`, or `drain`: not chosen by the group's method. */
  readonly down: boolean;
  /** `drain` without `down`: still chosen by `sticky` for a request that names it. */
  readonly draining?: boolean;
  /** The server ID `sticky` knows it by: its `route=`, else the MD5 of its name in hex; undefined outside `upstream` blocks of http. */
  readonly sid?: string;
  /** `max_conns`: requests at once at most; 0: no limit. */
  readonly maxConns: number;
  readonly maxFails: number;
  readonly failTimeoutMs: number;
}

/**
 * `proxy_next_upstream` and its kin (`ngx_http_upstream_conf_t`'s
 * `next_upstream`, `next_upstream_tries`, `next_upstream_timeout`).
 */
export interface NextUpstreamConf {
  /** nginx's condition names (`error`, `timeout`, `invalid_header`, `http_502`, `non_idempotent` …); empty with `off`. */
  readonly nextUpstream: ReadonlySet<string>;
  /** At most this many servers per request; 0: no limit. */
  readonly nextUpstreamTries: number;
  /** No further server after this many ms from the first; 0: no limit. */
  readonly nextUpstreamTimeoutMs: number;
}

/**
 * What proxy and FastCGI share of nginx's `ngx_http_upstream_conf_t`
 * (`proxy_*` / `fastcgi_*` of the same name): timeouts, the header buffer,
 * buffering and spooling of the response, and the request body.
 */
export interface UpstreamConf extends NextUpstreamConf {
  readonly connectTimeoutMs: number;
  readonly sendTimeoutMs: number;
  readonly readTimeoutMs: number;
  /** Bytes allowed for the response header (`*_buffer_size`). */
  readonly bufferSizeBytes: number;
  readonly interceptErrors: boolean;
  /** Lowercase names of response headers not passed to the client (`*_hide_header`, `*_pass_header`). */
  readonly hideHeaders: ReadonlySet<string>;
  readonly passRequestBody: boolean;
  readonly passRequestHeaders: boolean;
  readonly ignoreClientAbort: boolean;
  /** `*_buffering`: read the upstream at full speed, spooling what the client has not taken. */
  readonly buffering: boolean;
  /** Whether an upstream's `X-Accel-Buffering` turns buffering on or off (not in `*_ignore_headers`). */
  readonly accelBuffering: boolean;
  /** Whether an upstream's `X-Accel-Redirect` is followed (not in `*_ignore_headers`). */
  readonly accelRedirect: boolean;
  /** Whether an upstream's `X-Accel-Limit-Rate` sets the response's rate (not in `*_ignore_headers`). */
  readonly accelLimitRate: boolean;
  /** Whether an upstream's `X-Accel-Charset` names the response's charset (not in `*_ignore_headers`). */
  readonly accelCharset: boolean;
  /** `*_request_buffering`: read the whole request body before connecting. */
  readonly requestBuffering: boolean;
  /** Bytes of a response kept in memory before spooling (`*_buffers` number × size). */
  readonly memoryBytes: number;
  /** Size of one of `*_buffers`: with buffering, the client gets the body in whole buffers. */
  readonly bufferBytes: number;
  readonly tempPath: TempPathValue;
  readonly maxTempFileBytes: number;
  /** `*_busy_buffers_size`: bytes handed to the client connection and not yet sent, at most. */
  readonly busyBytes: number;
  /** `*_temp_file_write_size`: bytes written to the temp file at a time, at most. */
  readonly tempFileWriteBytes: number;
}

/** A static `proxy_pass`/`fastcgi_pass` address, whose group is made when upstreams are resolved. */
export interface PassAddress {
  readonly host: string;
  readonly port: number | undefined;
  /** The port of an address without one (the URL scheme's); undefined: `no port in upstream`. */
  readonly defaultPort: number | undefined;
  readonly loc: SourceLoc;
}

/** The upstream groups of one compile, by key (`groupKey`). */
const GROUPS = Symbol('upstream groups');

/** The upstream groups resolved by `resolveUpstreams`, by key. */
export function upstreamGroups(cx: CompileContext): Map<string, UpstreamGroup> {
  return cx.memo(GROUPS, () => new Map<string, UpstreamGroup>());
}

/**
 * `ngx_http_upstream_init_main_conf`: every `upstream` block's servers, the
 * names resolved before the check; then, every level in configuration order
 * (upstream blocks too), the group of each static address that `passes`
 * (one function per module, in module order) find at the level.
 * @throws ConfigError `no servers are inside upstream`, `no servers in upstream "NAME"` (backup servers only), and those of an implicit group
 */
export function resolveUpstreams(
  cx: CompileContext, httpNode: LevelNode, passes: readonly ((conf: LevelConf) => PassAddress | undefined)[],
): void {
  const groups = upstreamGroups(cx);
  for (const decl of cx.scope.upstreams.values()) {
    if (decl.servers.length === 0) {
      const d = httpNode.children.find((c) => c.context === 'upstream' && c.directive?.args[0]?.toLowerCase() === decl.name.toLowerCase());
      throw new ConfigError('invalid-value', 'no servers are inside upstream', { file: decl.loc.file, line: d?.directive?.closeLine ?? decl.loc.line });
    }
    // ngx_http_upstream_init_round_robin: backup servers alone make no group
    if (decl.servers.every((s) => s.backup)) throw new ConfigError('invalid-value', `no servers in upstream "${decl.name}"`, decl.loc);
    const peers: UpstreamPeer[] = [];
    for (const s of decl.servers) {
      if (s.unixPath !== undefined) {
        peers.push(peer(s.host, 0, s, s.unixPath));
        continue;
      }
      const addrs = isIP(s.host) ? [s.host] : cx.scope.hosts.lookup(s.host) ?? [];
      for (const a of addrs) peers.push(peer(a, s.port, s));
    }
    groups.set(decl.name.toLowerCase(), {
      name: decl.name, peers, keepalive: decl.keepalive, keepaliveTimeoutMs: decl.keepaliveTimeoutMs, keepaliveTimeMs: decl.keepaliveTimeMs,
      keepaliveRequests: decl.keepaliveRequests,
      balancer: decl.balancer, hashKey: decl.hashKey && cx.scope.variables.bind(decl.hashKey), zone: decl.zone,
      ...(decl.sticky?.active ? { sticky: stickyConf(decl.sticky, cx.scope.variables) } : {}),
    });
  }
  // every level, upstream blocks too, as the recursive walk did (they hold no proxy_pass)
  const stack = [httpNode];
  while (stack.length > 0) {
    const n = stack.pop()!;
    for (const pass of passes) {
      const address = pass(n.conf);
      if (address) implicitUpstream(cx, groups, address);
    }
    for (let i = n.children.length - 1; i >= 0; i--) stack.push(n.children[i]!);
  }
}

/**
 * A peer at an IP and port, or (`unixPath`) at `unix:PATH`, with its
 * `server` parameters; a peer of an `upstream` block has a server ID
 * (`ngx_http_upstream_create_sid`: `route=`, or the MD5 of the name).
 */
function peer(addr: string, port: number, s?: UpstreamServerDecl, unixPath?: string): UpstreamPeer {
  const name = unixPath !== undefined ? addr : isIP(addr) === 6 ? `[${addr}]:${port}` : `${addr}:${port}`;
  return {
    name, host: addr, port, unixPath, server: s?.address ?? name,
    weight: s?.weight ?? 1, backup: s?.backup ?? false, down: (s?.down ?? false) || (s?.drain ?? false), maxConns: s?.maxConns ?? 0,
    maxFails: s?.maxFails ?? 1, failTimeoutMs: s?.failTimeoutMs ?? 10_000,
    ...(s ? { draining: s.drain && !s.down, sid: s.route ?? createHash('md5').update(name, 'latin1').digest('hex') } : {}),
  };
}

/** A block's `sticky` with its values bound. */
function stickyConf(decl: StickyDecl, vars: VariableRegistry): StickyConf {
  const c = decl.cookie;
  const l = decl.learn;
  return {
    ...(l ? {
      learn: {
        create: l.create.map((v) => vars.bind(v)), zone: l.zone, maxSessions: Math.floor(l.sizeBytes / 128), timeoutMs: l.timeoutMs, afterHeader: l.afterHeader,
      },
    } : {}),
    lookup: decl.lookup.map((v) => vars.bind(v)),
    cookie: c && {
      name: c.name, expiresSec: c.expiresSec, domain: c.domain && vars.bind(c.domain), path: c.path, httponly: c.httponly, secure: c.secure,
      samesite: c.samesite && vars.bind(c.samesite),
    },
  };
}

/**
 * The group a static `proxy_pass`/`fastcgi_pass` uses: an `upstream` block
 * of that name, or the host:port resolved now (`ngx_http_upstream_add`,
 * `ngx_http_upstream_init_round_robin`).
 */
function implicitUpstream(cx: CompileContext, groups: Map<string, UpstreamGroup>, { host: hostText, port, defaultPort, loc }: PassAddress): void {
  const explicit = cx.scope.upstreams.get(hostText.toLowerCase());
  if (explicit) {
    if (port !== undefined) throw new ConfigError('invalid-value', `upstream "${hostText}" may not have port ${port}`, loc);
    return;
  }
  const key = groupKey(hostText, port);
  if (groups.has(key)) return;
  if (hostText.startsWith('unix:')) {
    // ngx_parse_unix_domain_url: one peer, the socket file
    const peers = [peer(hostText, 0, undefined, hostText.slice('unix:'.length))];
    groups.set(key, { name: key, peers, keepalive: 0, keepaliveTimeoutMs: 60_000, keepaliveTimeMs: 3_600_000, keepaliveRequests: 1000, balancer: 'round_robin', hashKey: undefined, zone: undefined });
    return;
  }
  const effectivePort = port ?? defaultPort;
  if (effectivePort === undefined) throw new ConfigError('invalid-value', `no port in upstream "${hostText}"`, loc);
  const host = hostText.replace(/^\[|\]$/g, '');
  const addrs = isIP(host) ? [host] : cx.scope.hosts.lookup(host);
  if (!addrs) throw new ConfigError('host-not-found', `host not found in upstream "${hostText}"`, loc);
  groups.set(key, {
    name: key, peers: addrs.map((a) => peer(a, effectivePort)), keepalive: 0, keepaliveTimeoutMs: 60_000, keepaliveTimeMs: 3_600_000, keepaliveRequests: 1000,
    balancer: 'round_robin', hashKey: undefined, zone: undefined,
  });
}

/** The slots `checkUpstreamMerge` reads for one module (proxy, fastcgi, uwsgi, scgi), and its directives' prefix. */
export interface UpstreamMergeSlots {
  readonly prefix: 'proxy' | CgiPrefix;
  readonly buffers: Slot<{ readonly count: number; readonly sizeBytes: number }>;
  readonly bufferSize: Slot<number>;
  readonly busyBuffersSize: Slot<number | undefined>;
  readonly tempFileWriteSize: Slot<number | undefined>;
  readonly maxTempFileSize: Slot<number>;
  readonly cacheZone: Slot<string | ValueSource | false | undefined>;
  /** FastCGI, uwsgi and SCGI have no default cache key: a cache without one is a warning. */
  readonly cacheKey?: Slot<unknown>;
  readonly nextUpstream: Slot<readonly string[]>;
  readonly nextUpstreamTries: Slot<number>;
  readonly nextUpstreamTimeoutMs: Slot<number>;
}

/** `*_next_upstream` merged: `off` leaves no condition (`ngx_http_proxy_merge_loc_conf`). */
export function nextUpstreamConf(c: ConfChain, s: UpstreamMergeSlots): NextUpstreamConf {
  return nextUpstreamOf(c.get(s.nextUpstream), c.get(s.nextUpstreamTries), c.get(s.nextUpstreamTimeoutMs));
}

/** The `*_next_upstream` settings of a module's merged values: `off` among the conditions leaves none. */
export function nextUpstreamOf(conditions: readonly string[], tries: number, timeoutMs: number): NextUpstreamConf {
  return { nextUpstream: new Set(conditions.includes('off') ? [] : conditions), nextUpstreamTries: tries, nextUpstreamTimeoutMs: timeoutMs };
}

/**
 * The response spooling of a module that never buffers (the memcached and
 * gRPC modules' hardcoded `bufs.num 0`, `max_temp_file_size 0`): one buffer
 * of `*_buffer_size`, never a temp file (the path is never opened).
 */
export function unbufferedSpool(cx: CompileContext, bufferBytes: number): Pick<
  UpstreamConf, 'memoryBytes' | 'bufferBytes' | 'tempPath' | 'maxTempFileBytes' | 'busyBytes' | 'tempFileWriteBytes'
> {
  return {
    memoryBytes: bufferBytes, bufferBytes, tempPath: { dir: cx.scope.fullPath('proxy_temp'), levels: [] }, maxTempFileBytes: 0,
    busyBytes: bufferBytes, tempFileWriteBytes: bufferBytes,
  };
}

/**
 * `*_busy_buffers_size` and `*_temp_file_write_size` as nginx defaults them
 * (`ngx_http_proxy_merge_loc_conf`): twice the larger of `*_buffer_size` and
 * one of `*_buffers`.
 */
export function spoolSizes(c: ConfChain, m: UpstreamMergeSlots): { busyBytes: number; tempFileWriteBytes: number } {
  const size = Math.max(c.get(m.bufferSize), c.get(m.buffers).sizeBytes);
  return { busyBytes: c.get(m.busyBuffersSize) ?? 2 * size, tempFileWriteBytes: c.get(m.tempFileWriteSize) ?? 2 * size };
}

/**
 * The request headers a location with a cache sends in place of the
 * client's (`ngx_http_proxy_cache_headers`, `ngx_http_fastcgi_cache_headers`):
 * the validators of a stale entry being revalidated, else nothing.
 */
export const CACHE_REQUEST_HEADERS: readonly [string, string][] = [
  ['If-Modified-Since', '$upstream_cache_last_modified'], ['If-Unmodified-Since', ''], ['If-None-Match', '$upstream_cache_etag'],
  ['If-Match', ''], ['Range', ''], ['If-Range', ''],
];

/**
 * What `ngx_http_proxy_merge_loc_conf` and `ngx_http_fastcgi_merge_loc_conf`
 * check on every server and location (config order, nested ones after
 * their parent), reported at the end of the http block: at least two
 * buffers; busy buffers, temp file writes and the temp file limit against
 * the largest buffer (`proxy_buffer_size` or one of `proxy_buffers`); a
 * cache zone that no `*_cache_path` defines.
 * @throws ConfigError the first of these, at the end of the http block
 */
export function checkUpstreamMerge(cx: CompileContext, httpNode: LevelNode, servers: readonly LevelNode[], m: UpstreamMergeSlots): void {
  const at = { file: httpNode.directive!.loc.file, line: httpNode.directive!.closeLine ?? httpNode.directive!.loc.line };
  const failAt = (text: string): never => {
    throw new ConfigError('invalid-value', text, at);
  };
  const p = m.prefix;
  const largest = `the maximum of the value of "${p}_buffer_size" and one of the "${p}_buffers"`;
  for (const node of levelsInOrder(servers)) {
    const c = cx.chain(node);
    const bufs = c.get(m.buffers);
    if (bufs.count < 2) failAt(`there must be at least 2 "${p}_buffers"`);
    const size = Math.max(c.get(m.bufferSize), bufs.sizeBytes);
    const busy = c.get(m.busyBuffersSize) ?? 2 * size;
    if (busy < size) failAt(`"${p}_busy_buffers_size" must be equal to or greater than ${largest}`);
    if (busy > (bufs.count - 1) * bufs.sizeBytes) {
      failAt(`"${p}_busy_buffers_size" must be less than the size of all "${p}_buffers" minus one buffer`);
    }
    if ((c.get(m.tempFileWriteSize) ?? 2 * size) < size) failAt(`"${p}_temp_file_write_size" must be equal to or greater than ${largest}`);
    const maxTemp = c.get(m.maxTempFileSize);
    if (maxTemp !== 0 && maxTemp < size) {
      failAt(`"${p}_max_temp_file_size" must be equal to zero to disable temporary files usage or must be equal to or greater than ${largest}`);
    }
    const zone = c.get(m.cacheZone);
    if (typeof zone === 'string' && !cx.scope.sharedZones.get(zone)?.defined) failAt(`"${p}_cache" zone "${zone}" is unknown`);
    if (zone && m.cacheKey && !c.has(m.cacheKey)) {
      cx.warn({ level: 'warn', code: 'no-cache-key', text: `no "${p}_cache_key" for "${p}_cache"`, loc: at });
    }
  }
}
