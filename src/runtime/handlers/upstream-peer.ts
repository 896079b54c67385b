/**
 * Choosing the upstream peer for a request, shared by `proxy_pass` and
 * `fastcgi_pass` (`ngx_http_upstream_init_request` in `ngx_http_upstream.c`):
 * a configured group (an `upstream` block or a name resolved at start) picks
 * by round robin; an address computed from variables is used as is when it
 * is an IP, names an `upstream` block, or is resolved at request time through
 * `resolver` (`no resolver defined to resolve NAME`, `NAME could not be
 * resolved (3: Host not found)`: 502).
 */
import { isIP } from 'node:net';
import type { UpstreamGroup, UpstreamPeer } from '../../config/route-table.js';
import { logRequest } from '../context.js';
import type { Exchange } from '../exchange.js';
import { finalize } from '../phases.js';
import { ResolveError } from '../upstream/resolver.js';

/** The peer to connect to, and how the connection may be kept. */
export interface ChosenPeer {
  readonly host: string;
  readonly port: number;
  /** `IP:port` as nginx prints it. */
  readonly name: string;
  readonly keepalive: boolean;
  readonly keepaliveTimeoutMs: number;
}

/** `IP:port`, with brackets for IPv6. */
export function peerName(host: string, port: number): string {
  return isIP(host) === 6 ? `[${host}]:${port}` : `${host}:${port}`;
}

/** The `ChosenPeer` of each configured peer, made once (a peer belongs to one group). */
const configured = new WeakMap<UpstreamPeer, ChosenPeer>();

/** Picks the next usable peer of a group by round robin, or undefined when none is usable. */
export function pickPeer(ex: Exchange, group: UpstreamGroup): ChosenPeer | undefined {
  const peer = ex.cx.upstreams.pick(group);
  if (!peer) return undefined;
  let chosen = configured.get(peer);
  if (!chosen) {
    chosen = { host: peer.host, port: peer.port, name: peer.name, keepalive: group.keepalive > 0, keepaliveTimeoutMs: group.keepaliveTimeoutMs };
    configured.set(peer, chosen);
  }
  return chosen;
}

/** Answers 502 after nginx's `no live upstreams while connecting to upstream`. */
export function noLiveUpstreams(ex: Exchange): Promise<void> {
  ex.r.action = 'connecting to upstream';
  logRequest(ex.cx, ex.r, 'error', 'no live upstreams');
  return finalize(ex, 502);
}

/** Picks a peer of a group; logs `no live upstreams` and answers 502 when none is usable. */
export async function groupPeer(ex: Exchange, group: UpstreamGroup): Promise<ChosenPeer | undefined> {
  const chosen = pickPeer(ex, group);
  if (!chosen) await noLiveUpstreams(ex);
  return chosen;
}

/**
 * The peer for a host and port computed at request time; answers the request
 * (502) and returns undefined when the name cannot be resolved.
 */
export async function dynamicPeer(ex: Exchange, hostText: string, port: number | undefined, defaultPort: number): Promise<ChosenPeer | undefined> {
  const { r, cx } = ex;
  const host = hostText.replace(/^\[|\]$/g, '');
  const effectivePort = port ?? defaultPort;
  if (isIP(host)) return { host, port: effectivePort, name: peerName(host, effectivePort), keepalive: false, keepaliveTimeoutMs: 60_000 };
  const group = cx.table.upstreams.get(hostText.toLowerCase());
  if (group && port === undefined) return groupPeer(ex, group);
  const resolverConf = r.loc.resolver;
  if (!resolverConf) {
    logRequest(cx, r, 'error', `no resolver defined to resolve ${hostText}`);
    await finalize(ex, 502);
    return undefined;
  }
  try {
    const addrs = await cx.resolver.resolve(hostText, resolverConf, r.loc.resolverTimeoutMs);
    const addr = addrs[0]!;
    return { host: addr, port: effectivePort, name: peerName(addr, effectivePort), keepalive: false, keepaliveTimeoutMs: 60_000 };
  } catch (err) {
    logRequest(cx, r, 'error', err instanceof ResolveError ? err.message : `${hostText} could not be resolved`);
    await finalize(ex, 502);
    return undefined;
  }
}
