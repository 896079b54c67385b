/**
 * What setters share while one configuration is read: paths, the variable
 * registry and the http-level registries (upstream blocks, log formats). A
 * new scope is made for every load, so a failed reload leaves the running
 * configuration untouched.
 */
import { isAbsolute } from 'node:path';
import type { SourceLoc } from '../parser/ast.js';
import type { MapDef } from './modules/map.js';
import type { VariableRegistry } from './variables.js';

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
  keepaliveRequests: number;
}

/** One `server ADDRESS [weight=N] [max_fails=N] [fail_timeout=T] [backup] [down]` of an upstream block. */
export interface UpstreamServerDecl {
  /** Host (name or IP) and port as written, `unix:` paths kept whole. */
  readonly host: string;
  readonly port: number;
  readonly weight: number;
  readonly maxFails: number;
  readonly failTimeoutMs: number;
  readonly backup: boolean;
  readonly down: boolean;
  readonly loc: SourceLoc;
}

/** A `log_format NAME [escape=…] STRING…`. */
export interface LogFormatDecl {
  readonly name: string;
  readonly escape: 'default' | 'json' | 'none';
  readonly text: string;
  readonly loc: SourceLoc | undefined;
}

/** Registries shared by every setter of one configuration. */
export class ConfigScope {
  /** Upstream groups by name (`upstream` blocks and implicit ones), in declaration order. */
  readonly upstreams = new Map<string, UpstreamDecl>();
  /** Log formats by name; `combined` is predefined. */
  readonly logFormats = new Map<string, LogFormatDecl>();
  /** Dynamic modules named by `load_module` (file name without directory and `.so`). */
  readonly loadedModules = new Set<string>();
  /** Every `map` block, bound once all variables are declared. */
  readonly maps: MapDef[] = [];
  /** Blocks that may appear once (`events`, `http`), once seen. */
  readonly seenBlocks = new Set<string>();

  constructor(
    /** nginx's prefix (`-p`), ending with `/`: relative paths of most directives resolve against it. */
    readonly prefix: string,
    /** Directory of the main configuration file, ending with `/`: relative `include` paths resolve against it. */
    readonly confPrefix: string,
    readonly variables: VariableRegistry,
    readonly hosts: HostTable,
  ) {}

  /** Resolves a path against the prefix, as `ngx_conf_full_name(cycle, name, 0)`. */
  fullPath(path: string): string {
    return isAbsolute(path) ? path : this.prefix + path;
  }

  /** Resolves a path against the configuration directory, as `ngx_conf_full_name(cycle, name, 1)`. */
  confPath(path: string): string {
    return isAbsolute(path) ? path : this.confPrefix + path;
  }
}
