/**
 * `server_name` in stream servers (nginx 1.25.5+, `ngx_stream_core_server_name`
 * and `ngx_stream_server_names` in `src/stream/ngx_stream.c`): the names of
 * the servers sharing an address, which the SNI name of a TLS handshake
 * (`ngx_stream_ssl_servername`) or of `ssl_preread`
 * (`ngx_stream_ssl_preread_servername`) selects among, as http's do.
 */
import type { Directive } from '../../parser/ast.js';
import type { Context } from '../flags.js';
import { compileRegex, type NamedCapture, type NginxRegex } from '../regex.js';
import type { ConfigScope } from '../scope.js';
import { fail, listSlot, noEffect, rule, type DirectiveSpec, type LevelConf, type SetContext } from '../spec.js';
import type { StreamView } from '../stream-view.js';
import type { VariableRegistry } from '../variables.js';
import { namedCaptures } from './rewrite.js';
import { ServerNameTable } from '../server-name-table.js';

const CORE = 'ngx_stream_core_module';

/** A server's `server_name`s: lowercased names, or `~regex` ones. */
export const streamServerNames = listSlot<{ readonly name: string; readonly regex: NginxRegex | undefined }>('stream server_name', false);

/** The names of the servers of one address (`ngx_stream_server_names`), to find a server by an SNI name. */
export interface StreamServerNames<S> {
  readonly exact: ReadonlyMap<string, S>;
  /** `*.example.com` and `.example.com`: suffix (with its dot), longest first. */
  readonly heads: readonly (readonly [string, S])[];
  /** `www.example.*`: prefix (with its dot), longest first. */
  readonly tails: readonly (readonly [string, S])[];
  readonly regexes: readonly { readonly regex: RegExp; readonly server: S; readonly captures: readonly NamedCapture[] }[];
}

/** The stream module's `server_name` directives; `vars` is its variable registry (named captures become variables). */
export function streamServerNameDirectives(vars: (scope: ConfigScope) => VariableRegistry<StreamView>): DirectiveSpec[] {
  const set = (d: Directive, cx: SetContext): void => {
    for (const raw of d.args) {
      const ch = raw[0];
      if ((ch === '*' && (raw.length < 3 || raw[1] !== '.')) || (ch === '.' && raw.length < 2)) fail(`server name "${raw}" is invalid`);
      if (ch !== '~') {
        cx.level.append(streamServerNames, { name: raw.toLowerCase(), regex: undefined }, d.loc);
        continue;
      }
      if (raw.length === 1) fail(`empty regex in server name "${raw}"`);
      const regex = compileRegex(raw.slice(1), /[A-Z]/.test(raw.slice(1)));
      for (const name of regex.captureNames) vars(cx.scope).declare(name, { kind: 'set' });
      cx.level.append(streamServerNames, { name: raw, regex }, d.loc);
    }
  };
  const stream: readonly Context[] = ['stream'];
  return [
    { name: 'server_name', module: CORE, contexts: ['stream_server'], args: ['1MORE'], effect: 'runtime', set },
    noEffect({ name: 'server_names_hash_max_size', module: CORE, contexts: stream, args: ['TAKE1'], note: 'server names are kept in a Map' }, rule.num()),
    noEffect({ name: 'server_names_hash_bucket_size', module: CORE, contexts: stream, args: ['TAKE1'], note: 'server names are kept in a Map' }, rule.num()),
  ];
}

/** A server's first name (`cscf->server_name`, `$server_name`): '' without `server_name`. */
export function firstServerName(level: LevelConf): string {
  const name = level.ownList(streamServerNames)?.[0]?.value.name ?? '';
  // `.example.com` is named `example.com`
  return name.startsWith('.') ? name.slice(1) : name;
}

/**
 * `ngx_stream_server_names`: the names of the servers on one address, in
 * configuration order; a name a previous server of the address has is
 * nginx's warning `conflicting server name "NAME" on ADDR, ignored` (`warn`).
 */
export function streamServerNamesOf<S>(
  servers: readonly { readonly level: LevelConf; readonly server: S }[], addrText: string, vars: VariableRegistry<StreamView>,
  warn: (text: string) => void,
): StreamServerNames<S> {
  const table = new ServerNameTable<S>();
  const { exact, heads, tails } = table;
  const regexes: { regex: RegExp; server: S; captures: NamedCapture[] }[] = [];
  for (const { level, server } of servers) {
    const names = level.ownList(streamServerNames)?.map((e) => e.value) ?? [{ name: '', regex: undefined }];
    for (const n of names) {
      if (n.regex) {
        regexes.push({ regex: n.regex.regex, server, captures: namedCaptures(n.regex, vars) });
        continue;
      }
      table.add(n.name, server, () => warn(`conflicting server name "${n.name}" on ${addrText}, ignored`));
    }
  }
  heads.sort((a, b) => b[0].length - a[0].length);
  tails.sort((a, b) => b[0].length - a[0].length);
  return { exact, heads, tails, regexes };
}
