/**
 * The stream module (`--with-stream=dynamic` in Debian's build): known only
 * after `load_module …/ngx_stream_module.so;`, as in nginx. jinx does not
 * proxy TCP/UDP streams; it reads and checks these directives as nginx does
 * (`src/stream/ngx_stream_core_module.c`, `ngx_stream_proxy_module.c`,
 * `ngx_stream_upstream.c`, `ngx_stream_log_module.c`,
 * `ngx_stream_ssl_module.c`), and `-t` binds their listening sockets.
 * Stream variables are not implemented: values with `$` are not checked.
 */
import { isIP } from 'node:net';
import type { Directive, SourceLoc } from '../../parser/ast.js';
import type { Context } from '../flags.js';
import { parseListenAddress, parseListenParams, parseUnixPath, type ListenAddress } from '../listen.js';
import { scopeRegistry, type ConfigScope } from '../scope.js';
import {
  DirectiveFailure, fail, LevelConf, listSlot, noEffect, parseSize, parseTime, rule, slot, type ChildBlock, type DirectiveSpec,
  type Rule, type SetContext,
} from '../spec.js';
import { parseErrorLog } from './core.js';
import { checkLogFormatSyntax } from './log.js';
import { parseResolver } from './http-core.js';
import { SSL_PROTOCOLS } from './ssl.js';
import { setSessionCache } from './ssl.js';
import { parseUpstreamServer, splitHostPort } from './upstream.js';

const NOTE = 'jinx does not proxy TCP/UDP streams';
const STREAM_ANY: readonly Context[] = ['stream', 'stream_server'];
const DYNAMIC = 'ngx_stream_module';
const CORE = 'ngx_stream_core_module';

const item = (name: string, contexts: readonly Context[], args: DirectiveSpec['args'], r: Rule, module = CORE): DirectiveSpec =>
  noEffect({ name, module, contexts, args, note: NOTE, dynamicModule: DYNAMIC }, r);

/** A `listen` of a stream server. */
interface StreamListen extends ListenAddress {
  readonly udp: boolean;
  readonly ssl: boolean;
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
  /** Number of `server` entries in the block. */
  servers: number;
}

/** The stream module's upstreams, servers, listens and log formats. */
interface StreamDecls {
  /** By lowercased name, in the order first named. */
  readonly upstreams: Map<string, StreamUpstream>;
  readonly servers: Map<LevelConf, { readonly loc: SourceLoc }>;
  readonly listens: StreamListen[];
  readonly logFormats: Set<string>;
}

/** The stream module's registries of one configuration. */
const streamDecls = scopeRegistry((): StreamDecls => ({ upstreams: new Map(), servers: new Map(), listens: [], logFormats: new Set() }));

/** The `listen`s of a stream server (`cscf->listen`). */
const serverListens = listSlot<StreamListen>('stream listen', false);
/** `ssl_certificate` of a stream level, for the `listen … ssl` check. */
const sslCertificates = listSlot<readonly string[]>('stream ssl_certificate');
const sslCertificateKeys = listSlot<readonly string[]>('stream ssl_certificate_key');

/**
 * `ngx_stream_core_listen`: the address, the parameters (`udp`, `ssl` …), and
 * `a duplicate listen ADDR` for one the server already has.
 */
function setListen(d: Directive, cx: SetContext): void {
  const params = parseListenParams(d, 'stream', cx);
  for (const addr of parseListenAddress(d.args[0]!)) {
    const listen: StreamListen = { ...addr, udp: params.udp, ssl: params.ssl, server: cx.level, loc: d.loc };
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
    if (explicit) Object.assign(existing, { explicit, port: undefined, directive: d, servers: 0 });
    return;
  }
  ups.set(host.toLowerCase(), { name: host, explicit, port, loc: d.loc, directive: d, servers: 0 });
}

/** `ngx_stream_proxy_pass`: `ADDRESS:PORT`, an upstream name, or a value with variables. */
function setProxyPass(d: Directive, cx: SetContext): void {
  if (cx.level.own(proxyPassSet)) throw new DirectiveFailure('is duplicate');
  cx.level.set(proxyPassSet, true, d.loc);
  const arg = d.args[0]!;
  if (arg.includes('$')) return;
  if (arg.startsWith('unix:')) {
    // a unix domain socket names no upstream to check
    parseUnixPath(arg, (err) => fail(`${err} in upstream "${arg}"`));
    return;
  }
  const hp = splitHostPort(arg);
  if (!hp || (hp.port !== undefined && (hp.port < 1 || hp.port > 65535))) {
    if (!arg.startsWith('[') && arg.includes(':')) fail(`invalid port in upstream "${arg}"`);
    fail(`invalid host in upstream "${arg}"`);
  }
  addUpstream(d, cx, hp.port === undefined ? arg : arg.slice(0, arg.lastIndexOf(':')), hp.port, false);
}
const proxyPassSet = slot('stream proxy_pass', false, false);

/**
 * The stream block's end (`ngx_stream_block`): upstreams are initialized in
 * the order they were named (`no servers are inside upstream`, `no port in
 * upstream`, `host not found in upstream`), every `listen … ssl` server needs
 * a certificate, then servers sharing an address are the warning
 * `conflicting server name "" on ADDR, ignored` (jinx has no stream `server_name`).
 */
function closeStream(_d: Directive, cx: SetContext, block: ChildBlock): void {
  for (const up of cx.scope.registry(streamDecls).upstreams.values()) {
    if (up.explicit) {
      if (up.servers === 0) fail('no servers are inside upstream', { file: up.directive.loc.file, line: up.directive.closeLine ?? up.loc.line });
      continue;
    }
    if (up.port === undefined) fail(`no port in upstream "${up.name}"`, up.loc);
    const host = up.name.replace(/^\[|\]$/g, '');
    if (!isIP(host) && !cx.scope.hosts.lookup(host)) fail(`host not found in upstream "${up.name}"`, up.loc);
  }
  for (const server of cx.scope.registry(streamDecls).servers.keys()) {
    const certs = server.ownList(sslCertificates) ?? block.level.ownList(sslCertificates) ?? [];
    const keys = server.ownList(sslCertificateKeys) ?? block.level.ownList(sslCertificateKeys) ?? [];
    if (keys.length < certs.length) fail(`no "ssl_certificate_key" is defined for certificate "${certs[certs.length - 1]!.value[0]}"`, null);
  }
  const byAddr = new Map<string, LevelConf[]>();
  for (const l of cx.scope.registry(streamDecls).listens) {
    if (l.ssl && !hasCertificate(l.server, block.level)) {
      const server = cx.scope.registry(streamDecls).servers.get(l.server)!;
      fail('no "ssl_certificate" is defined for the "listen ... ssl" directive', server.loc);
    }
    const key = `${l.udp ? 'udp' : 'tcp'} ${l.addrText}`;
    const servers = byAddr.get(key) ?? [];
    if (!servers.includes(l.server)) servers.push(l.server);
    byAddr.set(key, servers);
  }
  for (const [key, servers] of byAddr) {
    for (let i = 1; i < servers.length; i++) cx.warn(`conflicting server name "" on ${key.slice(4)}, ignored`, 'conflicting-server-name', null);
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
  checkLogFormatSyntax(d.args.slice(escape.startsWith('escape=') ? 2 : 1));
  cx.scope.registry(streamDecls).logFormats.add(name);
}

/** `ngx_stream_log_set_log`: `off`, or `PATH FORMAT [buffer=SIZE] [gzip[=LEVEL]] [flush=TIME] [if=COND]`. */
function setAccessLog(d: Directive, cx: SetContext): void {
  if (d.args[0] === 'off') {
    if (d.args.length > 1) fail(`invalid parameter "${d.args[1]}"`);
    return;
  }
  const format = d.args[1];
  if (format === undefined) fail('log format is not specified');
  if (!cx.scope.registry(streamDecls).logFormats.has(format)) fail(`unknown log format "${format}"`);
  for (const p of d.args.slice(2)) {
    if (p.startsWith('buffer=')) {
      if (parseSize(p.slice(7)) === undefined) fail(`invalid buffer size "${p.slice(7)}"`);
    } else if (p.startsWith('flush=')) {
      if (parseTime(p.slice(6), false) === undefined) fail(`invalid flush time "${p.slice(6)}"`);
    } else if (p.startsWith('gzip=')) {
      if (!/^[1-9]$/.test(p.slice(5))) fail(`invalid compression level "${p.slice(5)}"`);
    } else if (p !== 'gzip' && !p.startsWith('if=')) fail(`invalid parameter "${p}"`);
  }
}

/** `resolver` of a stream level, once. */
const resolverSet = slot('stream resolver', false);

export const streamDirectives: readonly DirectiveSpec[] = [
  {
    name: 'stream', module: 'ngx_stream_module', contexts: ['main'], args: ['NOARGS'], block: 'context', effect: 'none', note: NOTE,
    dynamicModule: DYNAMIC,
    set: (_d, cx) => {
      if (cx.scope.seenBlocks.has('stream')) throw new DirectiveFailure('is duplicate');
      cx.scope.seenBlocks.add('stream');
      return { context: 'stream', level: new LevelConf() };
    },
    close: closeStream,
  },
  {
    name: 'server', module: CORE, contexts: ['stream'], args: ['NOARGS'], block: 'context', effect: 'none', note: NOTE,
    dynamicModule: DYNAMIC,
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
    name: 'upstream', module: 'ngx_stream_upstream_module', contexts: ['stream'], args: ['TAKE1'], block: 'context', effect: 'none',
    note: NOTE, dynamicModule: DYNAMIC,
    set: (d, cx) => {
      addUpstream(d, cx, d.args[0]!, undefined, true);
      return { context: 'stream_upstream', level: new LevelConf() };
    },
  },
  {
    ...item('server', ['stream_upstream'], ['1MORE'], rule.repeatable((d, cx) => {
      parseUpstreamServer(d, cx, undefined);
      cx.scope.registry(streamDecls).upstreams.get(cx.parentDirective!.args[0]!.toLowerCase())!.servers++;
    }), 'ngx_stream_upstream_module'),
    resolves: 'server',
  },
  item('listen', ['stream_server'], ['1MORE'], rule.repeatable(setListen)),
  { ...item('proxy_pass', ['stream_server'], ['TAKE1'], rule.repeatable(setProxyPass), 'ngx_stream_proxy_module'), resolves: 'address' },
  item('proxy_connect_timeout', STREAM_ANY, ['TAKE1'], rule.msec, 'ngx_stream_proxy_module'),
  item('proxy_timeout', STREAM_ANY, ['TAKE1'], rule.msec, 'ngx_stream_proxy_module'),
  item('log_format', ['stream'], ['2MORE'], rule.repeatable(setLogFormat), 'ngx_stream_log_module'),
  item('access_log', STREAM_ANY, ['1MORE'], rule.repeatable(setAccessLog), 'ngx_stream_log_module'),
  item('error_log', STREAM_ANY, ['1MORE'], rule.repeatable((d, cx) => void parseErrorLog(d, cx))),
  item('resolver', STREAM_ANY, ['1MORE'], rule.repeatable((d, cx) => {
    if (cx.level.own(resolverSet)) throw new DirectiveFailure('is duplicate');
    parseResolver(d);
    cx.level.set(resolverSet, true, d.loc);
  })),
  item('ssl_certificate', STREAM_ANY, ['TAKE1'], rule.repeatable((d, cx) => cx.level.append(sslCertificates, d.args, d.loc)), 'ngx_stream_ssl_module'),
  item('ssl_certificate_key', STREAM_ANY, ['TAKE1'], rule.repeatable((d, cx) => cx.level.append(sslCertificateKeys, d.args, d.loc)), 'ngx_stream_ssl_module'),
  item('ssl_protocols', STREAM_ANY, ['1MORE'], rule.bitmaskOf(...SSL_PROTOCOLS), 'ngx_stream_ssl_module'),
  item('ssl_ciphers', STREAM_ANY, ['TAKE1'], rule.str, 'ngx_stream_ssl_module'),
  item('ssl_session_cache', STREAM_ANY, ['TAKE1', 'TAKE2'], rule.repeatable((d, cx) => setSessionCache(d, cx, 'ngx_stream_ssl_module')), 'ngx_stream_ssl_module'),
  item('ssl_session_timeout', STREAM_ANY, ['TAKE1'], rule.sec, 'ngx_stream_ssl_module'),
];

/** A stream listening socket: jinx does not serve it, `-t` binds it as nginx does. */
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
