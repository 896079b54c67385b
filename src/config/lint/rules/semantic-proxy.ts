/**
 * Semantic lint rules about the URI `proxy_pass` sends upstream and the
 * names it goes to, after `ngx_http_proxy_pass` and
 * `ngx_http_proxy_create_request` (`src/http/modules/ngx_http_proxy_module.c`):
 * a URI part replaces the part of the request URI that the location's
 * prefix matched, unless the URI was changed by `rewrite … break` in the
 * location (`r->valid_location` is then 0 and the whole changed URI is
 * sent) or the URL has variables (then the URI part is the whole URI sent).
 */
import { isIP } from 'node:net';
import type { Directive } from '../../../parser/ast.js';
import { ruleDocUrl, type LintRule, type LintSubject, type RuleFinding } from '../rule.js';
import { at, blocksNamed, directivesIn, httpBlocks, inherited, locationName, own, shown, type Block } from './semantic-model.js';

/** The host part and the URI part (from the first `/` after `scheme://`) of a proxy_pass URL; undefined for `unix:` and unknown shapes. */
function splitUrl(url: string): { host: string; uri: string } | undefined {
  const m = /^([a-z]+):\/\/([^/]*)(.*)$/i.exec(url);
  if (!m || m[2]!.startsWith('unix:')) return undefined;
  return { host: m[2]!, uri: m[3]! };
}

/** Each `location` block with its own `proxy_pass` and the URL's parts. */
function proxiedLocations(subject: LintSubject): { loc: Block; pass: Directive; host: string; uri: string }[] {
  const out: { loc: Block; pass: Directive; host: string; uri: string }[] = [];
  for (const h of httpBlocks(subject.nodes)) {
    for (const loc of blocksNamed(h, 'location')) {
      const pass = own(loc, 'proxy_pass')[0];
      const parts = pass && splitUrl(pass.args[0] ?? '');
      if (pass && parts) out.push({ loc, pass, ...parts });
    }
  }
  return out;
}

/** A `rewrite … break` in a location or in an `if` block of it. */
function rewriteBreak(loc: Block): Directive | undefined {
  const levels = [loc, ...loc.children.filter((c) => c.directive.name === 'if')];
  for (const l of levels) {
    const d = own(l, 'rewrite').find((r) => r.args[2] === 'break');
    if (d) return d;
  }
  return undefined;
}

/** `proxy-pass-uri-ignored`: `rewrite … break` makes nginx drop proxy_pass's URI part. */
export const proxyPassUriIgnored: LintRule = {
  code: 'proxy-pass-uri-ignored',
  severity: 'warning',
  title: 'proxy_pass has a URI part that rewrite … break makes nginx ignore',
  explanation:
    'When proxy_pass has a URI part (proxy_pass http://backend/api/;), nginx replaces the part of the request URI that the location matched with it. But '
    + 'once "rewrite … break" has changed the URI in that location, nginx sends the whole rewritten URI and ignores the URI part '
    + '(ngx_http_proxy_create_request: r->valid_location is 0). So location /p/ { rewrite ^/p/(.*)$ /q/$1 break; proxy_pass http://b/up/; } sends "/q/x" '
    + 'for "/p/x", not "/up/q/x". Fix: write the full upstream path in the rewrite and drop the URI part (proxy_pass http://b;).',
  docUrl: ruleDocUrl('proxy-pass-uri-ignored'),
  check(subject: LintSubject, report: (f: RuleFinding) => void): void {
    for (const { loc, pass, uri } of proxiedLocations(subject)) {
      if (uri === '' || pass.args[0]!.includes('$')) continue;
      const rw = rewriteBreak(loc);
      if (!rw) continue;
      report({
        message: `proxy_pass "${pass.args[0]}" has the URI part "${uri}", but "rewrite … break" at ${at(rw.loc)} changes the URI in this location: nginx then sends the rewritten URI as it is and ignores "${uri}"`,
        loc: pass.loc,
      });
    }
  },
};

/** `proxy-pass-variable-uri`: with variables, the URI part is the whole URI sent. */
export const proxyPassVariableUri: LintRule = {
  code: 'proxy-pass-variable-uri',
  severity: 'warning',
  title: 'proxy_pass with variables sends its URI part instead of the request URI',
  explanation:
    'Without variables, proxy_pass http://b/up/; in location /v/ sends "/up/x" for "/v/x": the URI part replaces the matched prefix. With a variable in the '
    + 'URL (proxy_pass http://$backend/up/;) nginx cannot know the prefix at configuration time, and the URI part becomes the whole URI sent: every '
    + 'request of the location goes upstream as "/up/" (ngx_http_proxy_create_request, ctx->vars.uri). Fix: drop the URI part (proxy_pass http://$backend;) '
    + 'and rewrite the URI with "rewrite ^/v/(.*)$ /up/$1 break;", or put the part of the URI to keep in the URL ($1 of a regex location, $request_uri).',
  docUrl: ruleDocUrl('proxy-pass-variable-uri'),
  check(subject: LintSubject, report: (f: RuleFinding) => void): void {
    for (const { loc, pass, host, uri } of proxiedLocations(subject)) {
      const { modifier, name } = locationName(loc.directive);
      if ((modifier !== '' && modifier !== '^~') || !host.includes('$') || uri === '' || uri.includes('$')) continue;
      const example = name.endsWith('/') ? `${name}x` : `${name}/x`;
      report({
        message: `proxy_pass "${pass.args[0]}" has variables, so its URI part "${uri}" is the whole URI sent: "${example}" goes upstream as "${uri}", not with the rest of the URI after "${name}"`,
        loc: pass.loc,
      });
    }
  },
};

/** `proxy-pass-double-slash`: a prefix without a final `/` and a URI part with one. */
export const proxyPassDoubleSlash: LintRule = {
  code: 'proxy-pass-double-slash',
  severity: 'warning',
  title: 'proxy_pass URI part ends with "/" but the location prefix does not',
  explanation:
    'proxy_pass replaces the part of the URI that the location prefix matched by its URI part, character for character. With location /api (no final "/") '
    + 'and proxy_pass http://b/v1/;, "/api/users" becomes "/v1//users" upstream, and "/apix" becomes "/v1/x". Fix: end both with "/" '
    + '(location /api/ and proxy_pass http://b/v1/;) or neither.',
  docUrl: ruleDocUrl('proxy-pass-double-slash'),
  check(subject: LintSubject, report: (f: RuleFinding) => void): void {
    for (const { loc, pass, uri } of proxiedLocations(subject)) {
      const { modifier, name } = locationName(loc.directive);
      if ((modifier !== '' && modifier !== '^~') || name.endsWith('/') || !uri.endsWith('/') || pass.args[0]!.includes('$')) continue;
      report({
        message: `location ${shown(loc.directive)} at ${at(loc.directive.loc)} has no final "/" but proxy_pass's URI part "${uri}" has: "${name}/x" goes upstream as "${uri}/x"`,
        loc: pass.loc,
      });
    }
  },
};

const PASSES = new Set(['proxy_pass', 'fastcgi_pass', 'uwsgi_pass', 'scgi_pass', 'grpc_pass']);

/** The host a `*_pass` argument names (`http://h:1/x` → `h`, `h:9000` → `h`). */
function passHost(arg: string): string {
  const rest = arg.replace(/^[a-z]+:\/\//i, '');
  return rest.split('/')[0]!.replace(/:\d+$/, '').toLowerCase();
}

/** `upstream-host-name`: an upstream block named like a DNS host name. */
export const upstreamHostName: LintRule = {
  code: 'upstream-host-name',
  severity: 'note',
  title: 'An upstream block is named like a host name',
  explanation:
    'When a proxy_pass (or fastcgi_pass …) host is the name of an upstream block, nginx uses that block\'s servers and never looks the name up in DNS. An '
    + 'upstream named like a real host (upstream api.example.com { … }) therefore silently overrides DNS for every proxy_pass to that host in the '
    + 'configuration, which readers of "proxy_pass https://api.example.com" do not expect; the name is still sent as the Host header ($proxy_host). The '
    + 'rule reasons on names only and resolves nothing, so it gives the same findings with --offline. Fix: give the upstream a name without dots '
    + '(upstream api_backend) and set the Host header with proxy_set_header Host when the upstream expects one.',
  docUrl: ruleDocUrl('upstream-host-name'),
  check(subject: LintSubject, report: (f: RuleFinding) => void): void {
    for (const h of httpBlocks(subject.nodes)) {
      const users = directivesIn(h.directive).filter((d) => PASSES.has(d.name) && d.args[0] && !d.args[0].includes('$'));
      for (const up of own(h, 'upstream')) {
        const name = (up.args[0] ?? '').toLowerCase();
        if (!name.includes('.') || isIP(name)) continue;
        const user = users.find((u) => passHost(u.args[0]!) === name);
        if (!user) continue;
        report({
          message: `upstream "${up.args[0]}" is named like a host name: ${user.name} "${user.args[0]}" at ${at(user.loc)} goes to this block's servers, and nginx never resolves "${up.args[0]}" in DNS`,
          loc: up.loc,
        });
      }
    }
  },
};

/** The port a `listen` names (`80` without one, a unix socket's path for `unix:`), as nginx groups servers by address. */
function listenPort(d: Directive): string {
  const a = d.args[0] ?? '';
  if (a.startsWith('unix:')) return a;
  if (/^\d+$/.test(a)) return a;
  return /:(\d+)$/.exec(a)?.[1] ?? '80';
}

/**
 * `grpc-pass-without-http2`: a `grpc_pass` in a server that speaks no
 * HTTP/2. gRPC clients send their calls over HTTP/2 only; a server takes
 * HTTP/2 with `http2 on` (its own or inherited from `http`), or on a port
 * where some server's `listen` has the `http2` parameter
 * (`ngx_http_v2_module`: the parameter is the port's).
 */
export const grpcPassWithoutHttp2: LintRule = {
  code: 'grpc-pass-without-http2',
  severity: 'warning',
  title: 'grpc_pass in a server that does not speak HTTP/2',
  explanation:
    'gRPC clients send their calls over HTTP/2 only (with TLS by ALPN "h2", or in the clear with prior knowledge). A server without "http2 on" (its own or '
    + 'the http block\'s) and without "listen … http2" on its port answers them as HTTP/1.x: every call fails before it reaches grpc_pass (a client over '
    + 'HTTP/1.1 still reaches it, which gRPC clients never are). Fix: "http2 on;" in the server, with "listen … ssl" for clients that use TLS.',
  docUrl: ruleDocUrl('grpc-pass-without-http2'),
  check(subject: LintSubject, report: (f: RuleFinding) => void): void {
    for (const h of httpBlocks(subject.nodes)) {
      const servers = blocksNamed(h, 'server');
      const h2Ports = new Set(servers.flatMap((s) => own(s, 'listen').filter((l) => l.args.includes('http2')).map(listenPort)));
      for (const server of servers) {
        const on = inherited(server, 'http2')[0]?.args[0]?.toLowerCase() === 'on';
        if (on || own(server, 'listen').some((l) => h2Ports.has(listenPort(l)))) continue;
        for (const block of [...blocksNamed(server, 'location'), ...blocksNamed(server, 'if')]) {
          for (const pass of own(block, 'grpc_pass')) {
            report({
              message: `grpc_pass ${pass.args[0]} is in a server that speaks no HTTP/2 (no "http2 on", no "listen … http2" on its port): gRPC clients, which call over HTTP/2, cannot reach it`,
              loc: pass.loc,
            });
          }
        }
      }
    }
  },
};

