/**
 * The stream module, built in (`--with-stream`): `stream { server { listen …;
 * proxy_pass …; } }` proxies TCP and UDP as nginx does
 * (`src/stream/ngx_stream_core_module.c`, `ngx_stream_proxy_module.c`,
 * `ngx_stream_upstream.c`, `ngx_stream_upstream_round_robin.c`,
 * `ngx_stream_upstream_least_conn_module.c`, `ngx_stream_log_module.c`,
 * `ngx_stream_return_module.c`, `ngx_stream_set_module.c`,
 * `ngx_stream_map_module.c`, `ngx_stream_access_module.c`,
 * `ngx_stream_realip_module.c`, `ngx_stream_upstream_hash_module.c`,
 * `ngx_stream_upstream_random_module.c`, `ngx_stream_upstream_zone_module.c`;
 * limit_conn, geo and split_clients are `stream-limit-conn.ts` and
 * `stream-geo.ts`); `load_module …/ngx_stream_module.so` is
 * still accepted. The runtime is `src/runtime/stream/`; this file reads and
 * checks the directives and compiles them into a `StreamTable`; TLS
 * (`ngx_stream_ssl_module`) is read by `stream-ssl.ts`.
 */
import { isIP } from 'node:net';
import type { Directive, SourceLoc } from '../../parser/ast.js';
import type { LevelNode } from '../check.js';
import type { CompileContext } from '../compile-context.js';
import type { Context } from '../flags.js';
import { parseListenAddress, parseListenParams, parseUnixPath, type ListenAddress } from '../listen.js';
import { compileLogFormat, type CompiledLogFormat } from '../log-format.js';
import { scopeRegistry, type ConfigScope, type UpstreamBalancer, type UpstreamServerDecl } from '../scope.js';
import {
  DirectiveFailure, fail, flagSetter, LevelConf, listSlot, msecSetter, noEffect, numSetter, parseSize, parseTime, rule, sizeSetter, slot,
  type ChildBlock, type ConfChain, type DirectiveSpec, type Rule, type SetContext,
} from '../spec.js';
import type { StreamView } from '../stream-view.js';
import { VariableRegistry, type CompiledValue, type ValueSource } from '../variables.js';
import { accessConf, accessDirectives, type AccessRule } from './access.js';
import { errorLogs, levelErrorLogs, parseErrorLog, type ErrorLogTarget } from './core.js';
import { parseResolver, type ResolverDef } from './http-core.js';
import { checkLogFormatSyntax } from './log.js';
import { bindMap, readMapBlock, type MapDef } from './map.js';
import { realIpDirectives, realIpFrom } from './realip.js';
import { sslCertificateKeys, sslCertificates, sslRejectHandshake } from './ssl.js';
import { streamContentHandler, streamPass, streamPassDirectives, type PassAddress } from './stream-pass.js';
import { streamPrereadConf, streamPrereadDirectives, type StreamPrereadConf } from './stream-preread.js';
import { streamProxySslDirectives, streamUpstreamTls, type StreamUpstreamTls } from './stream-proxy-ssl.js';
import { firstServerName, streamServerNameDirectives, streamServerNamesOf, type StreamServerNames } from './stream-server-name.js';
import { streamSslDirectives, streamTlsConf, type StreamTlsConf } from './stream-ssl.js';
import { bindStreamGeo, streamGeoDirectives } from './stream-geo.js';
import { streamLimitConnConf, streamLimitConnDirectives, streamLimitConnVariables, type StreamLimitConnConf, type StreamLimitConnZone } from './stream-limit-conn.js';
import { streamVariables } from './stream-variables.js';
import { balancerOf, parseUpstreamServer, upstreamZoneParams, splitHostPort, type UpstreamGroup, type UpstreamPeer } from './upstream.js';
import type { Cidr } from '../cidr.js';

const STREAM_ANY: readonly Context[] = ['stream', 'stream_server'];
const CORE = 'ngx_stream_core_module';
const PROXY = 'ngx_stream_proxy_module';

/** A directive jinx checks without acting on it (`note` says why). */
const item = (name: string, contexts: readonly Context[], args: DirectiveSpec['args'], r: Rule, module: string, note: string): DirectiveSpec =>
  noEffect({ name, module, contexts, args, note }, r);

/** A directive with effect, on a setter of its own. */
const run = (
  name: string, contexts: readonly Context[], args: DirectiveSpec['args'], set: DirectiveSpec['set'], module = CORE,
): DirectiveSpec => ({ name, module, contexts, args, effect: 'runtime', set });

/** A `listen` of a stream server. */
interface StreamListen extends ListenAddress {
  readonly udp: boolean;
  readonly ssl: boolean;
  readonly proxyProtocol: boolean;
  /** `default_server`: the server of the address for clients no `server_name` selects. */
  readonly defaultServer: boolean;
  /** `backlog=N`; undefined: the system's (511 in nginx). */
  readonly backlog: number | undefined;
  /** `so_keepalive=on` (or its timings): keepalive probes on accepted connections. */
  readonly soKeepalive: boolean;
  /** `ipv6only=off` on `[::]`: IPv4 clients too. */
  readonly ipv6only: boolean;
  /** The server's level. */
  readonly server: LevelConf;
  readonly loc: SourceLoc;
}

/**
 * A stream upstream (`ngx_stream_upstream_srv_conf_t`): an `upstream` block,
 * or a `proxy_pass` address, which becomes the block's if one of that name follows.
 */
interface StreamUpstream {
  readonly name: string;
  explicit: boolean;
  /** The port of a `proxy_pass` address. */
  port: number | undefined;
  /** Where it was first named. */
  readonly loc: SourceLoc;
  /** The directive that made it (the `upstream` block once there is one). */
  directive: Directive;
  /** The `server` entries of the block. */
  servers: UpstreamServerDecl[];
  /** The block's method (`least_conn`, `hash`, `random` …; round robin by default). */
  balancer: UpstreamBalancer;
  /** A method was chosen in the block (a second one is `load balancing method redefined`). */
  balancerSet: boolean;
  /** `hash KEY`: the key. */
  hashKey: ValueSource | undefined;
  /** `zone NAME`: the peers' state is shared by the workers. */
  zone: string | undefined;
}

/** The stream module's upstreams, servers, listens and log formats. */
interface StreamDecls {
  /** By lowercased name, in the order first named. */
  readonly upstreams: Map<string, StreamUpstream>;
  /** The `proxy_pass` addresses (`HOST:PORT`, or a name without port for an `upstream` block), by lowercased text. */
  readonly addresses: Map<string, { readonly host: string; readonly port: number | undefined }>;
  readonly servers: Map<LevelConf, { readonly loc: SourceLoc }>;
  readonly listens: StreamListen[];
  readonly logFormats: Map<string, { readonly escape: 'default' | 'json' | 'none'; readonly text: string }>;
  /** `map` blocks, bound once every variable is known. */
  readonly maps: MapDef<StreamView>[];
  /** The variables of the stream module, with the `set` and `map` ones. */
  readonly variables: VariableRegistry<StreamView>;
}

/** The stream module's registries of one configuration. */
const streamDecls = scopeRegistry((): StreamDecls => ({
  upstreams: new Map(), addresses: new Map(), servers: new Map(), listens: [], logFormats: new Map(), maps: [],
  variables: new VariableRegistry([...streamVariables, ...streamLimitConnVariables]),
}));

/** The stream module's variable registry of a configuration. */
const vars = (scope: ConfigScope): VariableRegistry<StreamView> => scope.registry(streamDecls).variables;

/** The `listen`s of a stream server (`cscf->listen`). */
const serverListens = listSlot<StreamListen>('stream listen', false);

/**
 * `ngx_stream_core_listen`: the address, the parameters (`udp`, `ssl` …), and
 * `a duplicate listen ADDR` for one the server already has.
 */
function setListen(d: Directive, cx: SetContext): void {
  const params = parseListenParams(d, 'stream', cx);
  for (const addr of parseListenAddress(d.args[0]!)) {
    const option = (name: string): string | undefined => d.args.slice(1).find((a) => a.startsWith(`${name}=`))?.slice(name.length + 1);
    const listen: StreamListen = {
      ...addr, udp: params.udp, ssl: params.ssl, proxyProtocol: params.proxyProtocol, defaultServer: params.defaultServer, server: cx.level, loc: d.loc,
      backlog: option('backlog') === undefined ? undefined : Number(option('backlog')),
      soKeepalive: option('so_keepalive') !== undefined && option('so_keepalive') !== 'off', ipv6only: params.ipv6only,
    };
    if (cx.level.ownList(serverListens)?.some((l) => l.value.host === addr.host && l.value.port === addr.port && l.value.udp === params.udp)) {
      fail(`a duplicate listen ${addr.addrText}`);
    }
    cx.level.append(serverListens, listen, d.loc);
    cx.scope.registry(streamDecls).listens.push(listen);
  }
}

/**
 * `ngx_stream_upstream_add` for `proxy_pass HOST:PORT` (`flags` 0) and
 * `upstream NAME` (`NGX_STREAM_UPSTREAM_CREATE`): one entry per name, in
 * the order they are first named; a port may not name an `upstream` block.
 */
function addUpstream(d: Directive, cx: SetContext, host: string, port: number | undefined, explicit: boolean): void {
  const ups = cx.scope.registry(streamDecls).upstreams;
  const existing = ups.get(host.toLowerCase());
  if (existing) {
    if (explicit && existing.explicit) fail(`duplicate upstream "${host}"`);
    if (explicit && existing.port !== undefined) {
      fail(`upstream "${host}" may not have port ${existing.port}`, existing.loc);
    }
    if (!explicit && existing.explicit && port !== undefined) fail(`upstream "${host}" may not have port ${port}`);
    if (explicit) Object.assign(existing, { explicit, port: undefined, directive: d, servers: [] });
    return;
  }
  ups.set(host.toLowerCase(), {
    name: host, explicit, port, loc: d.loc, directive: d, servers: [], balancer: 'round_robin', balancerSet: false, hashKey: undefined, zone: undefined,
  });
}

/** What `proxy_pass` names: an upstream (by lowercased name), a unix domain socket, or a value with variables. */
type ProxyPassDef = { readonly upstream: string } | { readonly unixPath: string } | { readonly value: ValueSource };

/** `ngx_stream_proxy_pass`: `ADDRESS:PORT`, an upstream name, or a value with variables. */
function setProxyPass(d: Directive, cx: SetContext): void {
  if (cx.level.own(proxyPassSet)) throw new DirectiveFailure('is duplicate');
  if (cx.level.own(returnValue)) throw new DirectiveFailure('is duplicate');
  cx.level.set(streamContentHandler, 'proxy', d.loc);
  const arg = d.args[0]!;
  if (arg.includes('$')) {
    cx.level.set(proxyPassSet, { value: vars(cx.scope).value(arg, d.loc) }, d.loc);
    return;
  }
  if (arg.startsWith('unix:')) {
    const unixPath = parseUnixPath(arg, (err) => fail(`${err} in upstream "${arg}"`));
    cx.level.set(proxyPassSet, { unixPath }, d.loc);
    return;
  }
  const hp = splitHostPort(arg);
  if (!hp || (hp.port !== undefined && (hp.port < 1 || hp.port > 65535))) {
    if (!arg.startsWith('[') && arg.includes(':')) fail(`invalid port in upstream "${arg}"`);
    fail(`invalid host in upstream "${arg}"`);
  }
  const host = hp.port === undefined ? arg : arg.slice(0, arg.lastIndexOf(':'));
  addUpstream(d, cx, host, hp.port, false);
  const key = (hp.port === undefined ? host : `${host}:${hp.port}`).toLowerCase();
  cx.scope.registry(streamDecls).addresses.set(key, { host, port: hp.port });
  cx.level.set(proxyPassSet, { upstream: key }, d.loc);
}
const proxyPassSet = slot<ProxyPassDef | undefined>('stream proxy_pass', undefined, false);

/**
 * The stream block's end (`ngx_stream_block`): upstreams are initialized in
 * the order they were named (`no servers are inside upstream`, `no servers
 * in upstream "NAME"` for backup servers only, `no port in
 * upstream`, `host not found in upstream`), every `listen … ssl` address needs
 * a certificate (`ngx_stream_ssl_init`), then servers sharing an address are the warning
 * `conflicting server name "NAME" on ADDR, ignored` for a name two of them have.
 */
function closeStream(_d: Directive, cx: SetContext, block: ChildBlock): void {
  for (const up of cx.scope.registry(streamDecls).upstreams.values()) {
    if (up.explicit) {
      if (up.servers.length === 0) fail('no servers are inside upstream', { file: up.directive.loc.file, line: up.directive.closeLine ?? up.loc.line });
      // ngx_stream_upstream_init_round_robin: backup servers alone (kept by a method that refuses them later) are none
      if (up.servers.every((srv) => srv.backup)) fail(`no servers in upstream "${up.name}"`, up.directive.loc);
      continue;
    }
    if (up.port === undefined) fail(`no port in upstream "${up.name}"`, up.loc);
    const host = up.name.replace(/^\[|\]$/g, '');
    if (!isIP(host) && !cx.scope.hosts.lookup(host)) fail(`host not found in upstream "${up.name}"`, up.loc);
  }
  for (const server of cx.scope.registry(streamDecls).servers.keys()) {
    const certs = server.ownList(sslCertificates) ?? block.level.ownList(sslCertificates) ?? [];
    const keys = server.ownList(sslCertificateKeys) ?? block.level.ownList(sslCertificateKeys) ?? [];
    if (keys.length < certs.length) fail(`no "ssl_certificate_key" is defined for certificate "${certs[certs.length - 1]!.value.text}"`, null);
  }
  const byAddr = new Map<string, LevelConf[]>();
  const sslAddrs = new Map<string, { ssl: boolean; defaultServer: LevelConf | undefined }>();
  for (const l of cx.scope.registry(streamDecls).listens) {
    const key = `${l.udp ? 'udp' : 'tcp'} ${l.addrText}`;
    const servers = byAddr.get(key) ?? [];
    if (!servers.includes(l.server)) servers.push(l.server);
    byAddr.set(key, servers);
    const a = sslAddrs.get(key) ?? { ssl: false, defaultServer: undefined };
    a.ssl ||= l.ssl;
    if (l.defaultServer) a.defaultServer ??= l.server;
    sslAddrs.set(key, a);
  }
  // ngx_stream_ssl_init: on a `listen … ssl` address the default server needs a certificate, or
  // `ssl_reject_handshake on`, and then every other server of the address one of the two
  const refuse = (server: LevelConf): never => fail('no "ssl_certificate" is defined for the "listen ... ssl" directive', cx.scope.registry(streamDecls).servers.get(server)!.loc);
  const rejects = (server: LevelConf): boolean => (server.own(sslRejectHandshake) ?? block.level.own(sslRejectHandshake))?.value ?? false;
  for (const [key, a] of sslAddrs) {
    if (!a.ssl) continue;
    const servers = byAddr.get(key)!;
    const first = a.defaultServer ?? servers[0]!;
    if (hasCertificate(first, block.level)) continue;
    if (!rejects(first)) refuse(first);
    for (const server of servers) if (!hasCertificate(server, block.level) && !rejects(server)) refuse(server);
  }
  for (const [key, servers] of byAddr) {
    streamServerNamesOf(servers.map((level) => ({ level, server: level })), key.slice(4), vars(cx.scope),
      (text) => cx.warn(text, 'conflicting-server-name', null));
  }
}

function hasCertificate(server: LevelConf, stream: LevelConf): boolean {
  return (server.ownList(sslCertificates) ?? stream.ownList(sslCertificates) ?? []).length > 0;
}

/** `ngx_stream_log_set_format`: `NAME [escape=default|json|none] STRING…`; no predefined format. */
function setLogFormat(d: Directive, cx: SetContext): void {
  const name = d.args[0]!;
  if (cx.scope.registry(streamDecls).logFormats.has(name)) fail(`duplicate "log_format" name "${name}"`);
  const escape = d.args[1]!;
  if (escape.startsWith('escape=')) {
    const e = escape.slice(7);
    if (e !== 'default' && e !== 'json' && e !== 'none') fail(`unknown log format escaping "${e}"`);
    if (d.args.length === 2) fail('invalid number of arguments in "log_format" directive');
  }
  const parts = d.args.slice(escape.startsWith('escape=') ? 2 : 1);
  checkLogFormatSyntax(parts);
  const text = parts.join('');
  for (const v of text.matchAll(/\$\{?([A-Za-z0-9_]+)\}?/g)) vars(cx.scope).reference(v[1]!, d.loc);
  const mode = escape.startsWith('escape=') ? (escape.slice(7) as 'default' | 'json' | 'none') : 'default';
  cx.scope.registry(streamDecls).logFormats.set(name, { escape: mode, text });
}

/** `ngx_stream_log_set_log`: `off`, or `PATH FORMAT [buffer=SIZE] [gzip[=LEVEL]] [flush=TIME] [if=COND]`. */
function setAccessLog(d: Directive, cx: SetContext): void {
  if (d.args[0] === 'off') {
    if (d.args.length > 1) fail(`invalid parameter "${d.args[1]}"`);
    cx.level.append(accessLogs, { off: true }, d.loc);
    return;
  }
  const format = d.args[1];
  if (format === undefined) fail('log format is not specified');
  if (!cx.scope.registry(streamDecls).logFormats.has(format)) fail(`unknown log format "${format}"`);
  let bufferBytes: number | undefined;
  let flushMs: number | undefined;
  let gzipLevel = 0;
  let condition: ValueSource | undefined;
  for (const p of d.args.slice(2)) {
    if (p.startsWith('buffer=')) {
      bufferBytes = parseSize(p.slice(7));
      if (bufferBytes === undefined) fail(`invalid buffer size "${p.slice(7)}"`);
    } else if (p.startsWith('flush=')) {
      flushMs = parseTime(p.slice(6), false);
      if (flushMs === undefined) fail(`invalid flush time "${p.slice(6)}"`);
    } else if (p.startsWith('gzip=')) {
      if (!/^[1-9]$/.test(p.slice(5))) fail(`invalid compression level "${p.slice(5)}"`);
      gzipLevel = Number(p.slice(5));
    } else if (p === 'gzip') gzipLevel = 1;
    else if (p.startsWith('if=')) condition = vars(cx.scope).value(p.slice(3), d.loc);
    else fail(`invalid parameter "${p}"`);
  }
  if (gzipLevel > 0 && bufferBytes === undefined) bufferBytes = 64 * 1024;
  const path = d.args[0]!;
  cx.level.append(accessLogs, {
    off: false, path: path.includes('$') ? path : cx.scope.fullPath(path), pathValue: path.includes('$') ? vars(cx.scope).value(path, d.loc) : undefined,
    format, gzipLevel, bufferBytes: bufferBytes ?? 0, flushMs: flushMs ?? (bufferBytes ? 1000 : 0), condition,
  }, d.loc);
}

/** An `access_log` as read. */
type StreamAccessLogDef =
  | { readonly off: true }
  | {
      readonly off: false;
      readonly path: string;
      readonly pathValue: ValueSource | undefined;
      readonly format: string;
      readonly gzipLevel: number;
      readonly bufferBytes: number;
      readonly flushMs: number;
      readonly condition: ValueSource | undefined;
    };
const accessLogs = listSlot<StreamAccessLogDef>('stream access_log');

/** `resolver` of a stream level. */
const resolverSlot = slot<ResolverDef | undefined>('stream resolver', undefined);
const resolverTimeout = slot('stream resolver_timeout', 30_000);

/** `return VALUE` of a server. */
const returnValue = slot<ValueSource | undefined>('stream return', undefined, false);
/** `set $NAME VALUE` of a server, in order. */
const sets = listSlot<{ readonly index: number; readonly value: ValueSource }>('stream set', false);

const tcpNodelay = slot('stream tcp_nodelay', true);
const proxyProtocolTimeout = slot('stream proxy_protocol_timeout', 30_000);
const connectTimeout = slot('stream proxy_connect_timeout', 60_000);
const proxyTimeout = slot('stream proxy_timeout', 600_000);
const bufferSize = slot('stream proxy_buffer_size', 16_384);
const uploadRate = slot<ValueSource | undefined>('stream proxy_upload_rate', undefined);
const downloadRate = slot<ValueSource | undefined>('stream proxy_download_rate', undefined);
const requests = slot('stream proxy_requests', 0);
const responses = slot<number | undefined>('stream proxy_responses', undefined);
const nextUpstream = slot('stream proxy_next_upstream', true);
const nextUpstreamTries = slot('stream proxy_next_upstream_tries', 0);
const nextUpstreamTimeout = slot('stream proxy_next_upstream_timeout', 0);
const proxyProtocol = slot('stream proxy_protocol', false);
const halfClose = slot('stream proxy_half_close', false);
const socketKeepalive = slot('stream proxy_socket_keepalive', false);
/** `proxy_bind`: null for `off`. */
const proxyBind = slot<ValueSource | null | undefined>('stream proxy_bind', undefined);

/** A rate (`proxy_upload_rate`): a size, or a value with variables read per session. */
function setRate(s: typeof uploadRate): DirectiveSpec['set'] {
  return (d, cx) => {
    if (cx.level.own(s)) throw new DirectiveFailure('is duplicate');
    if (!d.args[0]!.includes('$') && parseSize(d.args[0]!) === undefined) throw new DirectiveFailure('invalid value');
    cx.level.set(s, vars(cx.scope).value(d.args[0]!, d.loc), d.loc);
  };
}

/** `ngx_stream_set`: `set $NAME VALUE` in a server. */
function setSet(d: Directive, cx: SetContext): void {
  const name = d.args[0]!;
  if (!name.startsWith('$')) fail(`invalid variable name "${name}"`);
  const v = vars(cx.scope);
  const index = v.declare(name.slice(1), { kind: 'set' });
  cx.level.append(sets, { index, value: v.value(d.args[1]!, d.loc) }, d.loc);
}

/** The `upstream` block being read. */
const currentUpstream = (cx: SetContext): StreamUpstream => cx.scope.registry(streamDecls).upstreams.get(cx.parentDirective!.args[0]!.toLowerCase())!;

/**
 * `ngx_stream_upstream_least_conn`, `ngx_stream_upstream_hash` (`KEY
 * [consistent]`), `ngx_stream_upstream_random` (`[two [least_conn]]`): the
 * block's method, as http's (`upstream.ts`): a second one is the warning
 * `load balancing method redefined`, the last one chosen is used.
 */
function setBalancer(d: Directive, cx: SetContext): void {
  const up = currentUpstream(cx);
  const key = d.name === 'hash' ? vars(cx.scope).value(d.args[0]!, d.loc) : undefined;
  if (up.balancerSet) cx.warn('load balancing method redefined', 'balancer-redefined');
  up.balancerSet = true;
  up.hashKey = key;
  up.balancer = balancerOf(d);
}

/** `ngx_stream_upstream_zone`: `NAME [SIZE]`, at least eight pages, a shared zone of the stream upstream module. */
function setZone(d: Directive, cx: SetContext): void {
  const up = currentUpstream(cx);
  const { name, sizeBytes } = upstreamZoneParams(d);
  cx.scope.sharedZone(name, sizeBytes, 'ngx_stream_upstream_module');
  up.zone = name;
}

const realIpFromSpec = realIpDirectives.find((d) => d.name === 'set_real_ip_from')!;
const allowSpec = accessDirectives.find((d) => d.name === 'allow')!;

export const streamDirectives: readonly DirectiveSpec[] = [
  {
    name: 'stream', module: 'ngx_stream_module', contexts: ['main'], args: ['NOARGS'], block: 'context', effect: 'runtime',
    set: (_d, cx) => {
      if (cx.scope.seenBlocks.has('stream')) throw new DirectiveFailure('is duplicate');
      cx.scope.seenBlocks.add('stream');
      return { context: 'stream', level: new LevelConf() };
    },
    close: closeStream,
  },
  {
    name: 'server', module: CORE, contexts: ['stream'], args: ['NOARGS'], block: 'context', effect: 'runtime',
    set: (d, cx) => {
      const level = new LevelConf();
      cx.scope.registry(streamDecls).servers.set(level, { loc: d.loc });
      return { context: 'stream_server', level };
    },
    close: (d, _cx, block) => {
      if (!block.level.ownList(serverListens)) fail('no "listen" is defined for server', d.loc);
    },
  },
  {
    name: 'upstream', module: 'ngx_stream_upstream_module', contexts: ['stream'], args: ['TAKE1'], block: 'context', effect: 'runtime',
    set: (d, cx) => {
      addUpstream(d, cx, d.args[0]!, undefined, true);
      return { context: 'stream_upstream', level: new LevelConf() };
    },
  },
  {
    ...run('server', ['stream_upstream'], ['1MORE'], (d, cx) => {
      const up = cx.scope.registry(streamDecls).upstreams.get(cx.parentDirective!.args[0]!.toLowerCase())!;
      up.servers.push(parseUpstreamServer(d, cx, undefined, up.balancer));
    }, 'ngx_stream_upstream_module'),
    resolves: 'server',
  },
  run('least_conn', ['stream_upstream'], ['NOARGS'], setBalancer, 'ngx_stream_upstream_least_conn_module'),
  run('hash', ['stream_upstream'], ['TAKE1', 'TAKE2'], setBalancer, 'ngx_stream_upstream_hash_module'),
  run('random', ['stream_upstream'], ['NOARGS', 'TAKE1', 'TAKE2'], setBalancer, 'ngx_stream_upstream_random_module'),
  run('zone', ['stream_upstream'], ['TAKE1', 'TAKE2'], setZone, 'ngx_stream_upstream_zone_module'),
  ...streamLimitConnDirectives(vars),
  ...streamGeoDirectives(vars),
  run('listen', ['stream_server'], ['1MORE'], setListen),
  run('error_log', STREAM_ANY, ['1MORE'], (d, cx) => cx.level.append(errorLogs, parseErrorLog(d, cx), d.loc)),
  run('resolver', STREAM_ANY, ['1MORE'], (d, cx) => {
    if (cx.level.own(resolverSlot)) throw new DirectiveFailure('is duplicate');
    cx.level.set(resolverSlot, parseResolver(d), d.loc);
  }),
  run('resolver_timeout', STREAM_ANY, ['TAKE1'], msecSetter(resolverTimeout)),
  run('tcp_nodelay', STREAM_ANY, ['FLAG'], flagSetter(tcpNodelay)),
  ...streamPrereadDirectives,
  run('proxy_protocol_timeout', STREAM_ANY, ['TAKE1'], msecSetter(proxyProtocolTimeout)),
  item('variables_hash_max_size', ['stream'], ['TAKE1'], rule.num(), CORE, 'variables are kept in a Map'),
  item('variables_hash_bucket_size', ['stream'], ['TAKE1'], rule.num(), CORE, 'variables are kept in a Map'),
  { ...run('proxy_pass', ['stream_server'], ['TAKE1'], setProxyPass, PROXY), resolves: 'address' },
  run('proxy_bind', STREAM_ANY, ['TAKE1', 'TAKE2'], (d, cx) => {
    if (cx.level.own(proxyBind)) throw new DirectiveFailure('is duplicate');
    if (d.args.length === 2 && d.args[1] !== 'transparent') fail(`invalid parameter "${d.args[1]}"`);
    if (d.args[0] === 'off') {
      cx.level.set(proxyBind, null, d.loc);
      return;
    }
    if (!d.args[0]!.includes('$') && isIP(d.args[0]!.replace(/^\[|\]$/g, '')) === 0) fail(`invalid address "${d.args[0]}"`);
    cx.level.set(proxyBind, vars(cx.scope).value(d.args[0]!, d.loc), d.loc);
  }, PROXY),
  run('proxy_socket_keepalive', STREAM_ANY, ['FLAG'], flagSetter(socketKeepalive), PROXY),
  run('proxy_connect_timeout', STREAM_ANY, ['TAKE1'], msecSetter(connectTimeout), PROXY),
  run('proxy_timeout', STREAM_ANY, ['TAKE1'], msecSetter(proxyTimeout), PROXY),
  run('proxy_buffer_size', STREAM_ANY, ['TAKE1'], sizeSetter(bufferSize), PROXY),
  run('proxy_upload_rate', STREAM_ANY, ['TAKE1'], setRate(uploadRate), PROXY),
  run('proxy_download_rate', STREAM_ANY, ['TAKE1'], setRate(downloadRate), PROXY),
  run('proxy_requests', STREAM_ANY, ['TAKE1'], numSetter(requests), PROXY),
  run('proxy_responses', STREAM_ANY, ['TAKE1'], numSetter(responses as never), PROXY),
  run('proxy_next_upstream', STREAM_ANY, ['FLAG'], flagSetter(nextUpstream), PROXY),
  run('proxy_next_upstream_tries', STREAM_ANY, ['TAKE1'], numSetter(nextUpstreamTries), PROXY),
  run('proxy_next_upstream_timeout', STREAM_ANY, ['TAKE1'], msecSetter(nextUpstreamTimeout), PROXY),
  run('proxy_protocol', STREAM_ANY, ['FLAG'], flagSetter(proxyProtocol), PROXY),
  run('proxy_half_close', STREAM_ANY, ['FLAG'], flagSetter(halfClose), PROXY),
  run('return', ['stream_server'], ['TAKE1'], (d, cx) => {
    if (cx.level.own(returnValue) || cx.level.own(proxyPassSet)) throw new DirectiveFailure('is duplicate');
    cx.level.set(streamContentHandler, 'return', d.loc);
    cx.level.set(returnValue, vars(cx.scope).value(d.args[0]!, d.loc), d.loc);
  }, 'ngx_stream_return_module'),
  run('set', ['stream_server'], ['TAKE2'], setSet, 'ngx_stream_set_module'),
  { name: 'map', module: 'ngx_stream_map_module', contexts: ['stream'], args: ['TAKE2'], block: 'raw', effect: 'runtime',
    set: (d, cx) => void cx.scope.registry(streamDecls).maps.push(readMapBlock(d, vars(cx.scope))) },
  item('map_hash_max_size', ['stream'], ['TAKE1'], rule.num(), 'ngx_stream_map_module', 'maps are kept in a Map'),
  item('map_hash_bucket_size', ['stream'], ['TAKE1'], rule.num(), 'ngx_stream_map_module', 'maps are kept in a Map'),
  { ...allowSpec, module: 'ngx_stream_access_module', contexts: STREAM_ANY },
  { ...allowSpec, name: 'deny', module: 'ngx_stream_access_module', contexts: STREAM_ANY },
  { ...realIpFromSpec, module: 'ngx_stream_realip_module', contexts: STREAM_ANY },
  run('log_format', ['stream'], ['2MORE'], setLogFormat, 'ngx_stream_log_module'),
  run('access_log', STREAM_ANY, ['1MORE'], setAccessLog, 'ngx_stream_log_module'),
  item('open_log_file_cache', STREAM_ANY, ['TAKE1', 'TAKE2', 'TAKE3', 'TAKE4'], rule.repeatable(() => undefined), 'ngx_stream_log_module',
    'the stream access log opens a file named by variables for each line'),
  ...streamSslDirectives(vars),
  ...streamServerNameDirectives(vars),
  ...streamProxySslDirectives(vars),
  ...streamPassDirectives(vars),
];

/** A stream listening socket, as `-t` binds it. */
export interface StreamSocket {
  readonly host: string;
  readonly port: number;
  readonly addrText: string;
  readonly udp: boolean;
}

/**
 * The stream sockets nginx opens, grouped as `ngx_stream_optimize_servers`
 * does: on a port (and protocol) with a wildcard address only the
 * wildcards are bound.
 */
export function streamSockets(scope: ConfigScope): StreamSocket[] {
  const seen = new Set<string>();
  const unique = scope.registry(streamDecls).listens.filter((l) => {
    const key = `${l.udp}|${l.host}|${l.port}`;
    return !seen.has(key) && seen.add(key);
  });
  const wildcardPorts = new Set(unique.filter((l) => l.wildcard).map((l) => `${l.udp}|${l.port}`));
  return unique
    .filter((l) => l.wildcard || !wildcardPorts.has(`${l.udp}|${l.port}`))
    .map((l) => ({ host: l.host, port: l.port, addrText: l.addrText, udp: l.udp }));
}

/** A stream `access_log` target (`ngx_stream_log_t`). */
export interface StreamAccessLog {
  /** The file; for a name with variables, its template. */
  readonly path: string;
  /** A name with variables: the file is opened for each line. */
  readonly pathValue: CompiledValue<StreamView> | undefined;
  readonly gzipLevel: number;
  readonly bufferBytes: number;
  readonly flushMs: number;
  readonly format: CompiledLogFormat<StreamView>;
  readonly condition: CompiledValue<StreamView> | undefined;
}

/** What a server's content phase does: `return`, `proxy_pass`, `pass`, or nothing (the session ends at once). */
export type StreamContent =
  | { readonly kind: 'return'; readonly value: CompiledValue<StreamView> }
  | { readonly kind: 'pass'; readonly address: PassAddress | undefined; readonly value: CompiledValue<StreamView> | undefined }
  | { readonly kind: 'proxy'; readonly proxy: StreamProxyConf }
  | undefined;

/** Where `proxy_pass` connects. */
export type StreamProxyTarget =
  | { readonly group: UpstreamGroup }
  | { readonly unixPath: string }
  | { readonly value: CompiledValue<StreamView> };

/** The proxy module's settings of a server (`ngx_stream_proxy_srv_conf_t`). */
export interface StreamProxyConf {
  readonly target: StreamProxyTarget;
  readonly connectTimeoutMs: number;
  readonly timeoutMs: number;
  readonly bufferBytes: number;
  /** Bytes per second; a value read per session, 0 for no limit. */
  readonly uploadRate: CompiledValue<StreamView> | undefined;
  readonly downloadRate: CompiledValue<StreamView> | undefined;
  /** UDP: datagrams from the client after which the session ends (0: no limit). */
  readonly requests: number;
  /** UDP: datagrams expected from the upstream per datagram of the client; undefined: no limit. */
  readonly responses: number | undefined;
  readonly nextUpstream: boolean;
  readonly nextUpstreamTries: number;
  readonly nextUpstreamTimeoutMs: number;
  readonly proxyProtocol: boolean;
  readonly halfClose: boolean;
  readonly socketKeepalive: boolean;
  /** `proxy_bind ADDRESS`: the local address of upstream connections. */
  readonly bind: CompiledValue<StreamView> | undefined;
  /** `proxy_ssl on`: TLS to the upstream. */
  readonly tls: StreamUpstreamTls | undefined;
}

/** One stream `server` (its core, access, realip, set, log and content settings). */
export interface StreamServer {
  readonly loc: SourceLoc;
  /** The first `server_name` (`$server_name`), '' without one. */
  readonly name: string;
  readonly errorLogs: readonly ErrorLogTarget[];
  readonly accessLogs: readonly StreamAccessLog[];
  readonly tcpNodelay: boolean;
  readonly proxyProtocolTimeoutMs: number;
  readonly realIpFrom: readonly (Cidr | 'unix')[];
  readonly access: readonly AccessRule[];
  readonly sets: readonly { readonly index: number; readonly value: CompiledValue<StreamView> }[];
  readonly resolver: ResolverDef | undefined;
  readonly resolverTimeoutMs: number;
  /** `limit_conn` and its settings (preaccess phase). */
  readonly limitConn: StreamLimitConnConf;
  readonly content: StreamContent;
  /** TLS settings (`ngx_stream_ssl_module`): undefined without a certificate or `ssl_reject_handshake on`. */
  readonly tls: StreamTlsConf | undefined;
  /** `ssl_preread on`: the preread phase reads the client's ClientHello. */
  readonly preread: StreamPrereadConf | undefined;
}

/** A stream listening socket and the server(s) it serves. */
export interface StreamListenGroup {
  readonly host: string;
  readonly port: number;
  readonly addrText: string;
  readonly unixPath: string | undefined;
  readonly udp: boolean;
  /** `listen … ssl`: the server's TLS is terminated (`ngx_stream_ssl_handler`). */
  readonly ssl: boolean;
  readonly proxyProtocol: boolean;
  readonly backlog: number | undefined;
  readonly soKeepalive: boolean;
  readonly ipv6only: boolean;
  /** The server of the address; on a wildcard, the one of each specific address on its port, by address. */
  readonly server: StreamServer;
  readonly byLocalAddr: ReadonlyMap<string, { readonly server: StreamServer; readonly addrText: string }>;
  /** The names of the servers on the address, for an SNI name to choose among (`server_name`). */
  readonly names: StreamServerNames<StreamServer>;
}

/** The compiled stream module: its listening sockets and the number of its indexed variables. */
export interface StreamTable {
  readonly listens: readonly StreamListenGroup[];
  readonly variableCount: number;
  /** Groups by lowercased name (`proxy_pass` with variables looks its value up among them first). */
  readonly upstreams: ReadonlyMap<string, UpstreamGroup>;
  /** Every access-log target of the servers, to open at start. */
  readonly accessLogs: readonly StreamAccessLog[];
  /** The `hash KEY` of each group with one, evaluated per session. */
  readonly hashKeys: ReadonlyMap<UpstreamGroup, CompiledValue<StreamView>>;
}

/** nginx's name of a peer address: `127.0.0.1:80`, `[::1]:80`. */
const peerName = (host: string, port: number): string => (host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`);

/** The peer settings of a `proxy_pass` address (`ngx_stream_upstream_add` without a block). */
const IMPLICIT = { weight: 1, backup: false, down: false, maxConns: 0, maxFails: 1, failTimeoutMs: 10_000 } as const;

/** A server's settings as its peers take them. */
type PeerSettings = Pick<UpstreamServerDecl, 'weight' | 'backup' | 'down' | 'maxConns' | 'maxFails' | 'failTimeoutMs'> & { readonly address?: string };

/**
 * A peer of a stream group: an IP address and port (named `127.0.0.1:80`,
 * `[::1]:80`), or a unix domain socket (`unix:PATH`, port 0).
 */
export function streamPeer(host: string, port: number, unixPath: string | undefined, s: PeerSettings = IMPLICIT): UpstreamPeer {
  const name = unixPath !== undefined ? host : peerName(host, port);
  return {
    name, host, port, unixPath, server: s.address ?? name,
    weight: s.weight, backup: s.backup, down: s.down, maxConns: s.maxConns, maxFails: s.maxFails, failTimeoutMs: s.failTimeoutMs,
  };
}

/**
 * A stream group (`ngx_stream_upstream_srv_conf_t`): no keepalive; its
 * method, and its `zone` (a `hash` key is the table's `hashKeys`).
 */
export function streamGroup(name: string, peers: UpstreamPeer[], balancer: UpstreamBalancer = 'round_robin', zone?: string): UpstreamGroup {
  return {
    name, peers, keepalive: 0, keepaliveTimeoutMs: 0, keepaliveTimeMs: 0, keepaliveRequests: 0,
    balancer, hashKey: undefined, zone,
  };
}

/**
 * The groups of `ngx_stream_upstream_init_round_robin`: each `upstream`
 * block's servers and each `proxy_pass` address, with the addresses their
 * names had when the configuration was read.
 */
function upstreamGroupsOf(
  scope: ConfigScope, v: VariableRegistry<StreamView>, hashKeys: Map<UpstreamGroup, CompiledValue<StreamView>>,
): Map<string, UpstreamGroup> {
  const out = new Map<string, UpstreamGroup>();
  const decls = scope.registry(streamDecls);
  const peersOf = (s: PeerSettings, host: string, port: number): UpstreamPeer[] =>
    (isIP(host) ? [host] : scope.hosts.lookup(host) ?? []).map((addr) => streamPeer(addr, port, undefined, s));
  for (const [key, up] of decls.upstreams) {
    if (!up.explicit) continue;
    const group = streamGroup(up.name, up.servers.flatMap((s) => (s.unixPath !== undefined
      ? [streamPeer(s.host, 0, s.unixPath, s)]
      : peersOf(s, s.host, s.port))), up.balancer, up.zone);
    if (up.hashKey) hashKeys.set(group, v.bind(up.hashKey));
    out.set(key, group);
  }
  for (const [key, a] of decls.addresses) {
    if (a.port === undefined || out.has(key)) continue;
    out.set(key, streamGroup(a.host, peersOf(IMPLICIT, a.host.replace(/^\[|\]$/g, ''), a.port)));
  }
  return out;
}

/**
 * `ngx_stream_block`'s end: the variables checked (`unknown "NAME"
 * variable`), the maps bound, every server's settings merged (server ←
 * stream ← default), and the listening sockets grouped as
 * `ngx_stream_optimize_servers` groups them.
 * @throws ConfigError `unknown "NAME" variable`
 */
export function compileStream(cx: CompileContext, streamNode: LevelNode): StreamTable {
  const decls = cx.scope.registry(streamDecls);
  const v = decls.variables;
  v.checkReferences();
  for (const map of decls.maps) bindMap(map, v);
  bindStreamGeo(cx.scope, v);
  const formats = new Map<string, CompiledLogFormat<StreamView>>();
  for (const [name, f] of decls.logFormats) formats.set(name, compileLogFormat(name, f.text, f.escape, v));
  const hashKeys = new Map<UpstreamGroup, CompiledValue<StreamView>>();
  const upstreams = upstreamGroupsOf(cx.scope, v, hashKeys);
  const servers = new Map<LevelConf, StreamServer>();
  const limitZones = new Map<string, StreamLimitConnZone>();
  for (const node of streamNode.children) {
    if (node.context !== 'stream_server') continue;
    const c = cx.chain(node);
    servers.set(node.conf, { ...serverConf(cx, c, node, formats, upstreams, v), limitConn: streamLimitConnConf(cx.scope, c, v, limitZones) });
  }
  // every access_log file is opened at start, one of the stream level too (ngx_conf_open_file)
  const streamLevel = cx.chain(streamNode).list(accessLogs).flatMap((l): StreamAccessLog[] => (l.off || l.pathValue ? [] : [{
    path: l.path, pathValue: undefined, gzipLevel: l.gzipLevel, bufferBytes: l.bufferBytes, flushMs: l.flushMs, format: formats.get(l.format)!, condition: undefined,
  }]));
  const accessLogTargets = [...streamLevel, ...[...servers.values()].flatMap((srv) => srv.accessLogs)];
  return { listens: listenGroupsOf(cx.scope, servers), variableCount: v.indexedCount, upstreams, accessLogs: accessLogTargets, hashKeys };
}

function serverConf(
  cx: CompileContext, c: ConfChain, node: LevelNode, formats: ReadonlyMap<string, CompiledLogFormat<StreamView>>,
  upstreams: ReadonlyMap<string, UpstreamGroup>, v: VariableRegistry<StreamView>,
): Omit<StreamServer, 'limitConn'> {
  const bind = (src: ValueSource | undefined): CompiledValue<StreamView> | undefined => (src ? v.bind(src) : undefined);
  const logs = c.list(accessLogs);
  const accessLogList = logs.some((l) => l.off) ? [] : logs.flatMap((l): StreamAccessLog[] => (l.off ? [] : [{
    path: l.path, pathValue: bind(l.pathValue), gzipLevel: l.gzipLevel, bufferBytes: l.bufferBytes, flushMs: l.flushMs,
    format: formats.get(l.format)!, condition: bind(l.condition),
  }]));
  const pass = node.conf.own(proxyPassSet)?.value;
  const ret = node.conf.own(returnValue)?.value;
  let content: StreamContent;
  const passTarget = node.conf.own(streamPass)?.value;
  if (node.conf.own(streamContentHandler)?.value === 'pass' && passTarget) {
    content = 'address' in passTarget ? { kind: 'pass', address: passTarget.address, value: undefined } : { kind: 'pass', address: undefined, value: v.bind(passTarget.value) };
  } else if (ret) content = { kind: 'return', value: v.bind(ret) };
  else if (pass) {
    const target: StreamProxyTarget = 'upstream' in pass ? { group: upstreams.get(pass.upstream)! }
      : 'unixPath' in pass ? pass : { value: v.bind(pass.value) };
    const bindAddr = c.get(proxyBind);
    content = {
      kind: 'proxy',
      proxy: {
        target, connectTimeoutMs: c.get(connectTimeout), timeoutMs: c.get(proxyTimeout), bufferBytes: c.get(bufferSize),
        uploadRate: bind(c.get(uploadRate)), downloadRate: bind(c.get(downloadRate)), requests: c.get(requests), responses: c.get(responses),
        nextUpstream: c.get(nextUpstream), nextUpstreamTries: c.get(nextUpstreamTries), nextUpstreamTimeoutMs: c.get(nextUpstreamTimeout),
        proxyProtocol: c.get(proxyProtocol), halfClose: c.get(halfClose), socketKeepalive: c.get(socketKeepalive),
        bind: bindAddr ? v.bind(bindAddr) : undefined,
        tls: streamUpstreamTls(cx, c, v),
      },
    };
  }
  return {
    loc: node.directive!.loc,
    name: firstServerName(node.conf),
    errorLogs: levelErrorLogs(cx, c),
    accessLogs: accessLogList,
    tcpNodelay: c.get(tcpNodelay),
    proxyProtocolTimeoutMs: c.get(proxyProtocolTimeout),
    realIpFrom: c.list(realIpFrom),
    access: accessConf(c),
    sets: (node.conf.ownList(sets) ?? []).map((e) => ({ index: e.value.index, value: v.bind(e.value.value) })),
    resolver: c.get(resolverSlot),
    resolverTimeoutMs: c.get(resolverTimeout),
    content,
    tls: streamTlsConf(cx, node, v),
    preread: streamPrereadConf(c),
  };
}

/**
 * `ngx_stream_optimize_servers`: one socket per protocol and address:port;
 * on a port with a wildcard, only the wildcard is bound and serves the
 * specific addresses' servers by the connection's local address.
 */
function listenGroupsOf(scope: ConfigScope, servers: ReadonlyMap<LevelConf, StreamServer>): StreamListenGroup[] {
  const listens = scope.registry(streamDecls).listens;
  const first = new Map<string, StreamListen>();
  const defaults = new Map<string, LevelConf>();
  for (const l of listens) {
    const key = `${l.udp}|${l.host}|${l.port}`;
    if (!first.has(key)) first.set(key, l);
    if (l.defaultServer && !defaults.has(key)) defaults.set(key, l.server);
  }
  const unique = [...first.values()];
  const wildcards = new Map(unique.filter((l) => l.wildcard).map((l) => [`${l.udp}|${l.port}|${l.host.includes(':')}`, l]));
  const out: StreamListenGroup[] = [];
  for (const l of unique) {
    const wildcard = wildcards.get(`${l.udp}|${l.port}|${l.host.includes(':')}`);
    if (!l.wildcard && wildcard && l.unixPath === undefined) continue;
    const byLocalAddr = new Map<string, { server: StreamServer; addrText: string }>();
    if (l.wildcard) {
      for (const o of unique) {
        if (!o.wildcard && o.udp === l.udp && o.port === l.port && o.unixPath === undefined) byLocalAddr.set(o.host, { server: servers.get(defaults.get(`${o.udp}|${o.host}|${o.port}`) ?? o.server)!, addrText: o.addrText });
      }
    }
    const sameAddr = [...new Set(listens.filter((o) => o.udp === l.udp && o.host === l.host && o.port === l.port).map((o) => o.server))];
    const names = streamServerNamesOf(sameAddr.map((level) => ({ level, server: servers.get(level)! })), l.addrText, vars(scope), () => undefined);
    out.push({
      host: l.host, port: l.port, addrText: l.addrText, unixPath: l.unixPath, udp: l.udp, ssl: listens.some((o) => o.udp === l.udp && o.host === l.host && o.port === l.port && o.ssl),
      proxyProtocol: l.proxyProtocol, backlog: l.backlog, soKeepalive: l.soKeepalive, ipv6only: l.ipv6only,
      server: servers.get(defaults.get(`${l.udp}|${l.host}|${l.port}`) ?? l.server)!, byLocalAddr, names,
    });
  }
  return out;
}
