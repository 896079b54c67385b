/**
 * The balancers that pick among a group's primary peers by a key or at
 * random, over the peers' state kept by `RoundRobin`:
 * `hash KEY` and `hash KEY consistent` (`ngx_http_upstream_hash_module.c`),
 * `random` and `random two` (`ngx_http_upstream_random_module.c`). Each
 * returns undefined when the request is to go round robin instead, as
 * nginx's `get_rr_peer` fallbacks do (an empty key, fewer than two peers,
 * more than 20 tries).
 */
import { crc32 } from 'node:zlib';
import type { UpstreamGroup, UpstreamPeer } from '../../config/route-table.js';

/** What the balancers ask of the peers' state (`RoundRobin`). */
export interface PeerStates {
  /** Whether a peer may be chosen: not tried, down, failed nor at `max_conns`. */
  usable(peer: UpstreamPeer, tried: ReadonlySet<UpstreamPeer>, nowSec: number): boolean;
  /** Marks a chosen peer (`checked`) and returns it. */
  taken(peer: UpstreamPeer, nowSec: number): UpstreamPeer;
  /** Requests using the peer right now. */
  conns(peer: UpstreamPeer): number;
  /** Smooth weighted round robin among `peers`, or undefined when none is usable. */
  choose(peers: readonly UpstreamPeer[], tried: ReadonlySet<UpstreamPeer>, nowSec: number): UpstreamPeer | undefined;
}

/**
 * Where a request's hash walk is (`ngx_http_upstream_hash_peer_data_t`):
 * `hash` is the sum of the hashes so far (plain) or the index of the point
 * on the ring (consistent), `rehash` the rehashes done, `tries` the peers
 * passed over; `tries` also counts `random`'s draws.
 */
export interface KeyWalk {
  hash: number;
  rehash: number;
  tries: number;
}

/** A new walk, for a request's first pick. */
export function newWalk(): KeyWalk {
  return { hash: 0, rehash: 0, tries: 0 };
}

/** The crc32 of a key's bytes (jinx keeps request bytes as latin1 strings). */
function crc32Of(text: string): number {
  return crc32(Buffer.from(text, 'latin1'));
}

/**
 * `ngx_http_upstream_get_hash_peer`: `hash += (crc32([REHASH] KEY) >> 16) &
 * 0x7fff` (REHASH, the number of rehashes in decimal, left out the first
 * time), the peer at `hash % total weight` by weight; rehashed while that
 * peer is tried, down, failed or at `max_conns`. Undefined (round robin)
 * with an empty key, fewer than two peers, or after 20 rehashes.
 */
export function chooseHash(
  rr: PeerStates, peers: readonly UpstreamPeer[], key: string, tried: ReadonlySet<UpstreamPeer>, nowSec: number, walk: KeyWalk,
): UpstreamPeer | undefined {
  if (walk.tries > 20 || peers.length < 2 || key.length === 0) return undefined;
  const totalWeight = peers.reduce((n, p) => n + p.weight, 0);
  for (;;) {
    const hash = (crc32Of(walk.rehash > 0 ? `${walk.rehash}${key}` : key) >>> 16) & 0x7fff;
    walk.hash += hash;
    walk.rehash++;
    let w = walk.hash % totalWeight;
    let i = 0;
    while (w >= peers[i]!.weight) w -= peers[i++]!.weight;
    const peer = peers[i]!;
    if (rr.usable(peer, tried, nowSec)) return rr.taken(peer, nowSec);
    if (++walk.tries > 20) return undefined;
  }
}

/**
 * The ring of a consistent hash (`ngx_http_upstream_chash_points_t`): point
 * hashes ascending, each with its server's name, and the peers of each name.
 */
interface Ring {
  readonly hashes: Uint32Array;
  readonly servers: readonly string[];
  readonly peersOf: ReadonlyMap<string, readonly UpstreamPeer[]>;
}

const rings = new WeakMap<UpstreamGroup, Ring>();

/**
 * `ngx_http_upstream_update_chash`: 160 points per unit of weight for each
 * primary peer, point `j` being `crc32(HOST \0 PORT PREV)` where HOST and
 * PORT split the `server` address as written at its last `:` followed by
 * digits only (`unix:PATH` hashes PATH with no port) and PREV is the
 * previous point's hash as four little-endian bytes (zero at first);
 * sorted, and a hash met twice kept once (the first after sorting).
 */
export function chashRing(group: UpstreamGroup, peers: readonly UpstreamPeer[]): Ring {
  let ring = rings.get(group);
  if (ring) return ring;
  const points: { hash: number; server: string }[] = [];
  for (const peer of peers) {
    const server = peer.server;
    let host = server;
    let port = '';
    if (server.length >= 5 && server.slice(0, 5).toLowerCase() === 'unix:') host = server.slice(5);
    else {
      const m = /:(\d*)$/.exec(server);
      if (m) {
        host = server.slice(0, m.index);
        port = m[1]!;
      }
    }
    const base = crc32(Buffer.concat([Buffer.from(host, 'latin1'), Buffer.from([0]), Buffer.from(port, 'latin1')]));
    const prev = Buffer.alloc(4);
    for (let j = 0; j < peer.weight * 160; j++) {
      const hash = crc32(prev, base);
      points.push({ hash, server });
      prev.writeUInt32LE(hash);
    }
  }
  // a hash met twice keeps its first point (Array.prototype.sort is stable, as glibc's merge sort behind ngx_qsort)
  points.sort((a, b) => a.hash - b.hash);
  const kept = points.filter((p, i) => i === 0 || p.hash !== points[i - 1]!.hash);
  const peersOf = new Map<string, UpstreamPeer[]>();
  for (const peer of peers) peersOf.set(peer.server, [...(peersOf.get(peer.server) ?? []), peer]);
  ring = { hashes: Uint32Array.from(kept, (p) => p.hash), servers: kept.map((p) => p.server), peersOf };
  rings.set(group, ring);
  return ring;
}

/** `ngx_http_upstream_find_chash_point`: the index of the first point at or above `hash` (the number of points past the last). */
function findPoint(ring: Ring, hash: number): number {
  let i = 0;
  let j = ring.hashes.length;
  while (i < j) {
    const k = (i + j) >>> 1;
    if (hash > ring.hashes[k]!) i = k + 1;
    else if (hash < ring.hashes[k]!) j = k;
    else return k;
  }
  return i;
}

/**
 * `ngx_http_upstream_init_chash_peer`: a request's walk starts at the first
 * point at or above `crc32(KEY)`.
 */
export function startChash(group: UpstreamGroup, peers: readonly UpstreamPeer[], key: string, walk: KeyWalk): void {
  walk.hash = findPoint(chashRing(group, peers), crc32Of(key));
}

/**
 * `ngx_http_upstream_get_chash_peer`: the server of the walk's point, and
 * among the usable peers of that server's name (the addresses of one name)
 * one by smooth weighted round robin; else the next point. Undefined (round
 * robin) with an empty key, one peer, or after 20 points.
 */
export function chooseChash(
  rr: PeerStates, group: UpstreamGroup, peers: readonly UpstreamPeer[], key: string, tried: ReadonlySet<UpstreamPeer>, nowSec: number,
  walk: KeyWalk,
): UpstreamPeer | undefined {
  if (walk.tries > 20 || peers.length < 2 || key.length === 0) return undefined;
  const ring = chashRing(group, peers);
  for (;;) {
    const server = ring.servers[walk.hash % ring.hashes.length]!;
    const peer = rr.choose(ring.peersOf.get(server)!, tried, nowSec);
    if (peer) return peer;
    walk.hash++;
    if (++walk.tries > 20) return undefined;
  }
}

/** The start of each peer's range of weight (`ngx_http_upstream_random_range_t`), and the total. */
interface Ranges {
  readonly starts: readonly number[];
  readonly totalWeight: number;
}

const ranges = new WeakMap<UpstreamGroup, Ranges>();

/** `ngx_http_upstream_peek_random_peer`: a peer's index drawn by weight (`ngx_random() % total_weight`, then a binary search). */
function peek(group: UpstreamGroup, peers: readonly UpstreamPeer[]): number {
  let r = ranges.get(group);
  if (!r) {
    const starts: number[] = [];
    let total = 0;
    for (const p of peers) {
      starts.push(total);
      total += p.weight;
    }
    r = { starts, totalWeight: total };
    ranges.set(group, r);
  }
  const x = Math.floor(Math.random() * r.totalWeight);
  let i = 0;
  let j = peers.length;
  while (j - i > 1) {
    const k = (i + j) >>> 1;
    if (x < r.starts[k]!) j = k;
    else i = k;
  }
  return i;
}

/**
 * `ngx_http_upstream_get_random_peer` and, with `two`,
 * `ngx_http_upstream_get_random2_peer`: a peer drawn by weight, drawn again
 * while it is tried, down, failed or at `max_conns`; with `two`, two
 * different such peers, and the one with fewer connections per weight (the
 * first drawn on a tie). Undefined (round robin) with fewer than two peers
 * or after 20 draws.
 */
export function chooseRandom(
  rr: PeerStates, group: UpstreamGroup, peers: readonly UpstreamPeer[], two: boolean, tried: ReadonlySet<UpstreamPeer>, nowSec: number,
  walk: KeyWalk,
): UpstreamPeer | undefined {
  if (walk.tries > 20 || peers.length < 2) return undefined;
  let prev: UpstreamPeer | undefined;
  for (;;) {
    const peer = peers[peek(group, peers)]!;
    if (peer !== prev && rr.usable(peer, tried, nowSec)) {
      if (!two) return rr.taken(peer, nowSec);
      if (prev) {
        const better = rr.conns(peer) * prev.weight > rr.conns(prev) * peer.weight ? prev : peer;
        return rr.taken(better, nowSec);
      }
      prev = peer;
    }
    if (++walk.tries > 20) return undefined;
  }
}
