/**
 * Connections to one upstream peer, and the idle connections an `upstream`
 * block keeps (`ngx_http_upstream_keepalive_module.c`). undici speaks HTTP
 * on each connection: one undici `Client` per connection, carrying one
 * request at a time. A request takes the peer's most recently kept idle
 * connection, or opens a new one (no queue: as in nginx, busy connections
 * are not limited in number, only idle ones are). When the response has
 * been read whole on a connection that may be kept, the connection goes to
 * its group's cache, most recently kept first; a cache that holds `keepalive
 * N` connections closes its least recently kept one to make room
 * (`ngx_http_upstream_free_keepalive_peer`). Every other end of a request
 * (an upstream failure, a client that went away, an intercepted or
 * abandoned response, an upgrade) closes the connection at once, as nginx
 * closes a connection it does not keep. A kept connection is closed when
 * its server closes it, and after `keepalive_timeout` idle (undici's
 * `keepAliveTimeout`).
 *
 * `proxy_read_timeout` (a request's `headersTimeout` and `bodyTimeout`) is
 * watched here, not by undici: undici keeps a timeout of a second or more
 * in its own list of timers, swept every half second, so each request's
 * timer outlived the request by up to 500 ms, survived two scavenges and
 * was promoted to V8's old generation (about 90 of the 142 bytes a 100 B
 * proxied request promoted, `bench/proxy.ts --gc`), filling it until the next
 * mark-compact. Here it is one node timer per request, armed as nginx arms
 * its read timer (`ngx_http_upstream_send_request`: once the request is
 * sent, or when the response starts first), put off by every read, held
 * while the response is paused (`ngx_event_pipe` reads nothing then), and
 * cleared when the request ends.
 */
import type { Dispatcher } from 'undici';
import Client from 'undici/lib/dispatcher/client.js';
import undiciErrors from 'undici/lib/core/errors.js';
import undiciSymbols from 'undici/lib/core/symbols.js';
import { turnNowMs } from '../turn-clock.js';
import { deliveredReadBuffer } from './read-buffers.js';

/** undici's figures of one connection, read without `client.stats` (which makes an object of them at each read). */
interface ClientFigures {
  readonly [undiciSymbols.kConnected]: boolean;
  readonly [undiciSymbols.kSize]: number;
}

/** The connection is open (undici's `client.stats.connected`). */
function isConnected(client: Client): boolean {
  return (client as unknown as ClientFigures)[undiciSymbols.kConnected];
}

/** Whose idle connections a cache holds: the connections to one peer with one set of settings, which closes one evicted. */
export interface ConnectionOwner<C> {
  discard(connection: C): void;
}

/**
 * One group's cache of idle connections (nginx's `kp->cache` queue, per
 * worker and `upstream` block): at most `max`, most recently kept first.
 * A group's HTTP/1.1 connections (undici `Client`s of `PeerConnections`)
 * and HTTP/2 ones (`H2PeerConnections`, `grpc_pass`) share its room.
 */
export class IdleConnections {
  /** Idle connections and whose they are, most recently kept first. */
  private readonly idle: { readonly connection: unknown; readonly owner: ConnectionOwner<never> }[] = [];

  /** @param max `keepalive N`: idle connections kept at most (> 0) */
  constructor(private readonly max: number) {}

  /** Idle connections kept right now. */
  get size(): number {
    return this.idle.length;
  }

  /** Takes the most recently kept idle connection of `owner` (`ngx_http_upstream_get_keepalive_peer`), if there is one. */
  take<C>(owner: ConnectionOwner<C>): C | undefined {
    const at = this.idle.findIndex((e) => e.owner === owner);
    if (at === -1) return undefined;
    return this.idle.splice(at, 1)[0]!.connection as C;
  }

  /** Keeps `connection` idle, closing the least recently kept connection when `max` are kept already. */
  put<C>(owner: ConnectionOwner<C>, connection: C): void {
    if (this.idle.length >= this.max) {
      const oldest = this.idle.pop()!;
      (oldest.owner as ConnectionOwner<unknown>).discard(oldest.connection);
    }
    this.idle.unshift({ connection, owner: owner as ConnectionOwner<never> });
  }

  /** Forgets `connection` (it closed while idle); whether it was kept here. */
  remove(connection: unknown): boolean {
    const at = this.idle.findIndex((e) => e.connection === connection);
    if (at === -1) return false;
    this.idle.splice(at, 1);
    return true;
  }
}

/** How a request ended on its connection. */
type Outcome = 'complete' | 'failed' | 'upgraded';

/** What `PeerConnections` needs to open and count connections. */
export interface PeerConnectionOptions {
  /** The peer's origin (`http://IP:port`, `https://…`, `http://localhost` for a unix socket). */
  readonly origin: string;
  /** undici's `Client` options of every connection (connector, header size, keepalive timeouts …). */
  readonly client: Client.Options;
  /** The group's idle connections; undefined when nothing is kept (no `keepalive`, or an address from variables). */
  readonly cache: IdleConnections | undefined;
  /** Called on every connection opened, and every attempt that failed (for connection numbers). */
  readonly onConnectAttempt: (err: Error | undefined) => void;
}

/** A request in flight on one of the peer's connections. */
export interface UpstreamRequest {
  /**
   * Ends the request with `err` (its handler's `onError` gets `err`) and
   * closes its connection, whether the request is being sent, is waiting
   * for its connection to open, or is being answered.
   */
  cancel(err: Error): void;
}

/** The connections to one peer with one set of connection settings. */
export class PeerConnections implements ConnectionOwner<Client> {
  /** Every connection, busy or idle. */
  private readonly clients = new Set<Client>();
  private closing = false;

  constructor(private readonly options: PeerConnectionOptions) {}

  /** Connections open right now (busy and idle), for `worker_connections`. */
  get connected(): number {
    let n = 0;
    for (const client of this.clients) n += isConnected(client) ? 1 : 0;
    return n;
  }

  /**
   * Sends a request on an idle connection of the peer, or on a new one;
   * `handler` is undici's dispatch handler of the request. The options'
   * `headersTimeout` and `bodyTimeout` (ms, 0 or absent: none) are the
   * request's read timeouts, watched by its `TrackedHandler`: the handler
   * gets undici's `HeadersTimeoutError` or `BodyTimeoutError` when one runs
   * out, and the connection closes.
   */
  dispatch(opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): UpstreamRequest {
    const client = this.idleClient() ?? this.open();
    const tracked = new TrackedHandler(handler, (outcome) => this.settle(client, outcome), opts.headersTimeout ?? 0, opts.bodyTimeout ?? 0);
    client.dispatch({ ...opts, headersTimeout: 0, bodyTimeout: 0 }, tracked);
    return {
      cancel: (err) => {
        if (tracked.abort) tracked.abort(err);
        // not yet on a connection: the client fails its queued request with `err`
        else if (!tracked.ended) void client.destroy(err).catch(() => undefined);
      },
    };
  }

  /** Closes every connection: idle ones at once, busy ones after their request (reload, shutdown). */
  async close(): Promise<void> {
    this.closing = true;
    await Promise.allSettled([...this.clients].map((client) => {
      this.options.cache?.remove(client);
      return client.close();
    }));
  }

  /** Closes `client` at once (evicted from the cache, or not to be kept). */
  discard(client: Client): void {
    this.clients.delete(client);
    void client.destroy().catch(() => undefined);
  }

  /** The most recently kept idle connection that is still open. */
  private idleClient(): Client | undefined {
    const { cache } = this.options;
    for (let client = cache?.take<Client>(this); client; client = cache!.take<Client>(this)) {
      if (isConnected(client) && !client.closed && !client.destroyed) return client;
      this.discard(client);
    }
    return undefined;
  }

  private open(): Client {
    const client = new Client(this.options.origin, this.options.client);
    this.clients.add(client);
    client.on('connect', () => this.options.onConnectAttempt(undefined));
    client.on('connectionError', (_origin, _targets, err) => this.options.onConnectAttempt(err));
    // a kept connection closed by its server, or by keepalive_timeout
    client.on('disconnect', () => {
      if (this.options.cache?.remove(client)) this.discard(client);
    });
    return client;
  }

  /**
   * Once undici is done with the request's response: a connection that
   * carried a whole response and may be kept goes to the cache, any other
   * is closed. A complete response is settled in a microtask, when undici's
   * `onMessageComplete`, which calls the handler's `onComplete`, has
   * returned (having closed the socket of a response that ends its
   * connection, or counted the request done): the connection is cached
   * before anything else runs, as `ngx_http_upstream_free_keepalive_peer`
   * caches it, so a client's next request, read from the same buffer,
   * takes it rather than opening another (undici waits a turn before it
   * sends on a kept socket itself; a request dispatched to it sooner is
   * written at once). A failed or upgraded request's connection is closed
   * on the next turn, outside undici's handling of it.
   */
  private settle(client: Client, outcome: Outcome): void {
    if (outcome !== 'complete') {
      setImmediate(() => this.discard(client));
      return;
    }
    queueMicrotask(() => {
      const { cache } = this.options;
      const reusable = cache !== undefined && !this.closing && !client.closed && !client.destroyed
        && isConnected(client) && (client as unknown as ClientFigures)[undiciSymbols.kSize] === 0;
      if (reusable) cache.put(this, client);
      else this.discard(client);
    });
  }
}

/**
 * A request's dispatch handler as undici calls it, telling its connection
 * how the request ended, keeping undici's abort of it, and watching its
 * read timeouts (see the module's comment).
 */
class TrackedHandler implements Dispatcher.DispatchHandler {
  /** undici's abort of the request, once it is on a connection. */
  abort: ((err?: Error) => void) | undefined;
  /** The request ended (completed, failed or upgraded). */
  ended = false;
  /** The final (non-1xx) response header arrived: reads are of the body. */
  private responded = false;
  /** The read timer, armed while a read is awaited. */
  private timer: NodeJS.Timeout | undefined;
  /** When the awaited read began to be awaited (the last read, or the arming): turn-clock ms. */
  private awaitedSinceMs = 0;
  /** undici's resumption of a response the handler paused (`onData` returned false). */
  private resumeRead: (() => void) | undefined;

  constructor(
    private readonly inner: Dispatcher.DispatchHandler,
    private readonly done: (outcome: Outcome) => void,
    private readonly headersTimeoutMs: number,
    private readonly bodyTimeoutMs: number,
  ) {}

  private end(outcome: Outcome): void {
    if (this.ended) return;
    this.ended = true;
    this.abort = undefined;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.done(outcome);
  }

  /** The timeout of the current phase (ms, 0: none). */
  private get timeoutMs(): number {
    return this.responded ? this.bodyTimeoutMs : this.headersTimeoutMs;
  }

  /**
   * A read is awaited from now: the timer is armed, or, when it is armed
   * already, told the time (it checks it when it fires, cheaper than
   * moving a node timer at every read).
   */
  private awaitRead(): void {
    if (this.ended) return;
    this.awaitedSinceMs = turnNowMs();
    if (this.timer) return;
    const ms = this.timeoutMs;
    if (ms > 0) this.timer = setTimeout(this.timedOut, ms).unref();
  }

  /** The timer fired: a read came since it was armed (it waits for what is left), or the request fails as undici's own timers fail it. */
  private readonly timedOut = (): void => {
    const leftMs = this.awaitedSinceMs + this.timeoutMs - turnNowMs();
    if (leftMs >= 1) {
      this.timer = setTimeout(this.timedOut, leftMs).unref();
      return;
    }
    this.timer = undefined;
    this.abort?.(this.responded ? new undiciErrors.BodyTimeoutError() : new undiciErrors.HeadersTimeoutError());
  };

  /** The handler's `resume` given to undici's: reading, and its timer, go on. */
  private readonly resumed = (): void => {
    this.awaitRead();
    this.resumeRead?.();
  };

  onConnect(abort: (err?: Error) => void): void {
    this.abort = abort;
    this.inner.onConnect?.(abort);
  }

  /** undici's call once the whole request is written (a legacy handler's hook its types leave out). */
  onRequestSent(): void {
    if (!this.responded) this.awaitRead();
  }

  onHeaders(statusCode: number, headers: Buffer[], resume: () => void, statusText: string): boolean {
    if (statusCode >= 200 && !this.responded) {
      this.responded = true;
      if (this.bodyTimeoutMs !== this.headersTimeoutMs) {
        clearTimeout(this.timer);
        this.timer = undefined;
      }
    }
    this.resumeRead = resume;
    const go = this.inner.onHeaders?.(statusCode, headers, this.resumed, statusText) ?? true;
    this.afterRead(go);
    return go;
  }

  onData(chunk: Buffer): boolean {
    deliveredReadBuffer(chunk);
    const go = this.inner.onData?.(chunk) ?? true;
    this.afterRead(go);
    return go;
  }

  /** After a read: the next is awaited, unless the handler paused the response (its timer then waits for `resumed`). */
  private afterRead(go: boolean): void {
    if (go) this.awaitRead();
    else {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
  }

  onComplete(trailers: string[] | null): void {
    this.end('complete');
    this.inner.onComplete?.(trailers);
  }

  onError(err: Error): void {
    this.end('failed');
    this.inner.onError?.(err);
  }

  onUpgrade(statusCode: number, headers: Buffer[] | string[] | null, socket: import('node:stream').Duplex): void {
    this.end('upgraded');
    this.inner.onUpgrade?.(statusCode, headers, socket);
  }
}
