/**
 * Lint rules for the classes of mistakes gixy checks (its plugins
 * `add_header_redefinition`, `alias_traversal`, `ssrf`, `host_spoofing`,
 * `http_splitting`, `origins`, `valid_referers`, `add_header_multiline`,
 * `version_disclosure`, `resolver_external`, `allow_without_deny`,
 * `if_is_evil`), with jinx's knowledge of nginx's inheritance (the levels'
 * slots) and of what each variable can hold.
 */
import { isIP } from 'node:net';
import type { Directive } from '../../../parser/ast.js';
import type { LevelNode } from '../../check.js';
import { accessRules } from '../../modules/access.js';
import { docRoot, internal, locationDef, resolver, serverTokens } from '../../modules/http-core.js';
import { compileRegex } from '../../regex.js';
import { ruleDocUrl, type LintRule, type LintSubject } from '../rule.js';
import { inheritanceRules } from './security-inheritance.js';
import { forgedMatch, groupClimbs, groupHoldsDot } from './security-regex.js';
import {
  captureSources, enclosing, httpLevels, ifRegex, levelName, levelsOf, ownDirectives, PATH_VARIABLES, safeSplit, TaintTable, where, type Taint,
} from './security-levels.js';


/** A pattern compiled as nginx compiles it, or undefined when it does not compile. */
function compiled(pattern: string, caseless: boolean): RegExp | undefined {
  try {
    return compileRegex(pattern, caseless).regex;
  } catch {
    return undefined;
  }
}

/** Calls `fn` with every directive written at every level of the http block, in reading order. */
function eachDirective(subject: LintSubject, fn: (level: LevelNode, d: Directive) => void): void {
  for (const level of httpLevels(subject.root)) for (const d of ownDirectives(subject, level)) fn(level, d);
}

/**
 * The capture `$N` of a regex location's `alias` that can climb out of the
 * alias: the alias's text before it ends with `/`, the location's regex has
 * no `/` right before the group, and the group can match `..` (gixy's
 * alias_traversal, for regex locations).
 */
function climbingCapture(regexSource: string, caseless: boolean, alias: string): { capture: number; text: string } | undefined {
  const parts = safeSplit(alias);
  for (let i = 1; i < parts.length; i++) {
    const p = parts[i]!;
    const before = parts[i - 1]!;
    if (typeof p === 'string' || !('capture' in p) || typeof before !== 'string' || !before.endsWith('/')) continue;
    const g = groupClimbs(regexSource, p.capture, (pattern) => compiled(pattern, caseless));
    if (!g || !g.climbs || regexSource.slice(0, g.start).replace(/\\(.)/g, '$1').endsWith('/')) continue;
    return { capture: p.capture, text: alias };
  }
  return undefined;
}

const aliasTraversal: LintRule = {
  code: 'alias-traversal',
  severity: 'error',
  title: 'alias in a location that does not end where the alias does allows path traversal',
  explanation: 'In `location /files { alias /data/; }` nginx replaces the location\'s prefix with the alias, so `/files../secret` maps to `/data/../secret`: one directory above the alias can be read. The same holds for a regex location whose alias puts a capture after a slash when the regex has no slash before that capture (`location ~ ^/files(.*)$ { alias /data/$1; }`). Fix: end the location with a slash as the alias does (`location /files/ { alias /data/; }`, `location ~ ^/files/(.*)$`), or use `root` where the path allows it.',
  docUrl: ruleDocUrl('alias-traversal'),
  check: (subject, report) => {
    for (const level of levelsOf(subject.root)) {
      const def = level.conf.own(locationDef)?.value;
      const alias = level.conf.own(docRoot);
      if (!def || !alias?.value?.alias) continue;
      const text = alias.value.path.text;
      if ((def.match === 'regex' || def.match === 'regex-caseless') && def.regex) {
        const hit = climbingCapture(def.regex.source, def.match === 'regex-caseless', text);
        if (hit) {
          report({
            message: `alias "${text}" puts capture $${hit.capture} of location "${def.name}" (${where(def.loc)}) after a slash, and the capture can start with "..", so it reads the directory above the alias.`,
            loc: alias.loc,
          });
        }
        continue;
      }
      if (def.match !== 'prefix' && def.match !== 'prefix-no-regex') continue;
      if (def.name.endsWith('/') || !text.endsWith('/')) continue;
      report({
        message: `location "${def.name}" (${where(def.loc)}) has no trailing slash but its alias "${text}" has one, so "${def.name}../" reads the directory above the alias.`,
        loc: alias.loc,
      });
    }
  },
};

/**
 * The scheme and host part of a `proxy_pass` URL: the parts up to the first
 * `/` after `://`, a variable that always starts with `/` ending it too; a
 * URL that is one variable is all host.
 */
function hostParts<T>(parts: readonly (string | T)[], isPath: (p: T) => boolean): (string | T)[] {
  const out: (string | T)[] = [];
  let afterScheme = false;
  for (const p of parts) {
    if (typeof p !== 'string') {
      if (afterScheme && isPath(p)) break;
      out.push(p);
      continue;
    }
    let text = p;
    if (!afterScheme) {
      const k = text.indexOf('://');
      if (k === -1) {
        out.push(text);
        continue;
      }
      afterScheme = true;
      out.push(text.slice(0, k + 3));
      text = text.slice(k + 3);
    }
    const slash = text.indexOf('/');
    if (slash !== -1) {
      out.push(text.slice(0, slash));
      break;
    }
    out.push(text);
  }
  return out;
}

/** The directives whose argument names where jinx connects, with variables. */
const PASSES = new Set(['proxy_pass', 'fastcgi_pass', 'uwsgi_pass', 'scgi_pass']);

const ssrf: LintRule = {
  code: 'proxy-pass-ssrf',
  severity: 'error',
  title: 'proxy_pass or fastcgi_pass takes its host from the request',
  explanation: 'A proxy_pass whose scheme or host (or a fastcgi_pass, uwsgi_pass or scgi_pass whose address) comes from a request header, an argument, the URI or a capture of it lets a client choose where jinx connects (server-side request forgery: internal services, cloud metadata at 169.254.169.254). Internal locations are not reported, nor a capture that cannot hold a dot (`([a-z]+)` chooses among names the configuration writes around it). Fix: proxy to fixed hosts or an upstream block; map client input through a `map` whose values are fixed hosts, with a default.',
  docUrl: ruleDocUrl('proxy-pass-ssrf'),
  check: (subject, report) => {
    const taint = new TaintTable(subject);
    eachDirective(subject, (level, d) => {
      if (!PASSES.has(d.name) || d.args.length !== 1) return;
      const parts = safeSplit(d.args[0]!);
      // fastcgi_pass, uwsgi_pass and scgi_pass take an address: all of it names the host
      const host = d.name !== 'proxy_pass' ? parts : hostParts(parts, (p) => 'name' in p && PATH_VARIABLES.has(p.name.toLowerCase()));
      const location = enclosing(level, ['location']);
      if (location?.conf.own(internal)?.value) return;
      const sources = captureSources(subject, level, d);
      const taints = taint.partTaints(host, sources);
      // a capture that cannot hold a dot chooses among names the configuration writes around it (gixy's ssrf)
      const i = taints.findIndex((t, k) => {
        const p = host[k]!;
        return t.client !== undefined && (typeof p === 'string' || !('capture' in p)
          || sources.some((s) => groupHoldsDot(s.regex.source, p.capture, (pattern) => compiled(pattern, s.regex.regex.flags.includes('i')))));
      });
      if (i === -1) return;
      const p = host[i]!;
      const name = typeof p === 'string' ? p : 'name' in p ? `$${p.name}` : `$${p.capture}`;
      report({ message: `${d.name} "${d.args[0]}" takes its host from ${name}, which comes from ${taints[i]!.client}.`, loc: d.loc });
    });
  },
};

const hostSpoofing: LintRule = {
  code: 'host-spoofing',
  severity: 'warning',
  title: 'the Host header sent upstream is the client\'s, unchecked',
  explanation: '`proxy_set_header Host $http_host` (or `$http_x_forwarded_host`) passes whatever Host the client sent, even one this server does not answer to: the backend builds links, password-reset mails and cache keys from it. `$host` is the server\'s name or the checked, lowercased request host. Fix: `proxy_set_header Host $host;` (or a fixed name).',
  docUrl: ruleDocUrl('host-spoofing'),
  check: (subject, report) => {
    eachDirective(subject, (_level, d) => {
      if (d.name !== 'proxy_set_header' || d.args.length !== 2 || d.args[0]!.toLowerCase() !== 'host') return;
      const spoofed = safeSplit(d.args[1]!).find((p) => typeof p !== 'string' && 'name' in p && ['http_host', 'http_x_forwarded_host'].includes(p.name.toLowerCase()));
      if (!spoofed || typeof spoofed === 'string' || !('name' in spoofed)) return;
      report({ message: `proxy_set_header Host "${d.args[1]}" sends the client's unchecked $${spoofed.name} to the upstream; use $host.`, loc: d.loc });
    });
  },
};

/** Status codes whose `return` text is a Location header (`ngx_http_rewrite_return`). */
const REDIRECT_CODES = new Set(['301', '302', '303', '307', '308']);

/** Where a directive puts a value into a header line, and which of its values (undefined: none). */
function headerValue(d: Directive): { text: string; where: string; capturesEscaped: boolean } | undefined {
  if ((d.name === 'add_header' || d.name === 'proxy_set_header') && d.args.length >= 2) {
    return { text: d.args[1]!, where: `the ${d.args[0]} header`, capturesEscaped: false };
  }
  if (d.name === 'return') {
    if (d.args.length === 2 && REDIRECT_CODES.has(d.args[0]!)) return { text: d.args[1]!, where: 'the Location header', capturesEscaped: false };
    if (d.args.length === 1 && /^(https?:\/\/|\$scheme)/.test(d.args[0]!)) return { text: d.args[0]!, where: 'the Location header', capturesEscaped: false };
  }
  if (d.name === 'rewrite' && d.args.length >= 2) {
    const redirect = d.args[2] === 'redirect' || d.args[2] === 'permanent' || /^(https?:\/\/|\$scheme)/.test(d.args[1]!);
    // a redirect's captures are escaped with NGX_ESCAPE_ARGS when the URI was (ngx_http_script_copy_capture_code)
    if (redirect) return { text: d.args[1]!, where: 'the Location header', capturesEscaped: true };
  }
  if (d.name === 'proxy_pass' && d.args.length === 1) return { text: d.args[0]!, where: 'the request line sent to the upstream', capturesEscaped: false };
  return undefined;
}

const httpSplitting: LintRule = {
  code: 'http-splitting',
  severity: 'error',
  title: 'a header line is built from a value that can hold CR/LF',
  explanation: 'nginx\'s $uri (and $document_uri, and regex captures of them) is URL-decoded: a request for `/%0D%0ASet-Cookie:%20x=1` puts CR LF into it, and a header built from it (add_header, a return or rewrite redirect\'s Location, proxy_set_header, a proxy_pass URI) is split in two, letting the client add headers or a body (response splitting). Fix: use $request_uri (sent as received, never decoded), or capture with a class that excludes CR and LF (`([^/\\r\\n]*)`, `(\\w+)`).',
  docUrl: ruleDocUrl('http-splitting'),
  check: (subject, report) => {
    const taint = new TaintTable(subject);
    eachDirective(subject, (level, d) => {
      const hv = headerValue(d);
      if (!hv) return;
      const parts = safeSplit(hv.text);
      const relevant = hv.capturesEscaped ? parts.filter((p) => typeof p === 'string' || 'name' in p) : parts;
      const t: Taint | undefined = taint.partTaints(relevant, captureSources(subject, level, d)).find((x) => x.newline);
      if (!t) return;
      report({ message: `${d.name} "${hv.text}" puts a value that can hold CR/LF into ${hv.where}: ${t.newline}.`, loc: d.loc });
    });
  },
};

const originRegex: LintRule = {
  code: 'origin-regex',
  severity: 'warning',
  title: 'a regex meant to accept one site\'s Origin or Referer also accepts others',
  explanation: 'A check such as `if ($http_origin ~ "example.com")`, a `map $http_origin` regex key or `valid_referers ~example.com` accepts `https://example.com.evil.invalid` and `https://evilexample.com` too when the regex is not anchored, and `https://wwwxexample.com` when its dots are not escaped: a CORS or hotlink check that any site can pass. Fix: anchor and escape the whole origin (`^https://(www\\.)?example\\.com$`), or compare exactly with a map.',
  docUrl: ruleDocUrl('origin-regex'),
  check: (subject, report) => {
    eachDirective(subject, (_level, d) => {
      if (d.name === 'if') {
        const c = ifRegex(d);
        if (!c || (c.name !== 'http_origin' && c.name !== 'http_referer')) return;
        let regex;
        try {
          regex = compileRegex(c.source, c.caseless);
        } catch {
          return;
        }
        const hit = forgedMatch(regex, c.name === 'http_referer' ? 'referer' : 'origin', c.caseless);
        if (hit) report({ message: `the regex "${c.source}" on $${c.name} also matches "${hit.forged}", which is not ${hit.site}.`, loc: d.loc });
        return;
      }
      if (d.name === 'map' && d.args.length === 2) {
        const source = d.args[0]!.replace(/^\$\{?([^}]*)\}?$/, '$1').toLowerCase();
        if (source !== 'http_origin' && source !== 'http_referer') return;
        for (const e of d.block ?? []) {
          if (e.kind !== 'directive' || !e.name.startsWith('~')) continue;
          const caseless = e.name.startsWith('~*');
          let regex;
          try {
            regex = compileRegex(e.name.slice(caseless ? 2 : 1), caseless);
          } catch {
            continue;
          }
          const hit = forgedMatch(regex, source === 'http_referer' ? 'referer' : 'origin', caseless);
          if (hit) report({ message: `the map key "${e.name}" on $${source} also matches "${hit.forged}", which is not ${hit.site}.`, loc: e.loc });
        }
        return;
      }
      if (d.name !== 'valid_referers') return;
      for (const word of d.args) {
        if (!word.startsWith('~') || word.length < 2) continue;
        let regex;
        try {
          regex = compileRegex(word.slice(1), true);
        } catch {
          continue;
        }
        const hit = forgedMatch(regex, 'referer-host', true);
        if (hit) report({ message: `valid_referers regex "${word}" also accepts the Referer "${hit.forged}", which is not ${hit.site}.`, loc: d.loc });
      }
    });
  },
};

const validReferersNone: LintRule = {
  code: 'valid-referers-none',
  severity: 'warning',
  title: 'valid_referers none accepts requests without a Referer',
  explanation: '`valid_referers none` makes $invalid_referer empty for every request without a Referer header, and anyone can send one without it (curl, a page with `referrerpolicy="no-referrer"`): a check meant to keep other sites out lets them in. Fix: drop `none` where the Referer check protects something; keep it only for hotlink protection where direct visits must work.',
  docUrl: ruleDocUrl('valid-referers-none'),
  check: (subject, report) => {
    eachDirective(subject, (_level, d) => {
      if (d.name === 'valid_referers' && d.args.includes('none')) {
        report({ message: 'valid_referers "none" accepts every request without a Referer header, which any client can send.', loc: d.loc });
      }
    });
  },
};

const addHeaderMultiline: LintRule = {
  code: 'add-header-multiline',
  severity: 'warning',
  title: 'an add_header value spans lines',
  explanation: 'A quoted add_header value written over several lines keeps its line breaks: nginx sends them inside the header, which HTTP/1.1 forbids (obsolete line folding) and clients reject or read as several headers. Fix: write the value on one line (a long Content-Security-Policy can be built with `map` or `set`).',
  docUrl: ruleDocUrl('add-header-multiline'),
  check: (subject, report) => {
    eachDirective(subject, (_level, d) => {
      if ((d.name === 'add_header' || d.name === 'add_trailer') && d.args.length >= 2 && /[\r\n]/.test(d.args[1]!)) {
        const lines = d.args[1]!.split(/\r?\n/).length;
        report({ message: `${d.name} ${d.args[0]} has a value over ${lines} lines; its line breaks are sent inside the header.`, loc: d.loc });
      }
    });
  },
};

const versionDisclosure: LintRule = {
  code: 'version-disclosure',
  severity: 'warning',
  title: 'responses tell the server\'s version',
  explanation: 'With `server_tokens on` (nginx\'s default when the directive is not written) every response\'s Server header and every error page name the version, which tells an attacker which known flaws to try. jinx reports it, as gixy does, both where `server_tokens on` (or `build`) is written and, once, at the http block when no level turns it off. Fix: `server_tokens off;` in the http block.',
  docUrl: ruleDocUrl('version-disclosure'),
  check: (subject, report) => {
    for (const level of httpLevels(subject.root)) {
      const own = level.conf.own(serverTokens);
      if (own && own.value !== 'off') {
        report({ message: `server_tokens ${own.value} sends the version in the Server header and error pages of ${levelName(level)}.`, loc: own.loc });
      }
      if (level.context === 'http' && !own && level.directive) {
        const servers = level.children.filter((c) => c.context === 'server');
        const bare = servers.filter((c) => !c.conf.own(serverTokens));
        if (bare.length === 0) continue;
        const which = bare.length === servers.length ? '' : ` in the http block nor in ${bare.length === 1 ? 'the server' : `${bare.length} servers`} at ${bare.slice(0, 3).map((c) => where(c.directive!.loc)).join(', ')}${bare.length > 3 ? ' …' : ''}`;
        report({ message: `server_tokens is not set${which}, and nginx's default (on) sends the version in the Server header and error pages.`, loc: level.directive.loc });
      }
    }
  },
};

/** Whether a resolver address is on this host or a private network (gixy's resolver_external). */
function isLocalResolver(server: string): boolean {
  const host = server.replace(/^\[([^\]]+)\](?::\d+)?$/, '$1').replace(/^([^:]+):\d+$/, '$1').toLowerCase();
  const v = isIP(host);
  if (v === 4) {
    const [a, b] = host.split('.').map(Number) as [number, number];
    return a === 127 || a === 10 || (a === 172 && b >= 16 && b <= 31) || (a === 192 && b === 168) || (a === 169 && b === 254) || (a === 100 && b >= 64 && b <= 127);
  }
  if (v === 6) return host === '::1' || /^f[cd]/.test(host) || host.startsWith('fe80:');
  return !host.includes('.') || /(^|\.)(localhost|local|internal|lan|home\.arpa|cluster\.local|svc)$/.test(host);
}

const resolverExternal: LintRule = {
  code: 'resolver-external',
  severity: 'warning',
  title: 'resolver points at a public DNS server',
  explanation: 'nginx\'s resolver sends plain UDP queries without DNSSEC; answers from a resolver across the internet can be spoofed (and CVE-2021-23017 was reachable this way), sending proxied traffic to an attacker. Fix: point `resolver` at a local caching resolver (127.0.0.1 with unbound/dnsmasq, 127.0.0.11 in Docker, the cluster DNS), which talks to the internet for you.',
  docUrl: ruleDocUrl('resolver-external'),
  check: (subject, report) => {
    for (const level of httpLevels(subject.root)) {
      const own = level.conf.own(resolver);
      const external = own?.value?.servers.filter((s) => !isLocalResolver(s)) ?? [];
      if (own && external.length > 0) {
        report({ message: `resolver ${external.join(', ')} is a public DNS server; its plain UDP answers can be spoofed.`, loc: own.loc });
      }
    }
  },
};

const allowWithoutDeny: LintRule = {
  code: 'allow-without-deny',
  severity: 'warning',
  title: 'allow without a deny at the same level restricts nothing',
  explanation: 'allow and deny are checked in order and a request no rule matches is let through; a level whose own rules are only `allow` lets every address in, and, having rules of its own, inherits none of the deny rules above it. Fix: end the level\'s list with `deny all;`.',
  docUrl: ruleDocUrl('allow-without-deny'),
  check: (subject, report) => {
    for (const level of httpLevels(subject.root)) {
      const own = level.conf.ownList(accessRules);
      if (!own || own.some((e) => !e.value.allow) || own.every((e) => e.value.match === 'all')) continue;
      report({
        message: `${levelName(level)} has allow ${own.map((e) => e.value.text).join(', ')} (${where(own[0]!.loc)}) and no deny, so every address is allowed.`,
        loc: own[0]!.loc,
      });
    }
  },
};

/** Directives that are safe in an `if` inside a location: the rewrite module's, which end or restart processing. */
function safeInIf(d: Directive): boolean {
  if (d.name === 'return' || d.name === 'set') return true;
  return d.name === 'rewrite' && (d.args[2] === 'last' || d.args[2] === 'redirect' || d.args[2] === 'permanent' || /^(https?:\/\/|\$scheme)/.test(d.args[1] ?? ''));
}

/**
 * Whether a directive ends the block's processing whenever it runs:
 * `return`, or a `rewrite … last`/`redirect`/`permanent` whose regex
 * matches every URI (`^`, `^(.*)$`), which leaves the location.
 */
function ends(d: Directive): boolean {
  if (d.name === 'return') return true;
  if (d.name !== 'rewrite' || !safeInIf(d)) return false;
  const re = compiled(d.args[0]!, false);
  return re !== undefined && ['/', '/a/b.html', '/%20?x'].every((uri) => {
    re.lastIndex = 0;
    return re.exec(uri) !== null;
  });
}

const ifIsEvil: LintRule = {
  code: 'if-is-evil',
  severity: 'warning',
  title: 'an if inside a location does more than return, rewrite … last or set',
  explanation: 'An `if` in a location is a location of its own: when it matches, the request is served with the if block\'s settings (ngx_http_rewrite_if sets them as the request\'s location), which lose what is not inherited (the location\'s try_files; its add_header when the block adds one) and run handlers in surprising orders. Only `return`, `rewrite … last`/`redirect`/`permanent` and `set` are safe inside it, and even a block of `set`s drops the location\'s try_files when it matches unless it ends with `return`. Fix: move the condition into a `map` and use its variable, or `return`/`rewrite … last` to another location.',
  docUrl: ruleDocUrl('if-is-evil'),
  check: (subject, report) => {
    for (const level of levelsOf(subject.root)) {
      if (level.context !== 'lif' || !level.directive) continue;
      const own = ownDirectives(subject, level);
      const unsafe = own.filter((d) => !safeInIf(d));
      const condition = `if ${level.directive.args.join(' ')}`;
      if (unsafe.length > 0) {
        const names = [...new Set(unsafe.map((d) => `${d.name}${d.name === 'rewrite' ? ` … ${d.args[2] ?? '(no flag)'}` : ''} (${where(d.loc)})`))];
        report({ message: `${condition} inside a location holds ${names.join(', ')}; when it matches, the request is served with the if block's settings.`, loc: level.directive.loc });
        continue;
      }
      const location = enclosing(level, ['location']);
      const tryFiles = location && ownDirectives(subject, location).find((d) => d.name === 'try_files');
      if (tryFiles && !own.some(ends)) {
        report({ message: `${condition} inside a location drops its try_files (${where(tryFiles.loc)}) for every request it matches, as the if block does not inherit try_files.`, loc: level.directive.loc });
      }
    }
  },
};

/** The security rules. */
export const securityRules: readonly LintRule[] = [
  ...inheritanceRules,
  aliasTraversal,
  ssrf,
  hostSpoofing,
  httpSplitting,
  originRegex,
  validReferersNone,
  addHeaderMultiline,
  versionDisclosure,
  resolverExternal,
  allowWithoutDeny,
  ifIsEvil,
];

