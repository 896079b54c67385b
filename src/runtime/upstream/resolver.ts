/**
 * Run-time name resolution for `proxy_pass` with variables, through the
 * servers of the `resolver` directive (nginx's own resolver,
 * `src/core/ngx_resolver.c`), with Node's `dns.Resolver` and a cache that
 * honours `valid=` or the answer's TTL.
 */
import { Resolver } from 'node:dns/promises';
import type { ResolverDef } from '../../config/modules/http-core.js';

/** A failed lookup, worded as `ngx_resolver_strerror`: `(3: Host not found)`. */
export class ResolveError extends Error {
  constructor(
    readonly host: string,
    readonly rcode: number,
    readonly reason: string,
  ) {
    super(`${host} could not be resolved (${rcode}: ${reason})`);
  }
}

/** DNS failure codes of Node mapped to nginx's resolver codes and texts. */
const NODE_CODES: Readonly<Record<string, readonly [number, string]>> = {
  ENOTFOUND: [3, 'Host not found'],
  ENODATA: [3, 'Host not found'],
  EFORMERR: [1, 'Format error'],
  ESERVFAIL: [2, 'Server failure'],
  ENOTIMP: [4, 'Unimplemented'],
  EREFUSED: [5, 'Operation refused'],
  ETIMEOUT: [110, 'Operation timed out'],
};

interface CacheEntry {
  readonly addrs: readonly string[] | ResolveError;
  readonly expiresAtMs: number;
}

/** Resolvers per `resolver` configuration, with a shared answer cache. */
export class NameResolver {
  private readonly resolvers = new Map<ResolverDef, Resolver>();
  private readonly cache = new Map<string, CacheEntry>();

  private resolverFor(def: ResolverDef, timeoutMs: number): Resolver {
    let r = this.resolvers.get(def);
    if (!r) {
      r = new Resolver({ timeout: timeoutMs, tries: 1 });
      r.setServers([...def.servers]);
      this.resolvers.set(def, r);
    }
    return r;
  }

  /**
   * Addresses of `name` (IPv4, plus IPv6 unless `ipv6=off`).
   * @throws ResolveError with nginx's code and text
   */
  async resolve(name: string, def: ResolverDef, timeoutMs: number): Promise<readonly string[]> {
    const key = `${def.servers.join(',')}|${name.toLowerCase()}`;
    const hit = this.cache.get(key);
    if (hit && hit.expiresAtMs > Date.now()) {
      if (hit.addrs instanceof ResolveError) throw hit.addrs;
      return hit.addrs;
    }
    const resolver = this.resolverFor(def, timeoutMs);
    const validMs = def.validSec === undefined ? undefined : def.validSec * 1000;
    try {
      const v4 = def.ipv4 ? await resolver.resolve4(name, { ttl: true }).catch(softEmpty) : [];
      const v6 = def.ipv6 ? await resolver.resolve6(name, { ttl: true }).catch(softEmpty) : [];
      const all = [...v4, ...v6];
      if (all.length === 0) throw Object.assign(new Error('no addresses'), { code: 'ENOTFOUND' });
      const ttlMs = Math.min(...all.map((a) => a.ttl * 1000));
      this.cache.set(key, { addrs: all.map((a) => a.address), expiresAtMs: Date.now() + (validMs ?? ttlMs) });
      return all.map((a) => a.address);
    } catch (err) {
      const [rcode, reason] = NODE_CODES[(err as NodeJS.ErrnoException).code ?? ''] ?? [2, 'Server failure'];
      const failure = new ResolveError(name, rcode, reason);
      if (rcode !== 110) this.cache.set(key, { addrs: failure, expiresAtMs: Date.now() + (validMs ?? 30_000) });
      throw failure;
    }
  }
}

/** An empty answer for a name that exists but has no records of one family. */
function softEmpty(err: NodeJS.ErrnoException): { address: string; ttl: number }[] {
  if (err.code === 'ENODATA') return [];
  throw err;
}
