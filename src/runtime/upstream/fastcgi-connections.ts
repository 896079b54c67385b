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

interface Idle extends FastcgiConnection {
  readonly peer: string;
  readonly timer: NodeJS.Timeout;
  readonly drop: () => void;
}

export class FastcgiConnections {
  /** Idle connections of each group, most recently kept first. */
  private readonly idle = new Map<UpstreamGroup, Idle[]>();

  /** Takes an idle connection to `peer` (`IP:port`) of `group`, if one is kept. */
  take(group: UpstreamGroup, peer: string): FastcgiConnection | undefined {
    const list = this.idle.get(group);
    const i = list?.findIndex((c) => c.peer === peer) ?? -1;
    if (i === -1) return undefined;
    const [c] = list!.splice(i, 1);
    this.release(c!);
    return { socket: c!.socket, requests: c!.requests, openedAtMs: c!.openedAtMs };
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
    const drop = (): void => {
      const at = list.indexOf(idle);
      if (at !== -1) this.close(list, at);
    };
    const idle: Idle = { ...conn, peer, timer: setTimeout(drop, group.keepaliveTimeoutMs), drop };
    idle.timer.unref();
    socket.setTimeout(0);
    socket.on('data', drop).on('end', drop).on('close', drop).on('error', drop);
    socket.resume();
    list.unshift(idle);
  }

  private release(c: Idle): void {
    clearTimeout(c.timer);
    c.socket.off('data', c.drop).off('end', c.drop).off('close', c.drop).off('error', c.drop);
  }

  private close(list: Idle[], at: number): void {
    const [c] = list.splice(at, 1);
    this.release(c!);
    c!.socket.destroy();
  }

  /** Closes every idle connection (shutdown, or the configuration was replaced). */
  closeAll(): void {
    for (const list of this.idle.values()) while (list.length > 0) this.close(list, 0);
    this.idle.clear();
  }
}
