/**
 * The state of `limit_conn_zone`s: per key, the requests counted in it and
 * not yet ended, as `ngx_http_limit_conn_handler` and
 * `ngx_http_limit_conn_cleanup` (`src/http/modules/ngx_http_limit_conn_module.c`)
 * keep them in shared memory. A key's node is made by its first request
 * and freed by the end of its last, within the bytes nginx's slab allocator
 * has in a zone of its size. The zones live in the process, across reloads
 * (a zone of the same name and size keeps its counts, as nginx keeps the
 * shared memory); a request's limits are counted in one `acquire`, so that
 * a store shared between processes can put it behind a lock.
 */
import type { LimitConnZone } from '../config/route-table.js';
import { slabBytes } from './limit-req-zones.js';

/** What the state of a zone depends on: its name and size (its key is evaluated before). */
export type LimitConnZoneShape = Pick<LimitConnZone, 'name' | 'sizeBytes'>;

/** One request's key in one zone. */
export interface LimitConnHeld {
  readonly zone: LimitConnZoneShape;
  /** The evaluated key (1 to 255 bytes). */
  readonly key: string;
}

/** One request's limit in one zone: its key and the requests the key may have at once (`limit_conn ZONE N`). */
export interface LimitConnCheck extends LimitConnHeld {
  readonly conn: number;
}

/** What a request's limits decided; `zone` names the zone that refused it. */
export type LimitConnOutcome =
  /** Every zone counted the request: it holds them until `release`. */
  | { readonly kind: 'pass' }
  /** A key already had its N requests; the zones before it were released. */
  | { readonly kind: 'busy'; readonly zone: string }
  /** A zone had no room for a new key (nginx's slab allocator logs `ngx_slab_alloc() failed: no memory`). */
  | { readonly kind: 'error'; readonly zone: string };

/**
 * The limit_conn state of a process, or of all workers (kept by the
 * master, asked by message).
 */
export interface LimitConnStore {
  /**
   * Counts a request in its zones, in order, as nginx's handler does: a
   * key's count goes up by one unless it has reached its limit, which
   * refuses the request and gives back what the zones before counted.
   * `checks` is never empty.
   */
  acquire(checks: readonly LimitConnCheck[]): LimitConnOutcome | Promise<LimitConnOutcome>;
  /** The request that `acquire` passed has ended: its keys count one less (`ngx_http_limit_conn_cleanup`). */
  release(held: readonly LimitConnHeld[]): void;
}

/** nginx's node: 32 bytes of rbtree node before the color, 4 of limit_conn node (color, len, conn) before the key. */
const NODE_BYTES = 32 + 4;
const PAGE = 4096;

/**
 * One zone: its keys' counts, and its slab pages as nginx's allocator
 * fills them (`ngx_slab_alloc_locked`): a page holds chunks of one size
 * (the next power of two of an allocation), a zone has its size less the
 * pool's bookkeeping in pages (`ngx_slab_init`), and the zone's header
 * takes a chunk of 64 bytes (its rbtree and sentinel) and one for its log
 * context (` in limit_conn_zone "NAME"`), each in a page of its size. A
 * 32 KiB zone holds 40 keys of 255 bytes, as nginx's does.
 */
class ZoneState {
  readonly counts = new Map<string, number>();
  private readonly pages: number;
  /** Chunks used, by chunk size. */
  private readonly chunks = new Map<number, number>();

  constructor(zone: LimitConnZoneShape) {
    this.pages = Math.floor((zone.sizeBytes - 1024) / (PAGE + 24));
    this.take(64);
    this.take(slabBytes(' in limit_conn_zone ""'.length + 1 + Buffer.byteLength(zone.name, 'latin1')));
  }

  /** Pages the used chunks take (their size's chunks per page, a page each past that). */
  private pagesInUse(): number {
    let pages = 0;
    for (const [size, used] of this.chunks) pages += Math.ceil(used / Math.max(1, Math.floor(PAGE / size)));
    return pages;
  }

  /** Takes a chunk of `size`; false when a new page would be needed and none is free. */
  private take(size: number): boolean {
    const used = this.chunks.get(size) ?? 0;
    const perPage = Math.max(1, Math.floor(PAGE / size));
    if (used % perPage === 0 && this.pagesInUse() + 1 > this.pages) return false;
    this.chunks.set(size, used + 1);
    return true;
  }

  static nodeBytes(key: string): number {
    return slabBytes(NODE_BYTES + Buffer.byteLength(key, 'latin1'));
  }

  /** Counts one more request for `key`; false when the key is new and the zone has no room for it. */
  add(key: string): boolean {
    const n = this.counts.get(key);
    if (n !== undefined) {
      this.counts.set(key, n + 1);
      return true;
    }
    if (!this.take(ZoneState.nodeBytes(key))) return false;
    this.counts.set(key, 1);
    return true;
  }

  /** Counts one request less for `key`; its node goes with its last (a page whose chunks are all free is free again). */
  remove(key: string): void {
    const n = this.counts.get(key);
    if (n === undefined) return;
    if (n > 1) {
      this.counts.set(key, n - 1);
      return;
    }
    this.counts.delete(key);
    const size = ZoneState.nodeBytes(key);
    this.chunks.set(size, (this.chunks.get(size) ?? 1) - 1);
  }
}

/** The zones of this process. */
export class LimitConnZones implements LimitConnStore {
  private readonly zones = new Map<string, ZoneState>();

  private state(zone: LimitConnZoneShape): ZoneState {
    const id = `${zone.name}\0${zone.sizeBytes}`;
    let z = this.zones.get(id);
    if (!z) {
      z = new ZoneState(zone);
      this.zones.set(id, z);
    }
    return z;
  }

  acquire(checks: readonly LimitConnCheck[]): LimitConnOutcome {
    for (let i = 0; i < checks.length; i++) {
      const check = checks[i]!;
      const zone = this.state(check.zone);
      const n = zone.counts.get(check.key);
      const refused: LimitConnOutcome | undefined = n !== undefined && n >= check.conn
        ? { kind: 'busy', zone: check.zone.name }
        : zone.add(check.key) ? undefined : { kind: 'error', zone: check.zone.name };
      if (refused) {
        // ngx_http_limit_conn_cleanup_all: the zones counted before give the request back
        this.release(checks.slice(0, i));
        return refused;
      }
    }
    return { kind: 'pass' };
  }

  release(held: readonly LimitConnHeld[]): void {
    for (const h of held) this.zones.get(`${h.zone.name}\0${h.zone.sizeBytes}`)?.remove(h.key);
  }
}
