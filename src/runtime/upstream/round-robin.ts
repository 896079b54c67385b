/**
 * nginx's round-robin balancer with failure accounting
 * (`src/http/ngx_http_upstream_round_robin.c`): smooth weighted round robin
 * over a group's primary peers, then its `backup` peers; `down` peers are
 * never chosen; a peer that failed `max_fails` times is skipped for
 * `fail_timeout`, then given one request, and is live again when that one
 * succeeds. A group of one peer and no backup (nginx's `peers->single`)
 * counts no failures and is never retried.
 */
import type { NextUpstreamConf, UpstreamGroup, UpstreamPeer } from '../../config/route-table.js';

/** The shared state of one peer (`ngx_http_upstream_rr_peer_t`). */
interface PeerState {
  currentWeight: number;
  effectiveWeight: number;
  fails: number;
  /** When the peer last failed (`accessed`), seconds since the epoch as `ngx_time()`. */
  accessedSec: number;
  /** When the peer's failures were last checked (`checked`), seconds since the epoch. */
  checkedSec: number;
}

/** The peers' state of a running configuration. */
export class RoundRobin {
  private readonly states = new Map<UpstreamPeer, PeerState>();

  private state(peer: UpstreamPeer): PeerState {
    let st = this.states.get(peer);
    if (!st) this.states.set(peer, (st = { currentWeight: 0, effectiveWeight: peer.weight, fails: 0, accessedSec: 0, checkedSec: 0 }));
    return st;
  }

  /**
   * `ngx_http_upstream_get_peer`: the next peer of `peers` not yet `tried`,
   * not `down` and not failed within its `fail_timeout` (in whole seconds, as
   * nginx counts it); undefined when none is.
   */
  choose(peers: readonly UpstreamPeer[], tried: ReadonlySet<UpstreamPeer>, nowSec: number): UpstreamPeer | undefined {
    let best: UpstreamPeer | undefined;
    let bestState: PeerState | undefined;
    let total = 0;
    for (const peer of peers) {
      if (peer.down || tried.has(peer)) continue;
      const st = this.state(peer);
      if (peer.maxFails > 0 && st.fails >= peer.maxFails && (nowSec - st.checkedSec) * 1000 <= peer.failTimeoutMs) continue;
      st.currentWeight += st.effectiveWeight;
      total += st.effectiveWeight;
      if (st.effectiveWeight < peer.weight) st.effectiveWeight++;
      if (!bestState || st.currentWeight > bestState.currentWeight) {
        best = peer;
        bestState = st;
      }
    }
    if (!best || !bestState) return undefined;
    bestState.currentWeight -= total;
    if ((nowSec - bestState.checkedSec) * 1000 > best.failTimeoutMs) bestState.checkedSec = nowSec;
    return best;
  }

  /**
   * `ngx_http_upstream_free_round_robin_peer` with `NGX_PEER_FAILED`: counts
   * a failure. Returns true when the peer reached `max_fails` (nginx's warn
   * line `upstream server temporarily disabled`).
   */
  failed(peer: UpstreamPeer, nowSec: number): boolean {
    const st = this.state(peer);
    st.fails++;
    st.accessedSec = nowSec;
    st.checkedSec = nowSec;
    if (peer.maxFails === 0) return false;
    st.effectiveWeight = Math.max(0, st.effectiveWeight - Math.trunc(peer.weight / peer.maxFails));
    return st.fails >= peer.maxFails;
  }

  /** The same without a failure: a peer given a request after `fail_timeout` is live again. */
  succeeded(peer: UpstreamPeer): void {
    const st = this.states.get(peer);
    if (st && st.accessedSec < st.checkedSec) st.fails = 0;
  }
}

/** Why a peer is given up on: nginx's `NGX_HTTP_UPSTREAM_FT_*` names. */
export type NextCondition = 'error' | 'timeout' | 'invalid_header' | `http_${number}`;

/** Response statuses the next-upstream conditions can name (`ngx_http_upstream_next_errors`). */
const NEXT_STATUSES = new Set([500, 502, 503, 504, 403, 404, 429]);

/** The condition a response status falls under (`http_502` …), or undefined when none does. */
export function nextConditionOf(status: number): NextCondition | undefined {
  return NEXT_STATUSES.has(status) ? `http_${status}` : undefined;
}

/** Methods nginx treats as non-idempotent (`NGX_HTTP_POST|NGX_HTTP_LOCK|NGX_HTTP_PATCH`). */
const NON_IDEMPOTENT = new Set(['POST', 'LOCK', 'PATCH']);

/** A group's peers split as nginx keeps them (`peers` and `peers->next`), and how many are not `down` (`peers->tries`). */
interface Tiers {
  readonly primary: readonly UpstreamPeer[];
  readonly backups: readonly UpstreamPeer[];
  readonly single: boolean;
  readonly live: number;
}

const tiers = new WeakMap<UpstreamGroup, Tiers>();

function tiersOf(group: UpstreamGroup): Tiers {
  let t = tiers.get(group);
  if (!t) {
    const primary = group.peers.filter((p) => !p.backup);
    const backups = group.peers.filter((p) => p.backup);
    t = { primary, backups, single: primary.length === 1 && backups.length === 0, live: group.peers.filter((p) => !p.down).length };
    tiers.set(group, t);
  }
  return t;
}

/**
 * The peers one request goes through (`ngx_http_upstream_rr_peer_data_t`
 * and `pc->tries`): each peer at most once, the backup peers once the
 * primary ones are exhausted.
 */
export class PeerAttempts {
  private readonly tried = new Set<UpstreamPeer>();
  private readonly backups: readonly UpstreamPeer[];
  private tier: readonly UpstreamPeer[];
  private readonly single: boolean;
  /** Peers that may still be tried (`pc->tries`). */
  private tries: number;
  private readonly startedMs = Date.now();
  /** The peer of the attempt in progress. */
  current: UpstreamPeer | undefined;

  constructor(
    private readonly rr: RoundRobin,
    readonly group: UpstreamGroup,
    private readonly conf: NextUpstreamConf,
  ) {
    const tiers = tiersOf(group);
    this.tier = tiers.primary;
    this.backups = tiers.backups;
    this.single = tiers.single;
    this.tries = conf.nextUpstreamTries > 0 ? Math.min(tiers.live, conf.nextUpstreamTries) : tiers.live;
  }

  /** `ngx_http_upstream_get_round_robin_peer`: the next peer, or undefined (nginx's `NGX_BUSY`, `no live upstreams`). */
  pick(): UpstreamPeer | undefined {
    const nowSec = Math.floor(Date.now() / 1000);
    let peer: UpstreamPeer | undefined;
    if (this.single) peer = this.tier[0]!.down ? undefined : this.tier[0];
    else {
      peer = this.rr.choose(this.tier, this.tried, nowSec);
      if (!peer && this.tier !== this.backups && this.backups.length > 0) {
        this.tier = this.backups;
        this.tried.clear();
        peer = this.rr.choose(this.tier, this.tried, nowSec);
      }
    }
    if (peer) this.tried.add(peer);
    this.current = peer;
    return peer;
  }

  /**
   * Releases the current peer after a failure (`ngx_http_upstream_next`
   * calling `peer.free`): 403 and 404 are not counted as failures. Returns
   * true when the peer is now disabled for `fail_timeout`.
   */
  release(condition: NextCondition): boolean {
    const peer = this.current;
    this.current = undefined;
    if (!peer) return false;
    if (this.single) {
      this.tries = 0;
      return false;
    }
    const disabled = condition === 'http_403' || condition === 'http_404' ? false : this.rr.failed(peer, Math.floor(Date.now() / 1000));
    if (this.tries > 0) this.tries--;
    return disabled;
  }

  /** Releases the current peer after a response that is used. */
  done(): void {
    if (this.current && !this.single) this.rr.succeeded(this.current);
    this.current = undefined;
  }

  /**
   * Whether `condition` lets another peer be tried (after `release`):
   * peers left, the condition enabled, `non_idempotent` for a POST, LOCK or
   * PATCH already sent, an unbuffered body not yet sent, and within
   * `next_upstream_timeout`. `beforeRelease` tells it is asked for a
   * response status (`ngx_http_upstream_test_next`), before the peer is released.
   */
  mayRetry(condition: NextCondition, method: string, requestSent: boolean, bodyUnbuffered: boolean, beforeRelease = false): boolean {
    if (this.tries <= (beforeRelease ? 1 : 0)) return false;
    if (!this.conf.nextUpstream.has(condition)) return false;
    if (requestSent && NON_IDEMPOTENT.has(method) && !this.conf.nextUpstream.has('non_idempotent')) return false;
    if (requestSent && bodyUnbuffered) return false;
    const limitMs = this.conf.nextUpstreamTimeoutMs;
    return !(limitMs > 0 && Date.now() - this.startedMs >= limitMs);
  }
}
