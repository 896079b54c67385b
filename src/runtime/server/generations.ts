/**
 * Configuration generations: each compiled configuration in service with
 * its open logs, TLS contexts and upstream clients. A reload prepares a new
 * generation off to the side and swaps it in; a connection is served by the
 * generation it was accepted in, as by the nginx worker that accepted it,
 * and the old generation's logs and clients close a minute after the swap.
 */
import type { CompiledConfig } from '../../config/compile.js';
import type { ListenGroup, RouteTable } from '../../config/route-table.js';
import { AccessLogFiles } from '../../log/access-log.js';
import type { ErrorLogFiles } from '../../log/error-log.js';
import type { LogLevel } from '../../log/levels.js';
import type { CacheZones } from '../cache/zone.js';
import type { ConnectionNumbers } from '../connection-numbers.js';
import type { RuntimeContext } from '../context.js';
import type { LimitConnStore } from '../limit-conn-zones.js';
import type { LimitReqStore } from '../limit-req-zones.js';
import type { SessionStore } from '../session-cache.js';
import { listenKey, TlsContexts } from '../listen.js';
import { prepareFiles } from '../prepare-files.js';
import type { ProcessStatus } from '../stub-status.js';
import type { TempFiles } from '../temp-files.js';
import { UpstreamClients } from '../upstream/clients.js';
import type { PeerEvent } from '../upstream/round-robin.js';
import { FastcgiConnections } from '../upstream/fastcgi-connections.js';
import { NameResolver } from '../upstream/resolver.js';

/** One configuration in service. */
export interface Generation {
  readonly table: RouteTable;
  readonly cx: RuntimeContext;
  readonly tls: TlsContexts;
  /** The listen groups by `listenKey`. */
  readonly groups: ReadonlyMap<string, ListenGroup>;
}

/** What the generations share, kept across reloads. */
export interface Lasting {
  readonly tempFiles: TempFiles;
  /** Numbers of client and upstream connections. */
  readonly numbers: ConnectionNumbers;
  /** The `limit_req_zone` states (the process's own, or the master's for a worker). */
  readonly limitReq: LimitReqStore;
  /** The `limit_conn_zone` states (the process's own, or the master's for a worker). */
  readonly limitConn: LimitConnStore;
  readonly cache: CacheZones;
  /** The stub_status counters and tallies. */
  readonly status: ProcessStatus;
  /** Whether an upstream connection may be opened within `worker_connections` (`ClientConnections.admitUpstream`). */
  admitUpstream(): boolean;
  /** The session ticket keys a worker's master gave it (`TlsContexts`). */
  readonly ticketKeys?: Buffer;
  /** Where a worker tells the others of failures of peers in upstream groups with `zone` (`RoundRobin`). */
  readonly sharePeerEvent?: (event: PeerEvent) => void;
  /** The sessions of shared zones (`ssl_session_cache shared:`, `sticky learn`): the process's own, or the master's for a worker. */
  readonly sessions: SessionStore;
}

/**
 * Opens the logs and reads the certificates of a compiled configuration
 * (its error logs into `errorLog`), and starts its cache loader.
 * @throws Error when a file cannot be opened
 */
export function prepareGeneration(compiled: CompiledConfig, errorLog: ErrorLogFiles, lasting: Lasting): Generation {
  const table = compiled.table;
  prepareFiles(table);
  errorLog.open(table.errorLogTargets);
  const accessLog = new AccessLogFiles();
  accessLog.open(table.accessLogTargets);
  if (table.stream) accessLog.open(table.stream.accessLogs);
  const tls = new TlsContexts(table, lasting.ticketKeys);
  const upstreams = new UpstreamClients(lasting.numbers, () => lasting.admitUpstream(), table.main.workerConnections, lasting.sharePeerEvent);
  // nginx's resolver writes to the main error log (`cycle->new_log`)
  const resolver = new NameResolver((level, message) => errorLog.write(table.main.errorLogs, level, message));
  // the cache loader starts with the configuration, as nginx's does
  lasting.cache.start(table.cacheZones);
  const cx: RuntimeContext = {
    table, errorLog, accessLog, upstreams, fastcgi: new FastcgiConnections(), resolver, tempFiles: lasting.tempFiles, limitReq: lasting.limitReq, cache: lasting.cache,
    status: lasting.status, limitConn: lasting.limitConn, sessions: lasting.sessions,
  };
  return { table, cx, tls, groups: new Map(table.listens.map((g) => [listenKey(g), g])) };
}

/** Closes what a generation opened besides its upstream clients: FastCGI connections, resolver, logs. */
function closeAfterUpstreams(cx: RuntimeContext): void {
  cx.fastcgi.closeAll();
  cx.resolver.close();
  cx.accessLog.close();
  cx.errorLog.close();
}

/** The generation in service, and whether the server is stopping. */
export class Generations {
  private stopping = false;

  constructor(private generation: Generation) {}

  /** The generation new connections are accepted in. */
  get current(): Generation {
    return this.generation;
  }

  /**
   * Whether connections of `gen` are to end (an exiting nginx worker's
   * `ngx_exiting`): the server is stopping, or a reload replaced `gen`.
   */
  exiting(gen: Generation): boolean {
    return this.stopping || gen !== this.generation;
  }

  /** Writes a line without connection context to the main `error_log` of the generation in service. */
  log(level: LogLevel, message: string): void {
    this.generation.cx.errorLog.write(this.generation.table.main.errorLogs, level, message);
  }

  /** Puts `next` in service and returns the generation it replaced. */
  swap(next: Generation): Generation {
    const old = this.generation;
    this.generation = next;
    return old;
  }

  /** Closes a replaced generation a minute from now (its connections may still use it until then). */
  retire(old: Generation): void {
    setTimeout(() => {
      void old.cx.upstreams.close();
      closeAfterUpstreams(old.cx);
    }, 60_000).unref();
  }

  /** From now on every connection is exiting (graceful or fast stop). */
  stop(): void {
    this.stopping = true;
  }

  /** Closes the generation in service (the server has stopped). */
  async finish(): Promise<void> {
    const { cx } = this.generation;
    await cx.upstreams.close();
    closeAfterUpstreams(cx);
  }
}
