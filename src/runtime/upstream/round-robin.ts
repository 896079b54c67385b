/**
 * nginx's balancers with failure accounting: round robin
 * (`src/http/ngx_http_upstream_round_robin.c`): smooth weighted round robin
 * over a group's primary peers, then its `backup` peers; `down` peers are
 * never chosen; a peer that failed `max_fails` times is skipped for
 * `fail_timeout`, then given one request, and is live again when that one
 * succeeds. A group of one peer and no backup (nginx's `peers->single`)
 * counts no failures and is never retried. `ip_hash`
 * (`ngx_http_upstream_ip_hash_module.c`) picks a primary peer by a hash of
 * the client address's first three octets (all sixteen bytes of IPv6),
 * weighted, rehashing past peers that are down, failed or tried, and falls
 * back to round robin after 20 rehashes. `least_conn`
 * (`ngx_http_upstream_least_conn_module.c`) picks the peer with the fewest
 * active connections relative to its weight, round robin among ties, then
 * the backup peers likewise. Every method skips a peer that takes
 * `max_conns` requests already (`conns`, counted from when a request is
 * given the peer until it ends). `hash` and `random` are in balancers.ts.
 */
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';
import type { NextUpstreamConf, UpstreamGroup, UpstreamPeer } from '../../config/route-table.js';
import { chooseChash, chooseHash, chooseRandom, newWalk, startChash } from './balancers.js';

/** The shared state of one peer (`ngx_http_upstream_rr_peer_t`). */
interface PeerState {
  currentWeight: number;
  effectiveWeight: number;
  fails: number;
  /** When the peer last failed (`accessed`), seconds since the epoch as `ngx_time()`. */
  accessedSec: number;
  /** When the peer's failures were last checked (`checked`), seconds since the epoch. */
  checkedSec: number;
  /** Requests using the peer right now (`conns`): from when it is chosen until it is released. */
  conns: number;
}

/**
 * A peer's failure or recovery, or a request taking or leaving it
 * (`conns`), in an upstream group with `zone`: what the worker that saw it
 * tells the others (nginx keeps the peers of such a group in its shared
 * memory zone, `ngx_http_upstream_zone_module.c`).
 */
export interface PeerEvent {
  /** The group's name as configured. */
  readonly group: string;
  /** The peer's index in the group's `peers`. */
  readonly peer: number;
  readonly change: 'failed' | 'recovered' | 'taken' | 'freed';
  /** When, in seconds since the epoch. */
  readonly atSec: number;
}

/** Where a request's `ip_hash` walk is (`iphp->hash`, `iphp->tries`). */
export interface HashWalk {
  hash: number;
  tries: number;
}

/**
 * The peers' state of a running configuration. For a group with `zone`,
 * failures, recoveries and the requests taking and leaving a peer are also
 * told to `share` (the other workers) and theirs applied by `applyShared`;
 * the round-robin position stays this process's.
 */
export class RoundRobin {
  private readonly states = new Map<UpstreamPeer, PeerState>();

  constructor(private readonly share?: (event: PeerEvent) => void) {}

  private state(peer: UpstreamPeer): PeerState {
    let st = this.states.get(peer);
    if (!st) this.states.set(peer, (st = { currentWeight: 0, effectiveWeight: peer.weight, fails: 0, accessedSec: 0, checkedSec: 0, conns: 0 }));
    return st;
  }

  /**
   * Whether a peer is out for now: `down`, or out for a while
   * (`outForNow`).
   */
  private unusable(peer: UpstreamPeer, nowSec: number): boolean {
    return peer.down || this.outForNow(peer, nowSec);
  }

  /** Whether a peer failed `max_fails` times within `fail_timeout`, or takes `max_conns` requests already. */
  private outForNow(peer: UpstreamPeer, nowSec: number): boolean {
    const st = this.state(peer);
    if (peer.maxFails > 0 && st.fails >= peer.maxFails && (nowSec - st.checkedSec) * 1000 <= peer.failTimeoutMs) return true;
    return peer.maxConns > 0 && st.conns >= peer.maxConns;
  }

  /** Whether a peer may be chosen for a request that has `tried` some: not tried, and not out (`unusable`). */
  usable(peer: UpstreamPeer, tried: ReadonlySet<UpstreamPeer>, nowSec: number): boolean {
    return !tried.has(peer) && !this.unusable(peer, nowSec);
  }

  /**
   * Whether the only peer of a group may be chosen (nginx's `peers->single`,
   * which counts no failures): not `down`, and below `max_conns`.
   */
  singleUsable(peer: UpstreamPeer): boolean {
    return !peer.down && !(peer.maxConns > 0 && this.state(peer).conns >= peer.maxConns);
  }

  /** Requests using the peer right now (`conns`). */
  conns(peer: UpstreamPeer): number {
    return this.state(peer).conns;
  }

  /** A peer was chosen: a failed one is given its request (`checked`). */
  taken(peer: UpstreamPeer, nowSec: number): UpstreamPeer {
    const st = this.state(peer);
    if ((nowSec - st.checkedSec) * 1000 > peer.failTimeoutMs) st.checkedSec = nowSec;
    return peer;
  }

  /**
   * A request holds the peer of `group` until it is freed (`peer->conns++`);
   * told to the other workers when the group's method or `max_conns` reads
   * the counts.
   */
  hold(group: UpstreamGroup, peer: UpstreamPeer): void {
    this.state(peer).conns++;
    if (countsConns(group)) this.tell(group, peer, 'taken');
  }

  /** The peer's request is over (`peer->conns--` of `ngx_http_upstream_free_round_robin_peer`). */
  freed(group: UpstreamGroup, peer: UpstreamPeer): void {
    const st = this.states.get(peer);
    if (st && st.conns > 0) st.conns--;
    if (countsConns(group)) this.tell(group, peer, 'freed');
  }

  /** Tells the other workers of a change of a peer in a group with `zone`. */
  private tell(group: UpstreamGroup, peer: UpstreamPeer, change: PeerEvent['change'], atSec = Math.floor(Date.now() / 1000)): void {
    if (group.zone !== undefined) this.share?.({ group: group.name, peer: group.peers.indexOf(peer), change, atSec });
  }

  /**
   * `ngx_http_upstream_get_ip_hash_peer`: the primary peer `addrBytes`
   * hashes to (`hash = (hash * 113 + byte) % 6271` over the bytes, from the
   * request's last hash, then a walk by weight), rehashed while the peer is
   * tried, down or failed. `walk` is the request's (`iphp->hash`,
   * `iphp->tries`); once it has rehashed more than 20 times, undefined: the
   * caller goes round robin.
   */
  chooseByHash(
    peers: readonly UpstreamPeer[], addrBytes: readonly number[], tried: ReadonlySet<UpstreamPeer>, nowSec: number, walk: HashWalk,
  ): UpstreamPeer | undefined {
    const totalWeight = peers.reduce((n, p) => n + p.weight, 0);
    let hash = walk.hash;
    while (walk.tries <= 20) {
      for (const b of addrBytes) hash = (hash * 113 + b) % 6271;
      let w = hash % totalWeight;
      let i = 0;
      while (w >= peers[i]!.weight) w -= peers[i++]!.weight;
      const peer = peers[i]!;
      if (!tried.has(peer) && !this.unusable(peer, nowSec)) {
        walk.hash = hash;
        return this.taken(peer, nowSec);
      }
      walk.tries++;
    }
    return undefined;
  }

  /**
   * `ngx_http_upstream_get_least_conn_peer`: of the peers not tried nor
   * out, the one with the fewest connections per weight (`conns *
   * best.weight < best.conns * weight`); among several, smooth weighted
   * round robin from the first of them.
   */
  chooseLeastConn(peers: readonly UpstreamPeer[], tried: ReadonlySet<UpstreamPeer>, nowSec: number): UpstreamPeer | undefined {
    const usable = peers.filter((p) => !tried.has(p) && !this.unusable(p, nowSec));
    let best: UpstreamPeer | undefined;
    for (const peer of usable) {
      if (!best || this.state(peer).conns * best.weight < this.state(best).conns * peer.weight) best = peer;
    }
    if (!best) return undefined;
    const least = best;
    const ties = usable.slice(usable.indexOf(least)).filter((p) => this.state(p).conns * least.weight === this.state(least).conns * p.weight);
    if (ties.length > 1) {
      let total = 0;
      let bestState = this.state(best);
      for (const peer of ties) {
        const st = this.state(peer);
        st.currentWeight += st.effectiveWeight;
        total += st.effectiveWeight;
        if (st.effectiveWeight < peer.weight) st.effectiveWeight++;
        if (st.currentWeight > bestState.currentWeight) {
          best = peer;
          bestState = st;
        }
      }
      bestState.currentWeight -= total;
    }
    return this.taken(best, nowSec);
  }

  /**
   * `ngx_http_upstream_get_peer`: the next peer of `peers` not yet `tried`,
   * not `down` and not failed within its `fail_timeout` (in whole seconds, as
   * nginx counts it); undefined when none is. `sticky`, a usable peer the
   * request names, is chosen instead of the best one, the weights counted as
   * if it were the best, or left alone while it is already that far behind
   * (its current weight at most minus the others' weights).
   */
  choose(peers: readonly UpstreamPeer[], tried: ReadonlySet<UpstreamPeer>, nowSec: number, sticky?: UpstreamPeer): UpstreamPeer | undefined {
    if (sticky) {
      let totalWeight = 0;
      for (const peer of peers) totalWeight += peer.weight;
      if (this.state(sticky).currentWeight <= -(totalWeight - sticky.weight)) return this.taken(sticky, nowSec);
    }
    let best: UpstreamPeer | undefined;
    let bestState: PeerState | undefined;
    let total = 0;
    for (const peer of peers) {
      if (tried.has(peer) || this.unusable(peer, nowSec)) continue;
      const st = this.state(peer);
      st.currentWeight += st.effectiveWeight;
      total += st.effectiveWeight;
      if (st.effectiveWeight < peer.weight) st.effectiveWeight++;
      if (!bestState || st.currentWeight > bestState.currentWeight) {
        best = peer;
        bestState = st;
      }
    }
    if (sticky) {
      best = sticky;
      bestState = this.state(sticky);
    }
    if (!best || !bestState) return undefined;
    bestState.currentWeight -= total;
    return this.taken(best, nowSec);
  }

  /**
   * `ngx_http_upstream_get_rr_peer_by_sid`: the peer of `peers` whose server
   * ID is `sid`, when it may be chosen (not tried, failed or at `max_conns`,
   * and not `down`, though `drain` is no obstacle); undefined otherwise.
   */
  bySid(peers: readonly UpstreamPeer[], sid: string, tried: ReadonlySet<UpstreamPeer>, nowSec: number): UpstreamPeer | undefined {
    const peer = peers.find((p) => p.sid === sid);
    if (!peer || tried.has(peer) || (peer.down && !peer.draining) || this.outForNow(peer, nowSec)) return undefined;
    return peer;
  }

  /**
   * `ngx_http_upstream_free_round_robin_peer` with `NGX_PEER_FAILED`: counts
   * a failure. Returns true when the peer reached `max_fails` (nginx's warn
   * line `upstream server temporarily disabled`).
   */
  failed(group: UpstreamGroup, peer: UpstreamPeer, nowSec: number): boolean {
    this.tell(group, peer, 'failed', nowSec);
    return this.countFailure(peer, nowSec);
  }

  private countFailure(peer: UpstreamPeer, nowSec: number): boolean {
    const st = this.state(peer);
    st.fails++;
    st.accessedSec = nowSec;
    st.checkedSec = nowSec;
    if (peer.maxFails === 0) return false;
    st.effectiveWeight = Math.max(0, st.effectiveWeight - Math.trunc(peer.weight / peer.maxFails));
    return st.fails >= peer.maxFails;
  }

  /** The same without a failure: a peer given a request after `fail_timeout` is live again. */
  succeeded(group: UpstreamGroup, peer: UpstreamPeer): void {
    const st = this.states.get(peer);
    if (!st || st.accessedSec >= st.checkedSec || st.fails === 0) return;
    st.fails = 0;
    this.tell(group, peer, 'recovered');
  }

  /** Applies another worker's `PeerEvent` to the peer it names among `groups` (by lower-cased name), if its group has a zone. */
  applyShared(event: PeerEvent, groups: ReadonlyMap<string, UpstreamGroup>): void {
    const group = groups.get(event.group.toLowerCase());
    const peer = group?.zone === undefined ? undefined : group.peers[event.peer];
    if (!peer) return;
    const st = this.state(peer);
    if (event.change === 'failed') this.countFailure(peer, event.atSec);
    else if (event.change === 'recovered') st.fails = 0;
    else if (event.change === 'taken') st.conns++;
    else if (st.conns > 0) st.conns--;
  }
}

const readsConns = new WeakMap<UpstreamGroup, boolean>();

/** Whether a group's picks depend on the peers' connection counts: `least_conn`, `random two`, or a peer with `max_conns`. */
function countsConns(group: UpstreamGroup): boolean {
  let reads = readsConns.get(group);
  if (reads === undefined) {
    reads = group.balancer === 'least_conn' || group.balancer === 'random_two' || group.peers.some((p) => p.maxConns > 0);
    readsConns.set(group, reads);
  }
  return reads;
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

/**
 * The bytes `ip_hash` hashes (`ngx_http_upstream_init_ip_hash_peer`): the
 * first three octets of an IPv4 address, the sixteen bytes of an IPv6 one,
 * three zero bytes for anything else (a unix domain socket's client).
 */
function hashBytes(addr: string): number[] {
  if (isIP(addr) === 4) return addr.split('.').slice(0, 3).map(Number);
  if (isIP(addr) === 6) return ipaddr.IPv6.parse(addr).toByteArray();
  return [0, 0, 0];
}

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
  /** The peer whose connection is counted (`conns`) until the request releases it. */
  private held: UpstreamPeer | undefined;

  /** `ip_hash`: the request's walk, from nginx's initial hash 89. */
  private readonly walk: HashWalk = { hash: 89, tries: 0 };
  /** `hash`, `random`: the request's walk. */
  private readonly keyWalk = newWalk();

  /**
   * @param key what the group's method hashes: for `ip_hash`, the client
   *   address (`$remote_addr`, after the realip module; `unix:` hashes as
   *   three zero bytes), for `hash`, its key evaluated for the request
   * @param sid the server ID the request names (`sticky`), if any
   */
  constructor(
    private readonly rr: RoundRobin,
    readonly group: UpstreamGroup,
    private readonly conf: NextUpstreamConf,
    private readonly key = '',
    private readonly sid?: string,
  ) {
    const tiers = tiersOf(group);
    this.tier = tiers.primary;
    this.backups = tiers.backups;
    this.single = tiers.single;
    this.tries = conf.nextUpstreamTries > 0 ? Math.min(tiers.live, conf.nextUpstreamTries) : tiers.live;
    if (group.balancer === 'chash' && !this.single) startChash(group, tiers.primary, key, this.keyWalk);
  }

  /**
   * The next peer by the group's method (`ngx_http_upstream_get_round_robin_peer`,
   * `…_get_ip_hash_peer`, `…_get_least_conn_peer`), or undefined (nginx's
   * `NGX_BUSY`, `no live upstreams`).
   */
  pick(): UpstreamPeer | undefined {
    const nowSec = Math.floor(Date.now() / 1000);
    let peer: UpstreamPeer | undefined;
    if (this.single) {
      peer = this.sticky(this.tier, nowSec) ?? (this.rr.singleUsable(this.tier[0]!) ? this.tier[0] : undefined);
    } else {
      peer = this.chooseIn(this.tier, nowSec);
      if (!peer && this.tier !== this.backups && this.backups.length > 0) {
        this.tier = this.backups;
        this.tried.clear();
        peer = this.chooseIn(this.tier, nowSec);
      }
    }
    if (peer) {
      this.tried.add(peer);
      this.rr.hold(this.group, peer);
    }
    this.current = peer;
    this.held = peer;
    return peer;
  }

  /** The usable peer of `tier` the request names (`sticky`), if any. */
  private sticky(tier: readonly UpstreamPeer[], nowSec: number): UpstreamPeer | undefined {
    return this.sid === undefined ? undefined : this.rr.bySid(tier, this.sid, this.tried, nowSec);
  }

  /**
   * Whether the group's method picks in `tier` rather than leaving it to
   * round robin at once (`ip_hash`, `hash`, `random` with fewer than two
   * peers, an empty key or after 20 tries): a peer the request names is
   * then taken as it is, without round robin's weights.
   */
  private methodPicks(tier: readonly UpstreamPeer[]): boolean {
    switch (this.group.balancer) {
      case 'least_conn': return true;
      case 'ip_hash': return tier.length >= 2 && this.walk.tries <= 20;
      case 'hash': case 'chash': return tier.length >= 2 && this.key.length > 0 && this.keyWalk.tries <= 20;
      case 'random': case 'random_two': return tier.length >= 2 && this.keyWalk.tries <= 20;
      default: return false;
    }
  }

  /**
   * A peer of `tier` by the group's method; `ip_hash`, `hash` and `random`
   * pick among the primary peers only (their groups have no backup), and
   * go round robin when their method gives up. A usable peer the request
   * names (`sticky`) comes first.
   */
  private chooseIn(tier: readonly UpstreamPeer[], nowSec: number): UpstreamPeer | undefined {
    const { balancer } = this.group;
    const sticky = this.sticky(tier, nowSec);
    if (sticky && (tier === this.backups ? balancer === 'least_conn' : this.methodPicks(tier))) return this.rr.taken(sticky, nowSec);
    if (balancer === 'least_conn') return this.rr.chooseLeastConn(tier, this.tried, nowSec);
    if (tier !== this.backups) {
      let peer: UpstreamPeer | undefined;
      if (balancer === 'ip_hash' && tier.length >= 2) peer = this.rr.chooseByHash(tier, hashBytes(this.key), this.tried, nowSec, this.walk);
      else if (balancer === 'hash') peer = chooseHash(this.rr, tier, this.key, this.tried, nowSec, this.keyWalk);
      else if (balancer === 'chash') peer = chooseChash(this.rr, this.group, tier, this.key, this.tried, nowSec, this.keyWalk);
      else if (balancer === 'random' || balancer === 'random_two') {
        peer = chooseRandom(this.rr, this.group, tier, balancer === 'random_two', this.tried, nowSec, this.keyWalk);
      }
      if (peer) return peer;
    }
    return this.rr.choose(tier, this.tried, nowSec, sticky);
  }

  /** The request is over: the peer it still holds is free (nginx's `peer.free` at `ngx_http_upstream_finalize_request`). */
  finish(): void {
    if (this.held) this.rr.freed(this.group, this.held);
    this.held = undefined;
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
    this.finish();
    if (this.single) {
      this.tries = 0;
      return false;
    }
    const disabled = condition === 'http_403' || condition === 'http_404' ? false : this.rr.failed(this.group, peer, Math.floor(Date.now() / 1000));
    if (this.tries > 0) this.tries--;
    return disabled;
  }

  /** Releases the current peer after a response that is used. */
  done(): void {
    if (this.current && !this.single) this.rr.succeeded(this.group, this.current);
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
