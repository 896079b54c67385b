/**
 * What setters share while one configuration is read: paths, the variable
 * registry, the http-level registries (upstream blocks, log formats) and
 * each module's own (`ScopeRegistry`). A new scope is made for every load,
 * so a failed reload leaves the running configuration untouched.
 */
import { readFileSync } from 'node:fs';
import { isAbsolute } from 'node:path';
import { cString } from '../c-string.js';
import type { SourceLoc } from '../parser/ast.js';
import { fail } from './failure.js';
import type { ValueSource, VariableRegistry } from './variables.js';

/** A shared memory zone (`ngx_shm_zone_t`): its size, the module it is for, and whether it has been defined. */
export interface SharedZone {
  size: number;
  /** The module that declared it (nginx's `tag`): a zone name serves one module only. */
  readonly tag: string;
  /** Set once the directive that owns the zone (`proxy_cache_path`, …) has defined it (nginx's `shm_zone->data`). */
  defined: boolean;
}

/** Addresses of host names, resolved before the configuration is checked. */
export interface HostTable {
  /** The addresses of a name, or undefined when it did not resolve. */
  lookup(host: string): readonly string[] | undefined;
}

/** An `upstream NAME { … }` block or an implicit group from a `proxy_pass` URL. */
export interface UpstreamDecl {
  readonly name: string;
  readonly loc: SourceLoc;
  /** Whether it came from an `upstream` block (versus a URL host). */
  readonly explicit: boolean;
  /** The block's level, for its `server`/`keepalive` directives. */
  readonly servers: UpstreamServerDecl[];
  /** Idle connections cached per peer: 32 by default since nginx 1.29.7, 0 disables. */
  keepalive: number;
  keepaliveSet: boolean;
  keepaliveTimeoutMs: number;
  /** `keepalive_time`: a connection older than this is closed after its request. */
  keepaliveTimeMs: number;
  keepaliveRequests: number;
  /** The load balancing method (`ip_hash`, `least_conn`, `hash`, `random`; round robin by default). */
  balancer: UpstreamBalancer;
  /** `hash KEY`: the key, a value with variables (undefined for another method). */
  hashKey: ValueSource | undefined;
  /** `zone NAME`: the peers' failure state is every worker's. */
  zone: string | undefined;
  /** `sticky` (http only); its `active` is cleared by a balancing method chosen after it. */
  sticky?: StickyDecl;
}

/**
 * An upstream block's `sticky cookie NAME …` or `sticky route $VAR …`
 * (`ngx_http_upstream_sticky_srv_conf_t`).
 */
export interface StickyDecl {
  /** The variables whose first non-empty value is the server ID asked for (`$cookie_NAME` for `cookie`). */
  readonly lookup: readonly ValueSource[];
  /** `cookie`: the cookie set to the chosen server's ID. */
  readonly cookie: StickyCookieDecl | undefined;
  /** `learn`: sessions learned from responses, in a shared zone. */
  readonly learn?: StickyLearnDecl;
  /** False once a balancing method follows `sticky` in the block (nginx then warns `load balancing method redefined`, and the method replaces sticky's). */
  active: boolean;
}

/** `sticky learn create=$VAR lookup=$VAR zone=NAME:SIZE [timeout=TIME] [header]`. */
export interface StickyLearnDecl {
  /** The variables whose first non-empty value, once the server answered, is the session to learn. */
  readonly create: readonly ValueSource[];
  readonly zone: string;
  readonly sizeBytes: number;
  /** How long a session unused is kept. */
  readonly timeoutMs: number;
  /** `header`: learned when the response header arrives, not when the request ends. */
  readonly afterHeader: boolean;
}

/** `sticky cookie NAME [expires=TIME] [domain=DOMAIN] [path=PATH] [httponly] [secure] [samesite=…]`. */
export interface StickyCookieDecl {
  readonly name: string;
  /** `expires=`: seconds, `STICKY_MAX_EXPIRES` for `max`; undefined: a session cookie. */
  readonly expiresSec: number | undefined;
  readonly domain: ValueSource | undefined;
  /** `path=`: the path, '' for none. */
  readonly path: string;
  readonly httponly: boolean;
  readonly secure: boolean;
  readonly samesite: ValueSource | undefined;
}

/**
 * How an upstream group picks a peer: nginx's round robin, `ip_hash`,
 * `least_conn`, `hash KEY` (`hash`), `hash KEY consistent` (`chash`),
 * `random` or `random two [least_conn]` (`random_two`).
 */
export type UpstreamBalancer = 'round_robin' | 'ip_hash' | 'least_conn' | 'hash' | 'chash' | 'random' | 'random_two';

/** One `server ADDRESS [weight=N] [max_conns=N] [max_fails=N] [fail_timeout=T] [backup] [down]` of an upstream block. */
export interface UpstreamServerDecl {
  /** The address as written (nginx's `us->name`, which consistent hashing hashes). */
  readonly address: string;
  /** Host (name or IP) as written, `unix:PATH` kept whole. */
  readonly host: string;
  /** The port; 0 for a unix domain socket. */
  readonly port: number;
  /** The socket file of a `unix:PATH` server. */
  readonly unixPath: string | undefined;
  readonly weight: number;
  /** `max_conns`: requests the peer takes at once at most; 0: no limit. */
  readonly maxConns: number;
  readonly maxFails: number;
  readonly failTimeoutMs: number;
  readonly backup: boolean;
  readonly down: boolean;
  /** `drain`: no new requests, but those `sticky` sends to it (http only). */
  readonly drain: boolean;
  /** `route=ROUTE`: the server's ID for `sticky` (else the MD5 of its address); http only. */
  readonly route: string | undefined;
  readonly loc: SourceLoc;
}

/** A `log_format NAME [escape=…] STRING…`. */
export interface LogFormatDecl {
  readonly name: string;
  readonly escape: 'default' | 'json' | 'none';
  readonly text: string;
  readonly loc: SourceLoc | undefined;
}

/**
 * A registry a module keeps in the scope (`map` blocks, `limit_req_zone`
 * zones …), typed by the module that declares it: made on first use, one per
 * configuration read, so the scope needs no module's types.
 */
export interface ScopeRegistry<T> {
  /** Makes the empty registry. */
  readonly make: () => T;
}

/** Declares a module's registry (`ConfigScope.registry`). */
export function scopeRegistry<T>(make: () => T): ScopeRegistry<T> {
  return { make };
}

/** Registries shared by every setter of one configuration. */
export class ConfigScope {
  /** Upstream groups by name (`upstream` blocks and implicit ones), in declaration order. */
  readonly upstreams = new Map<string, UpstreamDecl>();
  /** Log formats by name; `combined` is predefined. */
  readonly logFormats = new Map<string, LogFormatDecl>();
  /** Dynamic modules named by `load_module` (file name without directory and `.so`). */
  readonly loadedModules = new Set<string>();
  /**
   * Thread pools by name: defined by `thread_pool`, or named by `aio
   * threads=NAME` (`ngx_thread_pool_add`); a named one must be defined.
   */
  readonly threadPools = new Map<string, { defined: boolean; readonly loc: SourceLoc }>();
  /** Shared memory zones by name (`keys_zone=`, `ssl_session_cache shared:`, upstream `zone` …). */
  readonly sharedZones = new Map<string, SharedZone>();
  /** Blocks that may appear once (`events`, `http`), once seen. */
  readonly seenBlocks = new Set<string>();
  /** The modules' own registries (`scopeRegistry`), made on first use. */
  private readonly registries = new Map<ScopeRegistry<unknown>, unknown>();

  constructor(
    /** nginx's prefix (`-p`), ending with `/`: relative paths of most directives resolve against it. */
    readonly prefix: string,
    /** Directory of the main configuration file, ending with `/`: relative `include` paths resolve against it. */
    readonly confPrefix: string,
    readonly variables: VariableRegistry,
    readonly hosts: HostTable,
    /**
     * `--offline` (`jinx lint`, `-t`): names are not resolved (every name
     * stands for 192.0.2.1, TEST-NET-1), certificates, keys, CA lists,
     * CRLs, DH parameters and password files are not read, and `user`
     * accounts are not looked up.
     */
    readonly offline = false,
    /** Files directives read in the compile this one repeats (`ConfigSnapshot.directiveFiles`): taken from here, not read again. */
    private readonly readBefore: Readonly<Record<string, string>> = {},
  ) {}

  /** The files directives read (`readFile`), by absolute path: what a worker is to be given (`ConfigSnapshot.directiveFiles`). */
  readonly filesRead: Record<string, string> = {};

  /**
   * A file a directive reads at configuration time (`ssl_password_file`),
   * as latin1 text: what the compile this one repeats read, else read now;
   * kept in `filesRead` either way.
   * @throws the error of `readFileSync`
   */
  readFile(path: string): string {
    const text = this.readBefore[path] ?? readFileSync(path, 'latin1');
    this.filesRead[path] = text;
    return text;
  }

  /** A module's registry, made empty on first use. */
  registry<T>(r: ScopeRegistry<T>): T {
    if (!this.registries.has(r)) this.registries.set(r, r.make());
    return this.registries.get(r) as T;
  }

  /**
   * Resolves a path against the prefix, as `ngx_conf_full_name(cycle, name, 0)`;
   * the path ends at a NUL byte, as the C calls nginx hands it to see it (`cString`).
   */
  fullPath(path: string): string {
    return cString(isAbsolute(path) ? path : this.prefix + path);
  }

  /** Resolves a path against the configuration directory, as `ngx_conf_full_name(cycle, name, 1)`; ends at a NUL byte. */
  confPath(path: string): string {
    return cString(isAbsolute(path) ? path : this.confPrefix + path);
  }

  /**
   * Declares or references a shared memory zone, as `ngx_shared_memory_add`
   * (`src/core/ngx_cycle.c`): size 0 references a zone defined elsewhere.
   * @throws DirectiveFailure when the name is taken by another module or the sizes differ.
   */
  sharedZone(name: string, size: number, tag: string): SharedZone {
    const zone = this.sharedZones.get(name);
    if (!zone) {
      const made = { size, tag, defined: false };
      this.sharedZones.set(name, made);
      return made;
    }
    if (zone.tag !== tag) fail(`the shared memory zone "${name}" is already declared for a different use`);
    if (zone.size === 0) zone.size = size;
    if (size !== 0 && size !== zone.size) {
      fail(`the size ${size} of shared memory zone "${name}" conflicts with already declared size ${zone.size}`);
    }
    return zone;
  }
}
