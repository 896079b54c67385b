/**
 * The listening sockets of the server, across reloads: one per address of
 * the configuration in service (`listen.ts` makes and binds each). A reload
 * binds the new addresses first and closes the ones it dropped after.
 */
import type { ListenGroup } from '../../config/route-table.js';
import { bindListener, bindOrder, createListener, listenKey, type EarlyListener, type ListenHooks, type Listener } from '../listen.js';
import type { Generation } from './generations.js';

/** The server's listening sockets by `listenKey`. */
export class Listeners {
  private readonly byKey = new Map<string, Listener>();

  /** @param hooks what the listening socket for `group` (whose `listenKey` is `key`) tells the server */
  constructor(private readonly hooks: (key: string, group: ListenGroup) => ListenHooks) {}

  /** The TCP server listening for the group of `key`, if it is bound (`pass` of the stream module hands it connections). */
  front(key: string): Listener['front'] | undefined {
    return this.byKey.get(key)?.front;
  }

  /** Listening sockets open (each counts among `worker_connections`). */
  get count(): number {
    return this.byKey.size;
  }

  /**
   * Binds a socket for every address of `gen` not bound yet, or takes the
   * one `early` bound for it (`listenEarly`).
   * @throws ConfigError `bind() to ADDR failed (…)` for the first that cannot be bound
   */
  async bindNew(gen: Generation, early?: ReadonlyMap<string, EarlyListener>): Promise<void> {
    for (const group of bindOrder(gen.groups.values())) {
      const key = listenKey(group);
      if (this.byKey.has(key)) continue;
      const server = createListener(group, this.hooks(key, group), early?.get(key));
      await bindListener(server, group);
      this.byKey.set(key, server);
    }
  }

  /**
   * Once `gen` is in service: closes the sockets of addresses it no longer
   * has, and gives the TLS ones the default context of `gen` (for clients without SNI).
   */
  keepOnly(gen: Generation): void {
    for (const [key, server] of this.byKey) {
      if (gen.groups.has(key)) continue;
      server.front.close();
      this.byKey.delete(key);
    }
    for (const [key, server] of this.byKey) {
      const group = gen.groups.get(key)!;
      server.tls?.setSecureContext(gen.tls.optionsOf(group.servers.defaultServer));
    }
  }

  /** Closes every listening socket; resolves once all are closed. */
  closeAll(): Promise<void> {
    const closing = [...this.byKey.values()].map((s) => new Promise<void>((resolve) => s.front.close(() => resolve())));
    this.byKey.clear();
    return Promise.all(closing).then(() => undefined);
  }
}
