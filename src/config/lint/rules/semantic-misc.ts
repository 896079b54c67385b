/**
 * Semantic lint rules over settings: TLS weaker than Mozilla's intermediate
 * profile, server names that nginx ignores on an address, variables defined
 * twice (two `map`s, a `map` and a `set`), and settings that can never take
 * effect because another one disables what they limit.
 */
import { execFileSync } from 'node:child_process';
import type { ConfigNode, Directive } from '../../../parser/ast.js';
import { ruleDocUrl, type LintRule, type LintSubject, type RuleFinding } from '../rule.js';
import { at, directivesIn, httpBlocks, inherited, own, type Block } from './semantic-model.js';

/** Every directive of the configuration, in reading order. */
function everyDirective(nodes: readonly ConfigNode[]): Directive[] {
  const out: Directive[] = [];
  for (const n of nodes) {
    if (n.kind !== 'directive') continue;
    out.push(n, ...directivesIn(n));
  }
  return out;
}

/**
 * The TLS 1.2 cipher suites of Mozilla's "intermediate" configuration
 * (Server Side TLS guidelines 5.7, https://ssl-config.mozilla.org/guidelines/5.7.json);
 * its protocols are TLSv1.2 and TLSv1.3 (TLS 1.3's suites are not set by `ssl_ciphers`).
 */
const INTERMEDIATE_CIPHERS = new Set([
  'ECDHE-ECDSA-AES128-GCM-SHA256', 'ECDHE-RSA-AES128-GCM-SHA256', 'ECDHE-ECDSA-AES256-GCM-SHA384', 'ECDHE-RSA-AES256-GCM-SHA384',
  'ECDHE-ECDSA-CHACHA20-POLY1305', 'ECDHE-RSA-CHACHA20-POLY1305', 'DHE-RSA-AES128-GCM-SHA256', 'DHE-RSA-AES256-GCM-SHA384', 'DHE-RSA-CHACHA20-POLY1305',
]);
const OLD_PROTOCOLS = new Set(['SSLv2', 'SSLv3', 'TLSv1', 'TLSv1.1']);

/**
 * The TLS 1.2 suites an OpenSSL cipher string selects, as `openssl ciphers -s -tls1_2`
 * lists them (nginx hands the string to `SSL_CTX_set_cipher_list`); undefined
 * when the `openssl` command is missing or refuses the string.
 */
function expandCiphers(spec: string): readonly string[] | undefined {
  if (expanded.has(spec)) return expanded.get(spec);
  let suites: string[] | undefined;
  try {
    const out = execFileSync('openssl', ['ciphers', '-s', '-tls1_2', spec], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 5000 });
    suites = out.trim().split(':').filter((c) => c !== '');
  } catch {
    suites = undefined;
  }
  expanded.set(spec, suites);
  return suites;
}
/** What each cipher string expanded to: a snippet included in every server is asked of openssl once. */
const expanded = new Map<string, readonly string[] | undefined>();

/** `tls-weaker-than-intermediate`: protocols or ciphers outside Mozilla's intermediate profile. */
export const tlsWeakerThanIntermediate: LintRule = {
  code: 'tls-weaker-than-intermediate',
  severity: 'warning',
  title: 'TLS protocols or ciphers weaker than Mozilla\'s intermediate profile',
  explanation:
    'Mozilla\'s "intermediate" configuration (Server Side TLS 5.7, https://wiki.mozilla.org/Security/Server_Side_TLS) is the recommended default for '
    + 'general-purpose servers: TLSv1.2 and TLSv1.3 only, and for TLS 1.2 the AEAD suites ECDHE-ECDSA/RSA-AES128-GCM-SHA256, -AES256-GCM-SHA384, '
    + '-CHACHA20-POLY1305 and DHE-RSA-AES128-GCM-SHA256, -AES256-GCM-SHA384, -CHACHA20-POLY1305. ssl_protocols with SSLv3, TLSv1 or TLSv1.1, or '
    + 'ssl_ciphers selecting other suites (CBC modes, SHA-1 MACs, RSA key exchange, DSS; what the string selects is asked of the openssl command) '
    + 'allow downgrades and deprecated cryptography. Fix: ssl_protocols TLSv1.2 TLSv1.3; and ssl_ciphers with exactly the list above.',
  docUrl: ruleDocUrl('tls-weaker-than-intermediate'),
  check(subject: LintSubject, report: (f: RuleFinding) => void): void {
    for (const d of everyDirective(subject.nodes)) {
      if (d.name === 'ssl_protocols') {
        const old = d.args.filter((p) => OLD_PROTOCOLS.has(p));
        if (old.length > 0) report({ message: `ssl_protocols enables ${old.join(', ')}, older than Mozilla's intermediate profile (TLSv1.2 TLSv1.3)`, loc: d.loc });
      } else if (d.name === 'ssl_ciphers' && d.args[0]) {
        const weak = expandCiphers(d.args[0])?.filter((c) => !INTERMEDIATE_CIPHERS.has(c));
        if (!weak || weak.length === 0) continue;
        const shownList = weak.slice(0, 3).join(', ') + (weak.length > 3 ? ` and ${weak.length - 3} more` : '');
        report({ message: `ssl_ciphers "${d.args[0]}" selects ${weak.length} TLS 1.2 suite${weak.length > 1 ? 's' : ''} outside Mozilla's intermediate profile: ${shownList}`, loc: d.loc });
      }
    }
  },
};

/** The address a `listen` argument names, as nginx prints it in "conflicting server name … on ADDR". */
function listenAddr(arg: string): string {
  if (arg.startsWith('unix:')) return arg;
  if (/^\d+$/.test(arg)) return `0.0.0.0:${arg}`;
  const v6 = /^\[([^\]]*)\](?::(\d+))?$/.exec(arg);
  if (v6) return `[${v6[1]}]:${v6[2] ?? '80'}`;
  const colon = arg.lastIndexOf(':');
  const host = colon < 0 ? arg : arg.slice(0, colon);
  const port = colon < 0 ? '80' : arg.slice(colon + 1);
  return `${host === '*' ? '0.0.0.0' : host.toLowerCase()}:${port}`;
}

/** `server-name-conflict`: a name that two servers on one address both claim. */
export const serverNameConflict: LintRule = {
  code: 'server-name-conflict',
  severity: 'warning',
  title: 'Two servers on one address have the same server name',
  explanation:
    'Of two server blocks that listen on the same address and port and name the same host in server_name, nginx uses the first and ignores the name in '
    + 'the second: requests for that host never reach the second server. nginx -t only says "conflicting server name "X" on ADDR, ignored", without a '
    + 'file or line; with many included files (one per site) it is hard to find which two blocks clash. This rule names both places. Fix: remove the '
    + 'name from one of the servers, or merge them. A server without listen counts as listening on *:80.',
  docUrl: ruleDocUrl('server-name-conflict'),
  check(subject: LintSubject, report: (f: RuleFinding) => void): void {
    for (const h of httpBlocks(subject.nodes)) {
      const claimed = new Map<string, Directive>();
      for (const server of h.children.filter((b) => b.directive.name === 'server')) {
        const listens = own(server, 'listen');
        const addrs = new Set(listens.length === 0 ? ['0.0.0.0:80'] : listens.map((l) => listenAddr(l.args[0] ?? '')));
        const reported = new Set<string>();
        for (const sn of own(server, 'server_name')) {
          for (const raw of sn.args) {
            const name = raw.toLowerCase();
            if (name.startsWith('~') || name === '') continue;
            for (const addr of addrs) {
              const key = `${addr} ${name}`;
              const first = claimed.get(key);
              if (!first) {
                claimed.set(key, sn);
              } else if (first !== sn && !reported.has(key)) {
                reported.add(key);
                report({
                  message: `server name "${raw}" on ${addr} is already used by server_name at ${at(first.loc)}: nginx ignores it here (nginx -t: conflicting server name "${name}" on ${addr}, ignored)`,
                  loc: sn.loc,
                });
              }
            }
          }
        }
      }
    }
  },
};

/** The variable a `map`, `geo` or `split_clients` block defines, lowercased with its `$`. */
function definedVariable(d: Directive): string | undefined {
  const v = d.name === 'geo' && d.args.length === 1 ? d.args[0] : d.args[1];
  return v?.startsWith('$') ? v.toLowerCase() : undefined;
}
const DEFINERS = new Set(['map', 'geo', 'split_clients']);

/** The `map`/`geo`/`split_clients` blocks of the http blocks, in reading order. */
function definers(subject: LintSubject): Directive[] {
  return httpBlocks(subject.nodes).flatMap((h) => h.own.filter((d) => DEFINERS.has(d.name) && d.block));
}

/** A block's arguments and statements as text, to tell a repeated identical definition from a different one. */
function definition(d: Directive): string {
  return JSON.stringify([d.name, d.args, directivesIn(d).map((x) => [x.name, x.args])]);
}

/** `map-redefined`: two blocks define the same variable; the last one wins silently. */
export const mapRedefined: LintRule = {
  code: 'map-redefined',
  severity: 'warning',
  title: 'Two map (or geo, split_clients) blocks define the same variable',
  explanation:
    'Each map, geo and split_clients block defines its variable anew; when two define the same variable, nginx keeps the last one for every server, '
    + 'without a warning (nginx -t passes), and the earlier blocks have no effect at all. Nginx Proxy Manager, for one, writes a "map $scheme '
    + '$hsts_header" into each host\'s file with that host\'s HSTS options: all hosts get the options of the file read last. The rule reports each '
    + 'earlier block that differs from the last (an identical repeat changes nothing). Fix: define the variable once, or give each block its own '
    + 'variable name.',
  docUrl: ruleDocUrl('map-redefined'),
  check(subject: LintSubject, report: (f: RuleFinding) => void): void {
    const lastOf = new Map<string, Directive>();
    const all = definers(subject);
    for (const d of all) {
      const v = definedVariable(d);
      if (v) lastOf.set(v, d);
    }
    for (const d of all) {
      const v = definedVariable(d);
      const last = v === undefined ? undefined : lastOf.get(v);
      if (!last || last === d || definition(last) === definition(d)) continue;
      report({ message: `this ${d.name} of "${v}" has no effect: the ${last.name} at ${at(last.loc)} defines "${v}" again, differently, and nginx uses the last definition`, loc: d.loc });
    }
  },
};

/** `map-variable-set`: `set` on a variable that a map defines. */
export const mapVariableSet: LintRule = {
  code: 'map-variable-set',
  severity: 'warning',
  title: 'set assigns a variable that a map (or geo, split_clients) defines',
  explanation:
    'A variable defined by map is computed when it is first read. "set" on the same variable stores a value that then hides the map for the rest of the '
    + 'request, in every location the request passes through after it (also after internal redirects), while requests that do not pass the set see the '
    + 'map: the same name means two things depending on the path taken. A set written directly in a server block is not reported: it applies to '
    + 'every request of that server, a common way to override a map\'s default per site. Fix: give the set its own variable, or put its case into the map.',
  docUrl: ruleDocUrl('map-variable-set'),
  check(subject: LintSubject, report: (f: RuleFinding) => void): void {
    const defs = new Map<string, Directive>();
    for (const d of definers(subject)) {
      const v = definedVariable(d);
      if (v && !defs.has(v)) defs.set(v, d);
    }
    if (defs.size === 0) return;
    for (const h of httpBlocks(subject.nodes)) {
      for (const level of levelsUnder(h).filter((b) => b.directive.name !== 'server')) {
        for (const d of own(level, 'set')) {
          const def = defs.get((d.args[0] ?? '').toLowerCase());
          if (def) report({ message: `set "${d.args[0]}" overrides the ${def.name} at ${at(def.loc)} for the rest of the request`, loc: d.loc });
        }
      }
    }
  },
};

/** A time of nginx's syntax that is zero (`0`, `0s`, `0ms`). */
const isZero = (t: string | undefined): boolean => t !== undefined && /^0+(ms|s|m|h|d|w|M|y)?$/.test(t);

/**
 * Settings that only act when another is enabled: the setting names, the
 * directive that gates them, and when that gate disables them.
 */
const GATED: readonly { readonly names: readonly string[]; readonly gate: string; readonly off: (d: Directive) => boolean; readonly why: string }[] = [
  { names: ['keepalive_requests', 'keepalive_time'], gate: 'keepalive_timeout', off: (d) => isZero(d.args[0]), why: 'keepalive_timeout 0 disables keep-alive connections' },
  { names: ['proxy_next_upstream_timeout', 'proxy_next_upstream_tries'], gate: 'proxy_next_upstream', off: (d) => d.args[0] === 'off', why: 'proxy_next_upstream off never tries a next server' },
  { names: ['fastcgi_next_upstream_timeout', 'fastcgi_next_upstream_tries'], gate: 'fastcgi_next_upstream', off: (d) => d.args[0] === 'off', why: 'fastcgi_next_upstream off never tries a next server' },
];
const LEVELS = new Set(['http', 'server', 'location', 'if', 'limit_except']);

/** The blocks under `b` (itself included) that are configuration levels, in reading order. */
function levelsUnder(b: Block): Block[] {
  const out: Block[] = [];
  const stack = [b];
  while (stack.length > 0) {
    const x = stack.pop()!;
    if (LEVELS.has(x.directive.name)) out.push(x);
    for (let i = x.children.length - 1; i >= 0; i--) stack.push(x.children[i]!);
  }
  return out;
}

/** `timeout-never-fires`: a timeout or limit that the configuration disables everywhere it applies. */
export const timeoutNeverFires: LintRule = {
  code: 'timeout-never-fires',
  severity: 'warning',
  title: 'A timeout or limit that can never take effect',
  explanation:
    'Some timeouts and limits only act on something another directive turns off. keepalive_requests and keepalive_time limit kept-alive connections, '
    + 'and keepalive_timeout 0 closes every connection after its response (ngx_http_finalize_connection). proxy_next_upstream_timeout and _tries '
    + 'bound retries, which proxy_next_upstream off disables (ngx_http_upstream_next); fastcgi_ likewise. A setting is reported when every level it '
    + 'applies to has it disabled. (An upstream block\'s keepalive_requests without "keepalive" is not dead: since nginx 1.29.7 upstream keep-alive '
    + 'is on by default.) Fix: remove the dead setting, or enable what it limits.',
  docUrl: ruleDocUrl('timeout-never-fires'),
  check(subject: LintSubject, report: (f: RuleFinding) => void): void {
    for (const h of httpBlocks(subject.nodes)) {
      for (const level of levelsUnder(h)) {
        for (const g of GATED) {
          for (const d of level.own.filter((x) => g.names.includes(x.name))) {
            const applies = levelsUnder(level).filter((l) => inherited(l, d.name)[0] === d);
            const gates = applies.map((l) => inherited(l, g.gate)[0]);
            if (!gates.every((gd) => gd !== undefined && g.off(gd))) continue;
            report({ message: `${d.name} never takes effect: ${g.why} (${g.gate} at ${at(gates[0]!.loc)})`, loc: d.loc });
          }
        }
      }
    }
  },
};
