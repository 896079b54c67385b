/**
 * The tunnel of an upgraded connection (`ngx_http_upstream_upgrade` and
 * `ngx_http_upstream_process_upgraded` in `src/http/ngx_http_upstream.c`):
 * bytes flow both ways with backpressure; when either side ends, what it
 * sent is delivered and both connections close; when nothing moves either
 * way for `idleMs` (`proxy_read_timeout`), both close.
 */
import type { Duplex } from 'node:stream';

/** What the owner of a tunnel hears of it. */
export interface TunnelHooks {
  /** Bytes went from the upstream to the client. */
  toClient(bytes: number): void;
  /** Nothing moved for the idle time; both sides are closed next. */
  idle(): void;
  /** Both sides are closed. */
  closed(): void;
}

/** Joins `client` and `upstream` until either ends, fails, or both stay idle for `idleMs`. */
export function tunnel(client: Duplex, upstream: Duplex, idleMs: number, hooks: TunnelHooks): void {
  let done = false;
  const close = (): void => {
    if (done) return;
    done = true;
    clearTimeout(timer);
    client.destroy();
    upstream.destroy();
    hooks.closed();
  };
  const timer = setTimeout(() => {
    hooks.idle();
    close();
  }, idleMs);
  upstream.on('data', (chunk: Buffer) => {
    hooks.toClient(chunk.length);
    timer.refresh();
  });
  client.on('data', () => timer.refresh());
  for (const [from, to] of [[client, upstream], [upstream, client]] as const) {
    from.pipe(to);
    // pipe ends `to` when `from` ends; once that end is written, both close
    from.once('end', () => to.once('finish', close));
    from.once('error', close);
    from.once('close', close);
  }
}
