/**
 * Idle FastCGI connections kept for later requests: `fastcgi_keep_conn on`
 * in a location whose `upstream` block keeps connections (`keepalive N`,
 * nginx 1.30's default of 32 for an `upstream` block;
 * `ngx_http_upstream_keepalive_module.c`). A block keeps at most N idle
 * connections over all its servers, the most recently kept taken first and
 * the least recently kept closed to make room; an idle connection is closed
 * after the block's `keepalive_timeout`, and when its server closes it or
 * sends anything. A connection is not kept after `keepalive_requests`
 * requests, nor once it has been open longer than `keepalive_time`.
 */
import type { Socket } from 'node:net';
import type { UpstreamGroup } from '../../config/route-table.js';

/** A connection with the number of requests it has carried, and when it was opened (ms since the epoch). */
export interface FastcgiConnection {
  readonly socket: Socket;
  readonly requests: number;
  readonly openedAtMs: number;
}

/**
 * A connection kept between requests: one for the socket's life, made when
 * it is first kept, with its listeners and `keepalive_timeout` timer (armed
 * again at each keep; one that fires while the connection serves a request
 * does nothing), so that keeping it again allocates nothing.
 */
class Kept implements FastcgiConnection {
  requests = 0;
  /** In its group's idle list (not serving a request). */
  idle = false;
  timer: NodeJS.Timeout | undefined;

  constructor(
    readonly socket: Socket,
    readonly openedAtMs: number,
    readonly peer: string,
    private readonly pool: FastcgiConnections,
    readonly group: UpstreamGroup,
  ) {}

  /** Closes the connection if idle: its server closed it or sent something, or it idled for `keepalive_timeout`. */
  readonly drop = (): void => {
    if (this.idle) this.pool.drop(this);
  };
}

const kept = new WeakMap<Socket, Kept>();

export class FastcgiConnections {
  /** Idle connections of each group, most recently kept first. */
  private readonly idle = new Map<UpstreamGroup, Kept[]>();

  /** Takes an idle connection to `peer` (`IP:port`) of `group`, if one is kept. */
  take(group: UpstreamGroup, peer: string): FastcgiConnection | undefined {
    const list = this.idle.get(group);
    if (list === undefined) return undefined;
    for (let i = 0; i < list.length; i++) {
      const c = list[i]!;
      if (c.peer !== peer) continue;
      list.splice(i, 1);
      c.idle = false;
      return c;
    }
    return undefined;
  }

  /** Keeps `conn` to `peer` idle for the next request, or closes it when `group` keeps no more. */
  keep(group: UpstreamGroup, peer: string, conn: FastcgiConnection): void {
    const { socket } = conn;
    if (group.keepalive <= 0 || conn.requests >= group.keepaliveRequests || Date.now() - conn.openedAtMs > group.keepaliveTimeMs || socket.destroyed) {
      socket.destroy();
      return;
    }
    let list = this.idle.get(group);
    if (!list) this.idle.set(group, (list = []));
    if (list.length >= group.keepalive) this.close(list, list.length - 1);
    let c = kept.get(socket);
    if (c === undefined || c.group !== group || c.peer !== peer) {
      c = new Kept(socket, conn.openedAtMs, peer, this, group);
      kept.set(socket, c);
      socket.on('data', c.drop).on('end', c.drop).on('close', c.drop).on('error', c.drop);
    }
    c.requests = conn.requests;
    c.idle = true;
    if (c.timer === undefined) c.timer = setTimeout(c.drop, group.keepaliveTimeoutMs).unref();
    else c.timer.refresh();
    socket.setTimeout(0);
    socket.resume();
    list.unshift(c);
  }

  /** Closes `c`, idle in its group's list. */
  drop(c: Kept): void {
    const list = this.idle.get(c.group);
    const at = list?.indexOf(c) ?? -1;
    if (at !== -1) this.close(list!, at);
  }

  private close(list: Kept[], at: number): void {
    const [c] = list.splice(at, 1);
    c!.idle = false;
    clearTimeout(c!.timer);
    c!.socket.destroy();
  }

  /** Closes every idle connection (shutdown, or the configuration was replaced). */
  closeAll(): void {
    for (const list of this.idle.values()) while (list.length > 0) this.close(list, 0);
    this.idle.clear();
  }
}
