/**
 * The state of `limit_req_zone`s: per key, the excess of requests over the
 * rate (in thousandths of a request) and when it was last counted, as
 * `ngx_http_limit_req_lookup` and `ngx_http_limit_req_account`
 * (`src/http/modules/ngx_http_limit_req_module.c`) keep them in shared
 * memory. The zones live in the process, across reloads (a zone of the
 * same name and size keeps its state, as nginx keeps the shared memory);
 * everything a request's limits do happens in one `apply`, so that a
 * store shared between processes can put the same call behind a lock.
 */
import type { LimitReqZone } from '../config/route-table.js';

/** What the state of a zone depends on: its name, rate and size (its key is evaluated before). */
export type LimitZoneShape = Pick<LimitReqZone, 'name' | 'rateMilli' | 'sizeBytes'>;

/** One request's limit in one zone: the key it counts under, its `burst` and `delay`, in thousandths. */
export interface LimitCheck {
  readonly zone: LimitZoneShape;
  /** The evaluated key (1 to 65535 bytes); an empty key is skipped before `apply`. */
  readonly key: string;
  readonly burstMilli: number;
  readonly delayMilli: number;
}

/** What a request's limits decided; `zone` names the zone that decided, `excessMilli` its excess. */
export type LimitOutcome =
  /** The request is over a zone's burst. */
  | { readonly kind: 'busy'; readonly zone: string; readonly excessMilli: number }
  /** A zone had no room for a new key (`could not allocate node`, logged by the store). */
  | { readonly kind: 'error'; readonly zone: string }
  /** The request goes on now. */
  | { readonly kind: 'pass' }
  /** The request goes on after `delayMs`. */
  | { readonly kind: 'delay'; readonly zone: string; readonly excessMilli: number; readonly delayMs: number };

/**
 * The limit_req state of a process, or of all workers (kept by the master,
 * asked by message): the one operation the phase handler needs.
 */
export interface LimitReqStore {
  /**
   * Counts a request against its limits, in order, as nginx's handler does:
   * each zone's excess is looked up, the request is refused by the first
   * zone it is over the burst of, otherwise every zone counts it and the
   * longest delay any asks for is kept. `checks` is never empty.
   */
  apply(checks: readonly LimitCheck[]): LimitOutcome | Promise<LimitOutcome>;
}

/** One key's state (`ngx_http_limit_req_node_t`). */
interface KeyState {
  excessMilli: number;
  lastMs: number;
  /** Bytes of the zone it takes, as nginx's slab allocator rounds its node. */
  readonly bytes: number;
}

/** nginx's page size and its node layout: 32 bytes of rbtree node before the color, 48 of limit_req node before the key. */
const PAGE = 4096;
const NODE_BYTES = 32 + 48;

/** The slab size of an allocation: the next power of two, 8 at least (`ngx_slab_alloc_locked`). */
export function slabBytes(size: number): number {
  let s = 8;
  while (s < size) s *= 2;
  return s;
}

/**
 * One zone: its keys in order of last use, oldest first, within the bytes
 * nginx's slab allocator would have in a zone of its size (its pages less
 * the pool's bookkeeping and one page for the zone's own header).
 */
class ZoneState {
  readonly keys = new Map<string, KeyState>();
  usedBytes = 0;
  readonly budgetBytes: number;

  constructor(readonly zone: LimitZoneShape) {
    this.budgetBytes = Math.max(0, Math.floor((zone.sizeBytes - 1024) / (PAGE + 24)) - 1) * PAGE;
  }

  /**
   * `ngx_http_limit_req_expire`: `force` removes the oldest key; then up to
   * two of the oldest that have been idle a minute and whose excess has
   * drained away.
   */
  expire(force: boolean, nowMs: number): void {
    for (let n = force ? 0 : 1; n < 3; n++) {
      const oldest = this.keys.entries().next();
      if (oldest.done) return;
      const [key, state] = oldest.value;
      if (n !== 0) {
        const ms = Math.abs(nowMs - state.lastMs);
        if (ms < 60_000) return;
        if (state.excessMilli - Math.floor((this.zone.rateMilli * ms) / 1000) > 0) return;
      }
      this.keys.delete(key);
      this.usedBytes -= state.bytes;
    }
  }

  /** A new key's state, made room for; undefined when there is none even after the oldest went. */
  add(key: string, nowMs: number): KeyState | undefined {
    const bytes = slabBytes(NODE_BYTES + Buffer.byteLength(key, 'latin1'));
    this.expire(false, nowMs);
    if (this.usedBytes + bytes > this.budgetBytes) {
      this.expire(true, nowMs);
      if (this.usedBytes + bytes > this.budgetBytes) return undefined;
    }
    const state: KeyState = { excessMilli: 0, lastMs: 0, bytes };
    this.keys.set(key, state);
    this.usedBytes += bytes;
    return state;
  }

  /** Marks a key as the most recently used. */
  touch(key: string, state: KeyState): void {
    this.keys.delete(key);
    this.keys.set(key, state);
  }
}

/** Milliseconds of a monotonic clock that is far from zero, as nginx's `ngx_current_msec`. */
export function monotonicMs(): number {
  return Math.floor(performance.timeOrigin + performance.now());
}

/** The excess of a key now: what it had, less what the rate drained since, plus this request (`ms` clamped as nginx does). */
function excessNow(state: KeyState, rateMilli: number, nowMs: number): { excess: number; ms: number } {
  let ms = nowMs - state.lastMs;
  if (ms < -60_000) ms = 1;
  else if (ms < 0) ms = 0;
  const excess = state.excessMilli - Math.floor((rateMilli * ms) / 1000) + 1000;
  return { excess: Math.max(excess, 0), ms };
}

/** The zones of this process. */
export class LimitReqZones implements LimitReqStore {
  private readonly zones = new Map<string, ZoneState>();

  constructor(
    /** Where `could not allocate node in limit_req zone "NAME"` goes (nginx's cycle log, level alert). */
    private readonly alert: (message: string) => void,
    private readonly now: () => number = monotonicMs,
  ) {}

  private state(zone: LimitZoneShape): ZoneState {
    const id = `${zone.name}\0${zone.sizeBytes}`;
    let z = this.zones.get(id);
    if (!z || z.zone.rateMilli !== zone.rateMilli) {
      // same name and size: nginx keeps the memory (and the keys); a new rate applies to them
      const kept = z?.keys;
      z = new ZoneState(zone);
      if (kept) for (const [k, v] of kept) z.keys.set(k, v);
      this.zones.set(id, z);
    }
    return z;
  }

  apply(checks: readonly LimitCheck[]): LimitOutcome {
    const nowMs = this.now();
    const held: { readonly check: LimitCheck; readonly state: KeyState }[] = [];
    for (const check of checks) {
      const zone = this.state(check.zone);
      // the last limit counts the request at once; the others hold their key until `account`
      const last = check === checks[checks.length - 1];
      let state = zone.keys.get(check.key);
      let excess = 0;
      if (state) {
        zone.touch(check.key, state);
        const now = excessNow(state, check.zone.rateMilli, nowMs);
        excess = now.excess;
        if (excess > check.burstMilli) return { kind: 'busy', zone: check.zone.name, excessMilli: excess };
        if (last) {
          state.excessMilli = excess;
          if (now.ms) state.lastMs = nowMs;
        }
      } else {
        state = zone.add(check.key, nowMs);
        if (!state) {
          this.alert(`could not allocate node in limit_req zone "${check.zone.name}"`);
          return { kind: 'error', zone: check.zone.name };
        }
        if (last) state.lastMs = nowMs;
      }
      if (last) return this.account(held, check, excess, nowMs);
      held.push({ check, state });
    }
    throw new Error('limit_req: no limits to apply');
  }

  /** `ngx_http_limit_req_account`: the zones looked up before the last count the request too; the longest delay wins. */
  private account(
    held: readonly { readonly check: LimitCheck; readonly state: KeyState }[], last: LimitCheck, lastExcess: number, nowMs: number,
  ): LimitOutcome {
    let decided = last;
    let excessMilli = lastExcess;
    let maxDelay = lastExcess <= last.delayMilli ? 0 : Math.floor(((lastExcess - last.delayMilli) * 1000) / last.zone.rateMilli);
    for (let n = held.length - 1; n >= 0; n--) {
      const { check, state } = held[n]!;
      const now = excessNow(state, check.zone.rateMilli, nowMs);
      if (now.ms) state.lastMs = nowMs;
      state.excessMilli = now.excess;
      if (now.excess <= check.delayMilli) continue;
      const delay = Math.floor(((now.excess - check.delayMilli) * 1000) / check.zone.rateMilli);
      if (delay > maxDelay) [maxDelay, excessMilli, decided] = [delay, now.excess, check];
    }
    return maxDelay === 0 ? { kind: 'pass' } : { kind: 'delay', zone: decided.zone.name, excessMilli, delayMs: maxDelay };
  }
}
