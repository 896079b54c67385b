/**
 * The upstream module (`src/http/ngx_http_upstream.c`,
 * `ngx_http_upstream_keepalive_module.c`): `upstream NAME { server …; keepalive N; }`.
 * Names in `server` are resolved when the configuration is read, as nginx
 * does with `ngx_parse_url`; a name that does not resolve is
 * `host not found in upstream "NAME:PORT"`.
 */
import { isIP } from 'node:net';
import type { Directive } from '../../parser/ast.js';
import {
  DirectiveFailure, fail, LevelConf, noEffect, parseNumber, parseSize, parseTime, rule, slot, type DirectiveSpec, type SetContext,
} from '../spec.js';
import type { UpstreamBalancer, UpstreamDecl, UpstreamServerDecl } from '../scope.js';
import { parseUnixPath } from '../listen.js';

const UPSTREAM = 'ngx_http_upstream_module';
const KEEPALIVE = 'ngx_http_upstream_keepalive_module';

function currentUpstream(cx: SetContext): UpstreamDecl {
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

/**
 * `ngx_http_upstream_server` (and `ngx_stream_upstream_server`): the
 * parameters, then the address, which must resolve now. Without a port the
 * address takes `defaultPort`, or is `no port in upstream "…"` (stream).
 */
export function parseUpstreamServer(
  d: Directive, cx: SetContext, defaultPort: number | undefined, balancer: UpstreamBalancer = 'round_robin',
): UpstreamServerDecl {
  let weight = 1;
  let maxFails = 1;
  let failTimeoutMs = 10_000;
  let backup = false;
  let down = false;
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
    else if (p.startsWith('max_conns=')) num('max_conns=');
    else if (p.startsWith('fail_timeout=')) {
      const t = parseTime(p.slice(13), true);
      if (t === undefined) fail(`invalid parameter "${p}"`);
      failTimeoutMs = t * 1000;
    } else if (p === 'backup') {
      // ngx_http_upstream_ip_hash leaves NGX_HTTP_UPSTREAM_BACKUP out of the block's flags
      if (balancer === 'ip_hash') fail(`balancing method does not support parameter "${p}"`);
      backup = true;
    }
    else if (p === 'down') down = true;
    else fail(`invalid parameter "${p}"`);
  }
  const addr = d.args[0]!;
  if (addr.startsWith('unix:')) {
    const unixPath = parseUnixPath(addr, (err) => fail(`${err} in upstream "${addr}"`));
    return { host: addr, port: 0, unixPath, weight, maxFails, failTimeoutMs, backup, down, loc: d.loc };
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
  return { host: hp.host, port, unixPath: undefined, weight, maxFails, failTimeoutMs, backup, down, loc: d.loc };
}

const setServer = (d: Directive, cx: SetContext): void => {
  const up = currentUpstream(cx);
  up.servers.push(parseUpstreamServer(d, cx, 80, up.balancer));
};

/** `keepalive_timeout`, `keepalive_requests` and `keepalive_time` were set in this upstream block (msec and num slots in nginx). */
const keepaliveTimeoutSet = slot('upstream keepalive_timeout', false);
const keepaliveRequestsSet = slot('upstream keepalive_requests', false);
const keepaliveTimeSet = slot('upstream keepalive_time', false);

/** A load balancing method has been chosen in this upstream block. */
const balancerSet = slot('upstream balancer', false);

/**
 * `ngx_http_upstream_least_conn` (`ngx_http_upstream_least_conn_module.c`),
 * `ngx_http_upstream_ip_hash` (`ngx_http_upstream_ip_hash_module.c`): the
 * block's method; choosing a second one is the warning `load balancing
 * method redefined`, and the last one chosen is used.
 */
function setBalancer(d: Directive, cx: SetContext): void {
  if (cx.level.own(balancerSet)) cx.warn('load balancing method redefined', 'balancer-redefined');
  cx.level.replace(balancerSet, true, d.loc);
  currentUpstream(cx).balancer = d.name === 'ip_hash' ? 'ip_hash' : 'least_conn';
}

/**
 * `ngx_http_upstream_zone` (`ngx_http_upstream_zone_module.c`): `NAME
 * [SIZE]`, at least eight pages; the zone is shared memory of the upstream module.
 */
function setZone(d: Directive, cx: SetContext): void {
  const [name, sizeText] = d.args as [string, string | undefined];
  if (name.length === 0) fail(`invalid zone name "${name}"`);
  let size = 0;
  if (sizeText !== undefined) {
    const parsed = parseSize(sizeText);
    if (parsed === undefined) fail(`invalid zone size "${sizeText}"`);
    if (parsed < 8 * 4096) fail(`zone "${name}" is too small`);
    size = parsed;
  }
  cx.scope.sharedZone(name, size, UPSTREAM);
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
      const ms = parseTime(d.args[0]!, false);
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
        keepaliveTimeMs: 3_600_000, keepaliveRequests: 1000, balancer: 'round_robin',
      });
      return { context: 'upstream', level: new LevelConf() };
    },
  },
  { name: 'server', module: UPSTREAM, contexts: ['upstream'], args: ['1MORE'], effect: 'runtime', set: setServer },
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
  noEffect({
    name: 'zone', module: UPSTREAM, contexts: ['upstream'], args: ['TAKE1', 'TAKE2'], note: 'jinx runs one process: peer state is not shared',
  }, rule.repeatable(setZone)),
  {
    name: 'least_conn', module: 'ngx_http_upstream_least_conn_module', contexts: ['upstream'], args: ['NOARGS'], effect: 'runtime',
    set: setBalancer,
  },
  { name: 'ip_hash', module: 'ngx_http_upstream_ip_hash_module', contexts: ['upstream'], args: ['NOARGS'], effect: 'runtime', set: setBalancer },
];
