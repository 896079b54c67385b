/**
 * `jinx explain`: what jinx (and nginx) would do with one request, without
 * starting a server. The configuration is compiled as for serving, and the
 * request goes through the runtime's own functions over a request state
 * that no socket carries: the listen group, `findServer`
 * (`ngx_http_find_virtual_server`), `findLocation`
 * (`ngx_http_core_find_location`), the rewrite script (`runScript`, told of
 * each step), `checkAccessRules`, `tryFiles`, `mapUriToPath`, the proxy's
 * `upstreamUri` and `requestHeaders`, FastCGI's `params`. What is shown as
 * "why" is found by asking those functions again over one class of names
 * (exact, wildcards, regexes) or over one rule at a time, never by a
 * second matcher. The order of the phases (server rewrite, find location,
 * rewrite, access, try_files, content, `error_page`) follows
 * `ngx_http_core_run_phases` as `runtime/phases.ts` runs it, and the
 * decisions between them are phases.ts's own: what a `return` answers with
 * (`scriptAnswerOf`), where an `error_page` sends the request and with what
 * status (`errorPageOf`), an internal redirect and its count (`redirectTo`,
 * `countedUriChange`). The sockets, limits, subrequests and the response
 * itself are left out.
 */
import { readFileSync, statSync } from 'node:fs';
import { isIP } from 'node:net';
import { compileConfig } from '../config/compile.js';
import type { LevelNode } from '../config/check.js';
import { listens as listenSlot, locationDef } from '../config/modules/http-core.js';
import { script as scriptSlot, type ScriptOpDef } from '../config/modules/rewrite.js';
import { accessRules } from '../config/modules/access.js';
import type { CompiledLocation, ListenGroup, LocationConf, LocationTree, RouteTable, ScriptOp, ServerSet, VirtualServer } from '../config/route-table.js';
import { ConfChain, type LevelConf, type ListSlot, type Slot } from '../config/spec.js';
import type { ConfigNode, Directive } from '../parser/ast.js';
import { ConfigError } from '../errors.js';
import type { SourceLoc } from '../source-loc.js';
import type { RuntimeContext } from '../runtime/context.js';
import type { Exchange } from '../runtime/exchange.js';
import { checkAccessRules } from '../runtime/handlers/access.js';
import { checkAuthBasic } from '../runtime/handlers/auth-basic.js';
import { params as cgiParams } from '../runtime/handlers/cgi-upstream.js';
import { requestHeaders, upstreamUri, type Destination } from '../runtime/handlers/proxy.js';
import { realClientAddress } from '../runtime/handlers/realip.js';
import { tryFiles } from '../runtime/handlers/static.js';
import { findLocation } from '../runtime/locations.js';
import { CLOSE_STATUSES, countedUriChange, errorPageOf, MAX_URI_CHANGES, redirectTo, scriptAnswerOf } from '../runtime/phases.js';
import { HttpRequestState, type ClientConnection } from '../runtime/request.js';
import { runScript, type ScriptOutcome } from '../runtime/script.js';
import { findServer, matchServer } from '../runtime/server-names.js';
import type { TlsDetails } from '../runtime/tls-details.js';
import { hostPort, normalizePath, validateHost } from '../runtime/uri.js';
import type { ConfPaths } from './conf-paths.js';

/** What the command line asked. */
export interface ExplainOptions {
  /** `METHOD URL`, e.g. `GET https://example.com/a?b=1`, or `METHOD /path` with a Host header (or none). */
  readonly request: string;
  /** `-H 'Name: value'`, in order. */
  readonly headers: readonly string[];
  /** `--addr`: the client's address. */
  readonly addr: string;
  /** `--port`: the port connected to (else the URL's, else 443 for https and 80 for http). */
  readonly port: number | undefined;
  readonly format: 'text' | 'json';
  /** `-g` directives. */
  readonly globalDirectives?: string;
}

/** One step of the rewrite phases (`rewrite`, `return`, `if`, `set`, `break`). */
export interface ExplainStep {
  readonly phase: 'server rewrite' | 'rewrite';
  readonly directive: string;
  readonly file: string | null;
  readonly line: number | null;
  readonly matched: boolean;
  /** The URI and arguments after the step. */
  readonly uri: string;
  readonly args: string;
  /** The index in `locations` of the search this step followed; -1 before any. */
  readonly afterLocation: number;
}

/** One location search (a new one after `rewrite … last`, an internal redirect or a named location). */
export interface ExplainLocation {
  readonly uri: string;
  /** `= /x`, `^~ /x`, `/x`, `~ re`, `~* re`, `@name`, or null when none matched. */
  readonly location: string | null;
  readonly file: string | null;
  readonly line: number | null;
  /** `exact`, `prefix-no-regex`, `prefix`, `regex`, `named`, `none`, `auto-redirect`. */
  readonly rule: string;
  readonly why: string;
  /** The enclosing locations of a nested one, outermost first. */
  readonly nestedIn: readonly string[];
}

/** The whole answer, as `--format json` prints it. */
export interface Explanation {
  readonly request: { readonly method: string; readonly scheme: 'http' | 'https'; readonly host: string; readonly uri: string; readonly args: string; readonly client: string; readonly headers: readonly (readonly [string, string])[] };
  readonly listen: { readonly address: string; readonly port: number; readonly ssl: boolean; readonly file: string; readonly line: number; readonly why: string };
  readonly server: { readonly name: string; readonly file: string; readonly line: number; readonly rule: string; readonly why: string };
  readonly realip: string | null;
  readonly steps: readonly ExplainStep[];
  readonly locations: readonly ExplainLocation[];
  readonly access: { readonly decision: string; readonly lines: readonly string[] };
  readonly handler: { readonly kind: string; readonly lines: readonly string[] };
  /** The status the request ends with, when the explanation can tell without running a handler. */
  readonly status: number | null;
  readonly notes: readonly string[];
  readonly directives: readonly { readonly directive: string; readonly file: string | null; readonly line: number | null; readonly from: string }[];
}

/** A request line, header or option `jinx explain` cannot use. */
class ExplainError extends Error {}

/** The parts of the request line. */
interface RequestLine {
  readonly method: string;
  readonly scheme: 'http' | 'https';
  readonly target: string;
  readonly lineHost: string | undefined;
  readonly port: number | undefined;
  /** `HTTP/1.0` or `HTTP/1.1` (the default when the line has none). */
  readonly protocol: string;
}

/** Reads `METHOD URL [HTTP/x.y]`. @throws ExplainError naming what is wrong */
function parseRequestLine(line: string): RequestLine {
  const m = /^([A-Za-z][A-Za-z_-]*)\s+(\S+)(?:\s+(HTTP\/1\.[01]))?$/.exec(line.trim());
  const expected = `expected METHOD and an absolute URL or a path, as in 'GET https://example.com/path?query'`;
  if (!m) throw new ExplainError(`invalid request line "${line}": ${expected}`);
  const method = m[1]!.toUpperCase();
  const url = m[2]!;
  const protocol = m[3] ?? 'HTTP/1.1';
  const abs = /^(https?):\/\/([^/?#]*)([^#]*)/i.exec(url);
  if (abs) {
    const scheme = abs[1]!.toLowerCase() as 'http' | 'https';
    const authority = abs[2]!;
    if (authority === '') throw new ExplainError(`invalid request line "${line}": the URL has no host`);
    const portText = /:(\d*)$/.exec(authority.replace(/^\[[^\]]*\]/, ''))?.[1];
    return { method, scheme, target: abs[3] || '/', lineHost: authority, port: portText ? Number(portText) : undefined, protocol };
  }
  if (!url.startsWith('/')) throw new ExplainError(`invalid request line "${line}": "${url}" is neither an http(s) URL nor a path; ${expected}`);
  return { method, scheme: 'http', target: url, lineHost: undefined, port: undefined, protocol };
}

/** Reads `-H 'Name: value'`. @throws ExplainError */
function parseHeader(h: string): [string, string] {
  const m = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*(.*?)[ \t]*$/.exec(h);
  if (!m) throw new ExplainError(`invalid header "${h}": expected 'Name: value'`);
  return [m[1]!, m[2]!];
}

const placeOf = (loc: SourceLoc | undefined): { file: string | null; line: number | null } => ({ file: loc?.file ?? null, line: loc?.line ?? null });
const where = (loc: SourceLoc | undefined): string => (loc ? `${loc.file}:${loc.line}` : 'default');

/** A directive as written (arguments quoted where they need it). */
function directiveText(d: Directive): string {
  const args = d.args.map((a, i) => (d.quoted[i] || a === '' || /[\s;{}"']/.test(a) ? JSON.stringify(a) : a));
  return [d.name, ...args].join(' ') + (d.block ? ' { … }' : ';');
}

/** How a location is written: `= /x`, `^~ /x`, `/x`, `~ re`, `~* re`, `@name`. */
function locationText(l: CompiledLocation): string {
  const modifier = { exact: '= ', 'prefix-no-regex': '^~ ', prefix: '', regex: '~ ', 'regex-caseless': '~* ', named: '' }[l.match];
  return `${modifier}${l.name}`;
}

/** The configuration as explain reads it: levels and directives by their place. */
class ConfIndex {
  /** Directives by their `loc` object (the setters store the directive's own). */
  readonly directives = new Map<SourceLoc, Directive>();
  readonly nodeOfLevel = new Map<LevelConf, LevelNode>();
  readonly nodeOfLocation = new Map<SourceLoc, LevelNode>();
  readonly nodeOfServer = new Map<SourceLoc, LevelNode>();
  /** Every slot set anywhere, for the settings left at their default. */
  readonly allSlots = new Set<Slot<unknown> | ListSlot<unknown>>();

  constructor(root: LevelNode) {
    const stack = [root];
    while (stack.length > 0) {
      const n = stack.pop()!;
      this.nodeOfLevel.set(n.conf, n);
      if (n.context !== 'main' && n.context !== 'events' && !n.context.startsWith('stream')) for (const s of n.conf.slots()) this.allSlots.add(s);
      if (n.directive) {
        this.directives.set(n.directive.loc, n.directive);
        this.addBlock(n.directive.block);
        if (n.context === 'server') this.nodeOfServer.set(n.directive.loc, n);
      }
      const def = n.conf.own(locationDef)?.value;
      if (def) this.nodeOfLocation.set(def.loc, n);
      stack.push(...n.children);
    }
  }

  private addBlock(nodes: readonly ConfigNode[] | null): void {
    for (const c of nodes ?? []) {
      if (c.kind !== 'directive') continue;
      this.directives.set(c.loc, c);
      if (c.block) this.addBlock(c.block);
    }
  }

  private readonly fileLines = new Map<string, string[]>();

  /**
   * A directive as written: from the parsed tree, or for one of the main
   * context (which no block holds) the statement `name …;` read from its line.
   */
  text(loc: SourceLoc | undefined, name: string): string {
    const d = loc && this.directives.get(loc);
    if (d) return directiveText(d);
    if (!loc) return name;
    let lines = this.fileLines.get(loc.file);
    if (!lines) {
      try {
        lines = readFileSync(loc.file, 'utf8').split('\n');
      } catch {
        lines = [];
      }
      this.fileLines.set(loc.file, lines);
    }
    const at = lines[loc.line - 1]?.indexOf(name) ?? -1;
    const stmt = at === -1 ? undefined : /^[^;{]*;/.exec(lines[loc.line - 1]!.slice(at))?.[0];
    return stmt ?? name;
  }

  /** The merge chain of a level, as the compiler builds it. */
  chain(node: LevelNode): ConfChain {
    const path: LevelNode[] = [];
    for (let n: LevelNode | undefined = node; n; n = n.parent) path.unshift(n);
    let chain: ConfChain | undefined;
    for (const n of path) chain = new ConfChain(n.conf, chain);
    return chain!;
  }
}

/** The script ops of a level paired with their directives (`levelScript` binds them in the same order). */
function scriptPlaces(level: LevelConf, ops: readonly ScriptOp[], out: Map<ScriptOp, { loc: SourceLoc; block: LevelConf | undefined }>): void {
  const entries = level.ownList(scriptSlot) ?? [];
  ops.forEach((op, i) => {
    const e = entries[i];
    if (!e) return;
    const def: ScriptOpDef = e.value;
    const block = def.op === 'if' ? def.block : undefined;
    out.set(op, { loc: e.loc, block });
    if (op.op === 'if' && block) scriptPlaces(block, op.ops, out);
  });
}

/** Every location of a tree, with the location it is nested in. */
function indexLocations(tree: LocationTree, parent: CompiledLocation | undefined, out: Map<CompiledLocation, { parent: CompiledLocation | undefined; tree: LocationTree }>): void {
  const all: CompiledLocation[] = [...tree.exact.values(), ...tree.regexes, ...tree.named.values()];
  const nodes = [tree.prefixes];
  while (nodes.length > 0) {
    const n = nodes.pop()!;
    if (n.location) all.push(n.location);
    nodes.push(...n.children.values());
  }
  for (const l of all) {
    if (out.has(l)) continue;
    out.set(l, { parent, tree });
    if (l.nested) indexLocations(l.nested, l, out);
  }
}

/** A server set that holds only the given names, to ask `matchServer` which class of names matched. */
function onlyNames(set: ServerSet, part: Partial<Pick<ServerSet, 'exact' | 'headWildcards' | 'tailWildcards' | 'regexes'>>): ServerSet {
  return { ...set, exact: new Map(), headWildcards: [], tailWildcards: [], regexes: [], ...part };
}

/** The listen socket a connection to `port` (and to `localAddr` when the URL names an address) arrives on. */
function chooseListen(table: RouteTable, port: number, scheme: string, portWhy: string, ipHost: string | undefined): { group: ListenGroup; set: ServerSet; why: string } {
  const groups = table.listens.filter((g) => g.unixPath === undefined && g.port === port);
  if (groups.length === 0) {
    const ports = [...new Set(table.listens.map((g) => g.addrText))].join(', ') || 'none';
    throw new ExplainError(`no listen socket on port ${port} (${portWhy}); the configuration listens on: ${ports}`);
  }
  const wildcard = (g: ListenGroup): boolean => g.host === '0.0.0.0' || g.host === '::';
  let group = ipHost ? groups.find((g) => g.host === ipHost) : undefined;
  let why = `port ${port} (${portWhy})`;
  if (group) why += `, address ${ipHost} from the URL`;
  else {
    group = groups.find(wildcard) ?? groups[0]!;
    why += wildcard(group) ? ', the wildcard address' : groups.length > 1 ? `, the first of ${groups.length} addresses on that port (name an address in the URL to pick another)` : '';
  }
  const set = (ipHost && group.byLocalAddr.get(ipHost)) || group.servers;
  if (group.ssl && scheme === 'http') why += '; an ssl socket: a plain HTTP request to it is answered 400 (497)';
  if (!group.ssl && scheme === 'https') why += '; not an ssl socket: a TLS handshake with it fails';
  return { group, set, why };
}

/** A connection no socket carries: the client's address, the local one, TLS for https. */
function syntheticConnection(addr: string, local: ListenGroup, scheme: string, sni: string | undefined): ClientConnection {
  const tls = scheme === 'https'
    ? ({
        serverName: sni, protocol: 'TLSv1.3', cipher: 'TLS_AES_256_GCM_SHA384', alpnProtocol: undefined, sessionReused: false,
        sessionId: undefined, ciphers: undefined, curves: undefined, verifyResult: 'NONE', clientCertificate: undefined, clientVerify: 'none',
      } as unknown as TlsDetails)
    : undefined;
  return {
    id: 1, peerAddr: addr, peerPort: 0, localAddr: local.host === '0.0.0.0' || local.host === '::' ? (local.host === '::' ? '::1' : '127.0.0.1') : local.host,
    localPort: local.port, tls, requests: 1, acceptedAtMs: Date.now(), counters: { active: 1, reading: 0, writing: 1, waiting: 0 },
  };
}

/**
 * The runtime context the access and try_files handlers are given: only
 * their error-log lines, which become notes (`[error] user "bob": password
 * mismatch`).
 */
function noteContext(notes: string[] | undefined): RuntimeContext {
  return { errorLog: { write: (_targets: unknown, level: string, message: string) => { notes?.push(`error log: [${level}] ${message}`); } } } as unknown as RuntimeContext;
}

/** Explains one request over a compiled configuration. @throws ExplainError */
export async function explainRequest(table: RouteTable, root: LevelNode, opts: ExplainOptions): Promise<Explanation> {
  const line = parseRequestLine(opts.request);
  const headers = opts.headers.map(parseHeader);
  if (isIP(opts.addr) === 0) throw new ExplainError(`invalid --addr "${opts.addr}": expected an IPv4 or IPv6 address`);
  const index = new ConfIndex(root);
  const notes: string[] = [];

  const hostHeader = headers.find(([n]) => n.toLowerCase() === 'host')?.[1];
  if (line.lineHost === undefined && hostHeader === undefined) notes.push('no Host: the request line has a path and no Host header was given');
  const rawHost = line.lineHost ?? hostHeader;
  const port = opts.port ?? line.port ?? (line.scheme === 'https' ? 443 : 80);
  const portWhy = opts.port !== undefined ? '--port' : line.port !== undefined ? 'from the URL' : `the ${line.scheme} default`;
  const bareHost = rawHost === undefined ? undefined : rawHost.replace(/:\d*$/, '').replace(/^\[(.*)\]$/, '$1');
  const { group, set, why: listenWhy } = chooseListen(table, port, line.scheme, portWhy, bareHost && isIP(bareHost) ? bareHost : undefined);

  const host = rawHost === undefined ? '' : validateHost(rawHost);
  if (host === undefined) throw new ExplainError(`invalid host "${rawHost}": nginx answers 400 (client sent invalid host ${line.lineHost !== undefined ? 'in request line' : 'header'})`);
  const q = line.target.indexOf('?');
  const uri = normalizePath(q === -1 ? line.target : line.target.slice(0, q), set.defaultServer.conf.mergeSlashes);
  if (uri === undefined) throw new ExplainError(`invalid URI "${line.target}": nginx answers 400 (client sent invalid request)`);

  const rawHeaders: string[] = [];
  const nodeHeaders: Record<string, string> = {};
  const allHeaders: [string, string][] = line.lineHost !== undefined && hostHeader === undefined ? [['Host', line.lineHost], ...headers] : headers;
  for (const [n, v] of allHeaders) {
    rawHeaders.push(n, v);
    const lower = n.toLowerCase();
    nodeHeaders[lower] = nodeHeaders[lower] === undefined ? v : `${nodeHeaders[lower]}, ${v}`;
  }
  const conn = syntheticConnection(opts.addr, group, line.scheme, line.scheme === 'https' ? host || undefined : undefined);
  const r = new HttpRequestState(conn, line.method, line.target, line.protocol, nodeHeaders, rawHeaders, line.scheme, table.variableCount);
  r.uri = uri;
  r.args = q === -1 ? '' : line.target.slice(q + 1);
  r.requestHost = host;
  r.requestPort = host && rawHost ? hostPort(rawHost) : '';
  const ex: Exchange = { cx: noteContext(notes), r, body: undefined, out: undefined as unknown as Exchange['out'] };

  // the server
  const server = findServer(set, host, r);
  r.server = server;
  r.loc = server.conf;
  r.host = host || server.name;
  const serverNode = index.nodeOfServer.get(server.loc);
  const serverChoice = explainServer(set, host, server, serverNode, port, group.addrText);
  const clientBefore = r.clientAddr;
  realClientAddress(r);
  const realip = r.clientAddr !== clientBefore ? `client address ${clientBefore} replaced by ${r.clientAddr} (real_ip_header)` : null;

  const places = new Map<ScriptOp, { loc: SourceLoc; block: LevelConf | undefined }>();
  if (serverNode) scriptPlaces(serverNode.conf, server.script, places);
  const locIndex = new Map<CompiledLocation, { parent: CompiledLocation | undefined; tree: LocationTree }>();
  indexLocations(server.locations, undefined, locIndex);
  for (const l of locIndex.keys()) {
    const n = index.nodeOfLocation.get(l.loc);
    if (n) scriptPlaces(n.conf, l.conf.script, places);
  }

  const steps: ExplainStep[] = [];
  const locations: ExplainLocation[] = [];
  let level: LevelNode | undefined = serverNode;
  let phase: ExplainStep['phase'] = 'server rewrite';
  const onStep = (op: ScriptOp, matched: boolean): void => {
    const p = places.get(op);
    if (op.op === 'if' && matched && op.conf && p?.block) level = index.nodeOfLevel.get(p.block) ?? level;
    steps.push({ phase, directive: index.text(p?.loc, op.op), ...placeOf(p?.loc), matched, uri: r.uri, args: r.args, afterLocation: phase === 'rewrite' ? locations.length - 1 : -1 });
  };
  // what phases.ts answers a script's end with (`scriptAnswerOf`): `stage` goes through finalize (and `error_page`); a text answers as it is
  const scriptStatus = (o: ScriptOutcome): { status: number; note: string; stage: boolean } | undefined => {
    if (o.kind !== 'redirect' && o.kind !== 'return') return undefined;
    const note = o.kind === 'redirect' ? `redirect ${o.code} to ${o.location}` : `return ${o.code}${o.text !== undefined ? ` "${o.text}"` : ''}`;
    return { status: o.code, note, stage: scriptAnswerOf(o).kind === 'finalize' };
  };
  // a response sent after an error_page has the status error_page gave it (ngx_http_send_header: r->err_status)
  const sent = (s: number): number => r.errStatus || s;

  let status: number | null = null;
  let handler: Explanation['handler'] = { kind: 'none', lines: [] };
  let access: Explanation['access'] = { decision: 'not reached', lines: [] };
  // where the request is: from server rewrite, at the location search, or entering a named location
  let stage: { at: 'server' } | { at: 'find' } | { at: 'named'; name: string } | { at: 'status'; status: number } = { at: 'server' };
  for (let round = 0; ; round++) {
    if (round > 4 * MAX_URI_CHANGES) throw new ExplainError('the request does not settle');
    if (stage.at === 'status') {
      // finalize of phases.ts: a closing status ends the request; else its error_page, if one applies
      const s: number = stage.status;
      r.errStatus = s;
      const page = CLOSE_STATUSES.has(s) ? undefined : errorPageOf(r, s);
      if (page === undefined) {
        status = s;
        break;
      }
      if (page.kind === 'named') {
        notes.push(`status ${s}: error_page → ${page.name}`);
        stage = { at: 'named', name: page.name };
      } else if (page.kind === 'uri') {
        notes.push(`status ${s}: error_page → ${page.uri}${page.args ? `?${page.args}` : ''}`);
        stage = internalRedirect(r, page.uri, page.args) ? { at: 'server' } : { at: 'status', status: 500 };
      } else {
        notes.push(`status ${s}: error_page → ${page.location}`, `redirect ${page.status} to ${page.location}`);
        status = page.status;
        break;
      }
      continue;
    }
    if (stage.at === 'server') {
      phase = 'server rewrite';
      r.loc = server.conf;
      level = serverNode;
      const o = runScript(server.script, r, undefined, onStep);
      const done = scriptStatus(o);
      if (done) {
        notes.push(`server rewrite: ${done.note}`);
        if (!done.stage) {
          status = sent(done.status);
          break;
        }
        stage = { at: 'status', status: done.status };
        continue;
      }
      stage = { at: 'find' };
    }
    if (stage.at === 'named') {
      const named = server.locations.named.get(stage.name);
      if (!named) {
        notes.push(`could not find named location "${stage.name}"`);
        stage = { at: 'status', status: 500 };
        continue;
      }
      if (!countedUriChange(r)) {
        stage = { at: 'status', status: 500 };
        continue;
      }
      locations.push({ uri: r.uri, location: named.name, ...placeOf(named.loc), rule: 'named', why: `named location ${named.name}, reached by try_files or error_page`, nestedIn: [] });
      r.location = named;
      r.loc = named.conf;
      r.internal = true;
      level = index.nodeOfLocation.get(named.loc);
    } else {
      const match = findLocation(server.locations, r.uri, r);
      locations.push(explainLocation(server, r, match.location, match.autoRedirect, locIndex));
      if (match.autoRedirect) {
        status = 301;
        notes.push(`auto_redirect: 301 to ${r.uri}/`);
        break;
      }
      r.location = match.location;
      r.loc = match.location?.conf ?? server.conf;
      level = match.location ? index.nodeOfLocation.get(match.location.loc) : serverNode;
      if (r.loc.internal && !r.internal) {
        notes.push('the location is internal and the request is not: 404');
        stage = { at: 'status', status: 404 };
        continue;
      }
    }
    const limit = r.loc.limitExcept;
    if (limit && !limit.methods.has(r.method)) {
      r.loc = limit.conf;
      level = level?.children.find((c) => c.context === 'limit_except') ?? level;
      notes.push(`limit_except: ${r.method} is not among ${[...limit.methods].join(' ')}; the block's settings apply`);
    }
    phase = 'rewrite';
    const outcome = runScript(r.loc.script, r, undefined, onStep);
    const done = scriptStatus(outcome);
    if (done) {
      notes.push(`rewrite: ${done.note}`);
      if (!done.stage) {
        status = sent(done.status);
        break;
      }
      stage = { at: 'status', status: done.status };
      continue;
    }
    if (outcome.kind === 'last' || (outcome.kind === 'done' && outcome.uriChanged)) {
      if (!countedUriChange(r)) {
        notes.push(`rewrite or internal redirection cycle while processing "${r.uri}"`);
        stage = { at: 'status', status: 500 };
        continue;
      }
      stage = { at: 'find' };
      continue;
    }
    realClientAddress(r);
    access = await explainAccess(ex, level ? index.chain(level) : undefined);
    if (typeof access.decision === 'string' && /^\d+$/.test(access.decision)) {
      stage = { at: 'status', status: Number(access.decision) };
      continue;
    }
    if (r.loc.tryFiles) {
      const before = r.uri;
      const tf = await tryFiles(ex);
      if (tf.kind === 'found') notes.push(`try_files: found ${r.mapUriToPath(r.uri)} (URI ${before} → ${r.uri})`);
      else if (tf.kind === 'named') {
        notes.push(`try_files: no file found, fallback ${tf.name}`);
        stage = { at: 'named', name: tf.name };
        continue;
      } else if (tf.kind === 'redirect') {
        notes.push(`try_files: no file found, fallback ${tf.uri}${tf.args ? `?${tf.args}` : ''}`);
        stage = internalRedirect(r, tf.uri, tf.args) ? { at: 'server' } : { at: 'status', status: 500 };
        continue;
      } else if (tf.kind === 'status') {
        notes.push(`try_files: no file found, fallback =${tf.status}`);
        stage = { at: 'status', status: tf.status };
        continue;
      }
    }
    const h = explainHandler(r, table);
    handler = h.handler;
    if (h.status !== undefined && h.status >= 400) {
      stage = { at: 'status', status: h.status };
      continue;
    }
    status = h.status === undefined ? null : sent(h.status);
    break;
  }

  return {
    request: { method: line.method, scheme: line.scheme, host, uri, args: q === -1 ? '' : line.target.slice(q + 1), client: opts.addr, headers: allHeaders },
    listen: { address: group.addrText, port: group.port, ssl: group.ssl, file: group.loc.file, line: group.loc.line, why: listenWhy },
    server: serverChoice,
    realip,
    steps,
    locations,
    access,
    handler,
    status,
    notes,
    directives: level ? directivesInPlay(index, level) : [],
  };
}

/** An internal redirect (`redirectTo` of phases.ts); false past nginx's 10 URI changes. */
function internalRedirect(r: HttpRequestState, uri: string, args: string): boolean {
  redirectTo(r, uri, args);
  return countedUriChange(r);
}

/** Why `findServer` chose `server`: each class of names asked on its own, in nginx's order. */
function explainServer(set: ServerSet, host: string, server: VirtualServer, node: LevelNode | undefined, port: number, addrText: string): Explanation['server'] {
  const base = { name: server.name, file: server.loc.file, line: server.loc.line };
  if (set.exact.size === 0 && set.headWildcards.length === 0 && set.tailWildcards.length === 0 && set.regexes.length === 0) {
    return { ...base, rule: 'only server', why: `the only server on ${addrText}: nginx does not compare names` };
  }
  // the names as the server block writes them (`.example.com` and `*.example.com` share a suffix)
  const written = (node?.directive?.block ?? []).flatMap((d) => (d.kind === 'directive' && d.name === 'server_name' ? d.args : []));
  const asWritten = (...forms: string[]): string => forms.find((f) => written.includes(f)) ?? forms[0]!;
  if (host !== '') {
    if (matchServer(onlyNames(set, { exact: set.exact }), host) === server) return { ...base, rule: 'exact', why: `exact name "${host}"` };
    for (const w of set.headWildcards) {
      if (matchServer(onlyNames(set, { headWildcards: [w] }), host)) return { ...base, rule: 'leading wildcard', why: `leading wildcard "${asWritten(`*${w[0]}`, w[0])}" (the longest that matches "${host}")` };
    }
    for (const w of set.tailWildcards) {
      if (matchServer(onlyNames(set, { tailWildcards: [w] }), host)) return { ...base, rule: 'trailing wildcard', why: `trailing wildcard "${w[0]}*" (the longest that matches "${host}")` };
    }
    for (let i = 0; i < set.regexes.length; i++) {
      const rx = set.regexes[i]!;
      if (!matchServer(onlyNames(set, { regexes: [rx] }), host)) continue;
      const before = set.regexes.slice(0, i).map((x) => `~${x.regex.source}`);
      return { ...base, rule: 'regex', why: `regex "~${rx.regex.source}" is the first that matches "${host}"${before.length ? ` (tried before it: ${before.join(', ')})` : ''}` };
    }
  }
  const defaults = node?.conf.ownList(listenSlot)?.filter((l) => l.value.defaultServer && l.value.port === port) ?? [];
  const how = defaults.length > 0 ? `"default_server" at ${where(defaults[0]!.loc)}` : 'the first server listening on this address and port';
  const which = host === '' ? 'the request has no Host' : `no server name matches "${host}"`;
  return { ...base, rule: 'default server', why: `${which}: the default server, ${how}` };
}

/** Why `findLocation` chose `loc`: its rule, and what it won over, asked again of the same function. */
function explainLocation(
  server: VirtualServer, r: HttpRequestState, loc: CompiledLocation | undefined, autoRedirect: boolean,
  locIndex: ReadonlyMap<CompiledLocation, { parent: CompiledLocation | undefined; tree: LocationTree }>,
): ExplainLocation {
  const uri = r.uri;
  if (!loc) return { uri, location: null, file: null, line: null, rule: 'none', why: 'no location matches: the server\'s own settings apply', nestedIn: [] };
  const nestedIn: string[] = [];
  for (let p = locIndex.get(loc)?.parent; p; p = locIndex.get(p)?.parent) nestedIn.unshift(locationText(p));
  const base = { uri, location: locationText(loc), ...placeOf(loc.loc), nestedIn };
  if (autoRedirect) return { ...base, rule: 'auto-redirect', why: `"${uri}" lacks only the final slash of "${loc.name}", whose handler is proxy_pass or fastcgi_pass: 301 to "${uri}/"` };
  const nested = nestedIn.length > 0 ? ` (nested in ${nestedIn.join(' → ')})` : '';
  const tree = locIndex.get(loc)?.tree ?? server.locations;
  const regexesTried = (upTo: CompiledLocation | undefined): string[] => {
    const list: string[] = [];
    const trees: LocationTree[] = [tree];
    for (let p = locIndex.get(loc)?.parent; p; p = locIndex.get(p)?.parent) trees.push(locIndex.get(p)?.tree ?? server.locations);
    for (const t of trees) {
      for (const x of t.regexes) {
        if (x === upTo) return list;
        list.push(locationText(x));
      }
      if (upTo) break;
    }
    return list;
  };
  switch (loc.match) {
    case 'exact':
      return { ...base, rule: 'exact', why: `exact match "= ${loc.name}"${nested}: the search stops there` };
    case 'prefix-no-regex':
      return { ...base, rule: 'prefix-no-regex', why: `longest matching prefix "${loc.name}" has "^~"${nested}: regex locations are not tried` };
    case 'prefix': {
      const tried = regexesTried(undefined);
      return { ...base, rule: 'prefix', why: `longest matching prefix "${loc.name}"${nested}; ${tried.length ? `no regex location matched (tried: ${tried.join(', ')})` : 'there are no regex locations to try'}` };
    }
    case 'regex':
    case 'regex-caseless': {
      const before = regexesTried(loc);
      // the prefix the regex won over: the same search without the regexes of its level
      const saved = { captures: r.captures, vars: [...r.vars] };
      const prefix = findLocation({ ...tree, regexes: [] }, uri, r).location;
      r.captures = saved.captures;
      saved.vars.forEach((v, i) => (r.vars[i] = v));
      const over = prefix ? `; it wins over the longest prefix "${locationText(prefix)}"` : '';
      return { ...base, rule: 'regex', why: `"${locationText(loc)}" is the first regex in configuration order that matches${nested}${before.length ? ` (tried before it: ${before.join(', ')})` : ''}${over}` };
    }
    default:
      return { ...base, rule: loc.match, why: `named location ${loc.name}` };
  }
}

/** The access phase: `allow`/`deny` (each rule asked on its own, in order), `auth_basic`, `auth_request`, `satisfy`. */
async function explainAccess(ex: Exchange, chain: ConfChain | undefined): Promise<Explanation['access']> {
  const { r } = ex;
  const loc = r.loc;
  const lines: string[] = [];
  if (loc.access.length === 0 && !loc.authBasic && !loc.authRequest) return { decision: 'no access checks', lines };
  const ruleLocs = chain?.listEntries(accessRules).map((e) => e.loc) ?? [];
  const results: (string | number)[] = [];
  if (loc.access.length > 0) {
    let decided = false;
    for (let i = 0; i < loc.access.length && !decided; i++) {
      const rule = loc.access[i]!;
      r.loc = { ...loc, access: [rule] } as LocationConf;
      // one rule at a time, its error-log line left out: the whole list's run below logs it
      const res = checkAccessRules({ ...ex, cx: noteContext(undefined) });
      r.loc = loc;
      const text = `${rule.allow ? 'allow' : 'deny'} ${rule.text}; (${where(ruleLocs[i])})`;
      if (res === 'declined') lines.push(`${text} does not match ${r.clientAddr}`);
      else {
        lines.push(`${text} matches ${r.clientAddr}: ${res === 'ok' ? 'allowed' : `${res} (access forbidden by rule)`}`);
        decided = true;
      }
    }
    if (!decided) lines.push(`no allow/deny rule matches ${r.clientAddr}: allowed`);
    results.push(checkAccessRules(ex));
  }
  if (loc.authBasic) {
    const realm = loc.authBasic.realm.evaluate(r);
    const res = realm === 'off' ? 'declined' : await checkAuthBasic(ex);
    lines.push(`auth_basic "${realm}" with user file ${loc.authBasic.userFile.evaluate(r)}: ${res === 'ok' ? 'the Authorization header is accepted' : res === 'declined' ? 'off' : `${res}${r.headers.authorization === undefined ? ' (no Authorization header)' : ''}`}`);
    results.push(res);
  }
  if (loc.authRequest) {
    const sub = r.subrequest(loc.authRequest.uri, '', r.vars.length);
    const target = findLocation(r.server.locations, sub.uri, sub).location;
    lines.push(`auth_request ${loc.authRequest.uri}: a subrequest to location ${target ? `"${locationText(target)}" (${where(target.loc)})${target.conf.internal ? ', internal' : ''}` : 'none (the server\'s settings)'}; its status decides (2xx allows, 401/403 refuse)`);
    results.push('ok');
  }
  const any = loc.satisfy === 'any';
  let decision: string;
  if (any) decision = results.some((x) => x === 'ok') ? 'allowed (satisfy any)' : String(results.find((x) => x === 401) ?? results.find((x) => typeof x === 'number') ?? 'allowed');
  else decision = String(results.find((x) => typeof x === 'number') ?? (loc.authRequest ? 'allowed if the auth_request subrequest answers 2xx' : 'allowed'));
  lines.push(`satisfy ${loc.satisfy}`);
  return { decision, lines };
}

/** The content handler and what it would do: the upstream URL and headers, FastCGI params, or the file. */
function explainHandler(r: HttpRequestState, table: RouteTable): { handler: Explanation['handler']; status: number | undefined } {
  const loc = r.loc;
  const lines: string[] = [];
  const passed = loc.contentHandler === 'proxy_pass' ? loc.proxy : loc.contentHandler === 'grpc_pass' ? loc.grpc : undefined;
  if (passed && loc.contentHandler) {
    const p = passed;
    const kind = loc.contentHandler;
    const grpc = p.module === 'grpc';
    let scheme: 'http' | 'https';
    let hostHeader: string;
    let uri: string;
    let peers: string;
    let keepalive = 0;
    if (p.target.kind === 'static') {
      scheme = p.target.scheme;
      hostHeader = p.target.hostHeader;
      uri = upstreamUri(r, p, p.target.uri);
      const group = table.upstreams.get(p.target.group);
      peers = group ? group.peers.map((x) => x.name).join(', ') : p.target.group;
      keepalive = group?.keepalive ?? 0;
      if (peers !== p.target.group) lines.push(`upstream ${p.target.group}: ${peers}`);
    } else {
      const url = p.target.url.evaluate(r);
      lines.push(`${kind} with variables, evaluated: "${url}"`);
      const m = grpc ? /^(?:(grpcs?):\/\/)?([^/?#]+)()$/is.exec(url) : /^(https?):\/\/([^/?#]*)(.*)$/is.exec(url);
      if (!m) {
        const why = grpc ? `invalid host in upstream "${url}"` : `invalid URL prefix in "${url}"`;
        return { handler: { kind, lines: [...lines, `${why}: 500`] }, status: 500 };
      }
      scheme = /^(https|grpcs)$/i.test(m[1] ?? '') ? 'https' : 'http';
      hostHeader = m[2]!;
      uri = m[3] || upstreamUri(r, p, undefined);
      peers = hostHeader;
    }
    r.proxyHost = hostHeader;
    const portText = /:(\d+)$/.exec(hostHeader)?.[1];
    r.proxyPort = portText ?? (scheme === 'https' ? '443' : '80');
    const method = p.method?.evaluate(r) ?? r.method;
    const dest = { scheme, peer: { host: hostHeader, port: Number(r.proxyPort), name: peers, keepalive }, attempts: undefined, uri, hostHeader, port: Number(r.proxyPort) } as unknown as Destination;
    const sent = requestHeaders(r, p, dest);
    if (grpc) {
      lines.unshift(`grpc_pass → ${scheme === 'https' ? 'grpcs' : 'grpc'}://${hostHeader}`);
      const host = sent.headers.some((h, i) => i % 2 === 0 && h.toLowerCase() === 'host');
      lines.push(`request: HTTP/2 :method ${method}, :path ${uri}${host ? '' : `, :authority ${hostHeader}`}`);
    } else {
      lines.unshift(`proxy_pass → ${scheme}://${hostHeader}${uri}`);
      lines.push(`request line: ${method} ${uri} HTTP/${p.httpVersion}`);
    }
    for (let i = 0; i < sent.headers.length; i += 2) lines.push(`header: ${sent.headers[i]}: ${sent.headers[i + 1]}`);
    if (!grpc) {
      if (sent.upgrade !== undefined) lines.push(`header: Upgrade: ${sent.upgrade}`);
      lines.push(`header: Connection: ${sent.upgrade !== undefined ? 'upgrade' : sent.reuse ? 'keep-alive' : 'close'}`);
    }
    for (const o of sent.omitted) lines.push(o);
    return { handler: { kind, lines }, status: undefined };
  }
  const pass = loc.contentHandler === 'fastcgi_pass' ? loc.fastcgi : loc.contentHandler === 'uwsgi_pass' ? loc.uwsgi
    : loc.contentHandler === 'scgi_pass' ? loc.scgi : loc.contentHandler === 'memcached_pass' ? loc.memcached : undefined;
  if (pass && loc.contentHandler) {
    const t = pass.target;
    const peers = t.kind === 'group' ? table.upstreams.get(t.group)?.peers.map((x) => x.name).join(', ') ?? t.group : '';
    const to = t.kind === 'group' ? (peers === t.group ? t.group : `${t.group} (${peers})`) : t.kind === 'unix' ? `unix:${t.path}` : t.address.evaluate(r);
    lines.push(`${loc.contentHandler} → ${to}`);
    if ('key' in pass) lines.push(`key: ${pass.key.evaluate(r)}`);
    else for (const [n, v] of cgiParams(r, pass)) lines.push(`param: ${n} = ${v}`);
    return { handler: { kind: loc.contentHandler, lines }, status: undefined };
  }
  if (loc.contentHandler === 'empty_gif') return { handler: { kind: 'empty_gif', lines: ['a 43-byte transparent GIF'] }, status: 200 };
  if (loc.contentHandler === 'stub_status') return { handler: { kind: 'stub_status', lines: ['the status page'] }, status: 200 };
  const path = r.mapUriToPath(r.uri);
  lines.push(`${loc.root.alias ? 'alias' : 'root'} ${r.documentRoot()}: URI ${r.uri} → ${path}`);
  if (loc.dav.methods.has(r.method)) {
    lines.push(`dav_methods: ${r.method} acts on ${path}`);
    return { handler: { kind: 'dav', lines }, status: undefined };
  }
  if (r.uri.endsWith('/')) {
    const names = loc.index.map((v) => v.evaluate(r));
    for (const name of names) {
      const file = name.startsWith('/') ? name : path + name;
      if (name.startsWith('/') || exists(file) === 'file') {
        lines.push(`index: ${file}${name.startsWith('/') ? ' (internal redirect)' : ' exists'}`);
        return { handler: { kind: 'index', lines }, status: 200 };
      }
      lines.push(`index: ${file} not found`);
    }
    if (loc.autoindex.enable) return { handler: { kind: 'autoindex', lines: [...lines, 'autoindex: the directory listing'] }, status: 200 };
    return { handler: { kind: 'index', lines: [...lines, exists(path) === 'dir' ? 'no index file and no autoindex: 403' : 'directory not found: 404'] }, status: exists(path) === 'dir' ? 403 : 404 };
  }
  const kind = exists(path);
  lines.push(kind === 'file' ? 'the file exists: 200' : kind === 'dir' ? 'a directory: 301 to the URI with a slash' : 'no such file: 404');
  return { handler: { kind: 'static', lines }, status: kind === 'file' ? 200 : kind === 'dir' ? 301 : 404 };
}

function exists(path: string): 'file' | 'dir' | 'none' {
  try {
    const st = statSync(Buffer.from(path, 'latin1'));
    return st.isDirectory() ? 'dir' : 'file';
  } catch {
    return 'none';
  }
}

/** A level's name for "set in …": `http`, `server "x"`, `location /y`, `if (…)`. */
function levelName(n: LevelNode): string {
  if (!n.directive) return 'main';
  if (n.context === 'server') return 'server';
  if (n.directive.args.length === 0) return n.directive.name;
  return `${n.directive.name} ${n.directive.args.join(' ')}`;
}

/**
 * Every setting in effect at `node` with the directive it came from: each
 * slot set at some level of its chain, read through the chain as the merge
 * reads it (own or inherited); then the settings the configuration sets
 * elsewhere that are at their default here.
 */
function directivesInPlay(index: ConfIndex, node: LevelNode): Explanation['directives'] {
  const chain = index.chain(node);
  const levels: LevelNode[] = [];
  for (let n: LevelNode | undefined = node; n; n = n.parent) levels.push(n);
  const ownerOf = (loc: SourceLoc): LevelNode | undefined => {
    for (const n of levels) {
      for (const s of n.conf.slots()) {
        const own = s.kind === 'single' ? n.conf.own(s as Slot<unknown>) : undefined;
        const list = s.kind === 'list' ? n.conf.ownList(s as ListSlot<unknown>) : undefined;
        if (own?.loc === loc || list?.some((e) => e.loc === loc)) return n;
      }
    }
    return undefined;
  };
  const seen = new Set<SourceLoc>();
  const out: { directive: string; file: string | null; line: number | null; from: string }[] = [];
  const inChain = new Set<Slot<unknown> | ListSlot<unknown>>();
  for (const n of levels) for (const s of n.conf.slots()) inChain.add(s);
  const skip = new Set([scriptSlot.key, locationDef.key]);
  for (const s of inChain) {
    if (skip.has(s.key)) continue;
    const locs = s.kind === 'single' ? [chain.locOf(s as Slot<unknown>)] : chain.listEntries(s as ListSlot<unknown>).map((e) => e.loc);
    for (const loc of locs) {
      if (!loc || seen.has(loc)) continue;
      seen.add(loc);
      const owner = ownerOf(loc);
      // of the main context's settings only the error log reaches a location (nginx's cycle log is http's default)
      if (owner?.context === 'main' && s.key !== 'error_log') continue;
      const from = owner === node ? 'here' : owner ? `inherited from ${levelName(owner)}` : 'inherited';
      out.push({ directive: index.text(loc, s.key), ...placeOf(loc), from });
    }
  }
  out.sort((a, b) => (a.from === 'here' ? 0 : 1) - (b.from === 'here' ? 0 : 1) || String(a.file).localeCompare(String(b.file)) || (a.line ?? 0) - (b.line ?? 0));
  const defaults = new Map<string, string>();
  for (const s of index.allSlots) {
    if (skip.has(s.key) || inChain.has(s) || !s.inherit || !/^[a-z_0-9]+$/.test(s.key)) continue;
    const v = s.kind === 'single' ? (s as Slot<unknown>).defaultValue : undefined;
    defaults.set(s.key, typeof v === 'string' || typeof v === 'number' ? `${s.key} ${v}` : typeof v === 'boolean' ? `${s.key} ${v ? 'on' : 'off'}` : s.key);
  }
  for (const key of [...defaults.keys()].sort()) out.push({ directive: defaults.get(key)!, file: null, line: null, from: 'default' });
  return out;
}

/** The explanation as text. */
export function formatExplanation(e: Explanation): string {
  const out: string[] = [];
  const place = (file: string | null, line: number | null): string => (file ? `${file}:${line}` : 'default');
  out.push(`request   ${e.request.method} ${e.request.scheme}://${e.request.host || '(no host)'}${e.request.uri}${e.request.args ? `?${e.request.args}` : ''} from ${e.request.client}`);
  out.push(`listen    ${e.listen.address}${e.listen.ssl ? ' ssl' : ''} (${e.listen.file}:${e.listen.line}): ${e.listen.why}`);
  out.push(`server    "${e.server.name}" (${e.server.file}:${e.server.line}): ${e.server.why}`);
  if (e.realip) out.push(`realip    ${e.realip}`);
  const stepLine = (s: ExplainStep): string =>
    `  ${s.phase === 'rewrite' ? 'rewrite' : 'server rewrite'}: ${s.directive} (${place(s.file, s.line)}): ${s.matched ? 'applies' : 'does not match'} → ${s.uri}${s.args ? `?${s.args}` : ''}`;
  // server rewrite steps come before the search they lead to; a location's own steps after it
  let next = 0;
  e.locations.forEach((l, i) => {
    while (next < e.steps.length && e.steps[next]!.afterLocation < i) out.push(stepLine(e.steps[next++]!));
    out.push(`location  ${l.location === null ? '(none)' : `"${l.location}" (${place(l.file, l.line)})`} for ${l.uri}: ${l.why}`);
  });
  while (next < e.steps.length) out.push(stepLine(e.steps[next++]!));
  out.push(`access    ${e.access.decision}`);
  for (const l of e.access.lines) out.push(`          ${l}`);
  out.push(`handler   ${e.handler.kind}`);
  for (const l of e.handler.lines) out.push(`          ${l}`);
  for (const n of e.notes) out.push(`note      ${n}`);
  out.push(`status    ${e.status ?? 'decided by the handler'}`);
  out.push('directives in effect:');
  for (const d of e.directives) out.push(`  ${d.directive}  ${d.from === 'default' ? '(default)' : `${place(d.file, d.line)} (${d.from})`}`);
  return out.join('\n') + '\n';
}

/** `jinx explain`: prints the explanation; 0, or 1 with a message naming the problem. */
export async function explain(paths: ConfPaths, opts: ExplainOptions): Promise<number> {
  try {
    const compiled = await compileConfig({ confFile: paths.confFile, prefix: paths.prefix, globalDirectives: opts.globalDirectives });
    const e = await explainRequest(compiled.table, compiled.root, opts);
    process.stdout.write(opts.format === 'json' ? JSON.stringify(e, null, 2) + '\n' : formatExplanation(e));
    return 0;
  } catch (err) {
    if (err instanceof ExplainError) process.stderr.write(`jinx explain: ${err.message}\n`);
    else if (err instanceof ConfigError) process.stderr.write(`jinx explain: ${err.message}\n`);
    else throw err;
    return 1;
  }
}
