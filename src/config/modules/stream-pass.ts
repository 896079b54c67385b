/**
 * `pass` in stream servers (nginx 1.25.5+, `src/stream/ngx_stream_pass_module.c`):
 * the content handler that hands the accepted connection to a listening
 * socket of the same process (an http `listen`, or another stream
 * server's) found by the address it names, as if it had been accepted there.
 */
import { isIP } from 'node:net';
import type { Directive } from '../../parser/ast.js';
import { parseUnixPath } from '../listen.js';
import type { ConfigScope } from '../scope.js';
import { DirectiveFailure, fail, slot, type DirectiveSpec, type SetContext } from '../spec.js';
import type { StreamView } from '../stream-view.js';
import type { ValueSource, VariableRegistry } from '../variables.js';

/** The address `pass` names: an IP address and port, or a unix domain socket. */
export type PassAddress =
  | { readonly host: string; readonly port: number; readonly unixPath?: undefined }
  | { readonly unixPath: string; readonly host?: undefined; readonly port?: undefined };

/** An error of `ngx_parse_url` (`u.err`). */
class UrlError {
  constructor(readonly err: string) {}
}

/**
 * `ngx_parse_url` with `no_resolve` of a `pass` address: the address, or
 * why there is none, in nginx's words: an error of the text (`u.err`:
 * `invalid host`, `invalid port`, `no host`, `no path in the unix domain
 * socket` …), `no addresses` (a name, which is not resolved) or `no port`.
 */
export function parsePassAddress(text: string): { readonly address: PassAddress } | { readonly err: string } | { readonly missing: 'addresses' | 'port' } {
  if (text.toLowerCase().startsWith('unix:')) {
    try {
      return { address: { unixPath: parseUnixPath(text, (err) => { throw new UrlError(err); }) } };
    } catch (e) {
      if (e instanceof UrlError) return { err: e.err };
      throw e;
    }
  }
  let host: string;
  let portText: string | undefined;
  if (text.startsWith('[')) {
    const close = text.indexOf(']');
    if (close < 0) return { err: 'invalid host' };
    host = text.slice(1, close);
    const rest = text.slice(close + 1);
    if (rest !== '' && !rest.startsWith(':')) return { err: 'invalid host' };
    portText = rest === '' ? undefined : rest.slice(1);
    if (host === '') return { err: 'no host' };
    if (isIP(host) !== 6) return { err: 'invalid IPv6 address' };
  } else {
    if (/[/?]/.test(text)) return { err: 'invalid host' };
    const colon = text.indexOf(':');
    host = colon < 0 ? text : text.slice(0, colon);
    portText = colon < 0 ? undefined : text.slice(colon + 1);
  }
  let port: number | undefined;
  if (portText !== undefined) {
    port = /^\d+$/.test(portText) ? Number(portText) : NaN;
    if (!(port >= 1 && port <= 65535)) return { err: 'invalid port' };
  }
  if (host === '') return { err: 'no host' };
  if (isIP(host) === 0) return { missing: 'addresses' };
  if (port === undefined) return { missing: 'port' };
  return { address: { host, port } };
}

/** A server's `pass`: a fixed address, or a value with variables parsed for each session. */
export type PassTarget = { readonly address: PassAddress } | { readonly value: ValueSource };

/** `pass` of a stream server. */
export const streamPass = slot<PassTarget | undefined>('stream pass', undefined, false);

/**
 * The content handler a stream server's last `return`, `proxy_pass` or
 * `pass` set (`cscf->handler`: each of them sets it, the last one wins).
 */
export const streamContentHandler = slot<'return' | 'proxy' | 'pass' | undefined>('stream content handler', undefined, false);

/** The `pass` directive; `vars` is the stream module's variable registry of a configuration. */
export function streamPassDirectives(vars: (scope: ConfigScope) => VariableRegistry<StreamView>): DirectiveSpec[] {
  const set = (d: Directive, cx: SetContext): void => {
    if (cx.level.own(streamPass)) throw new DirectiveFailure('is duplicate');
    cx.level.set(streamContentHandler, 'pass', d.loc);
    const arg = d.args[0]!;
    if (arg.includes('$')) {
      cx.level.set(streamPass, { value: vars(cx.scope).value(arg, d.loc) }, d.loc);
      return;
    }
    const parsed = parsePassAddress(arg);
    if ('err' in parsed) fail(`${parsed.err} in "${arg}" of the "pass" directive`);
    if ('missing' in parsed) throw new DirectiveFailure(`has no ${parsed.missing}`);
    cx.level.set(streamPass, { address: parsed.address }, d.loc);
  };
  return [{ name: 'pass', module: 'ngx_stream_pass_module', contexts: ['stream_server'], args: ['TAKE1'], effect: 'runtime', set }];
}
