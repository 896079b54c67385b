/**
 * The checks of `ngx_hash_init` (`src/core/ngx_hash.c`) that refuse a
 * configuration: jinx keeps its tables in Maps and builds no hash, but a
 * size nginx cannot build a hash with is an error in nginx, reported
 * without a place.
 */
import { ConfigError } from '../errors.js';

/** nginx's `ngx_cacheline_size` on x86-64: bucket sizes are rounded up to it. */
const CACHELINE_BYTES = 64;
/** `sizeof(void *)`. */
const POINTER_BYTES = 8;

const align = (n: number, to: number): number => Math.ceil(n / to) * to;

/**
 * `ngx_hash_init` for a hash named `name` (`types_hash`) of `keys`, with
 * `NAME_max_size` and `NAME_bucket_size` as set: a zero maximum size, a
 * bucket size past 65536 - 64 bytes, or a key too long for one bucket
 * (`ngx_align(8 + length + 2, 8) + 8` bytes) is nginx's error.
 * @throws ConfigError `could not build NAME, you should increase NAME_max_size: 0`,
 *   `could not build NAME, too large NAME_bucket_size: N`,
 *   `could not build NAME, you should increase NAME_bucket_size: N`
 */
export function checkHashSizes(name: string, keys: Iterable<string>, maxSize: number, bucketSizeSet: number): void {
  const bucketSize = align(bucketSizeSet, CACHELINE_BYTES);
  if (maxSize === 0) throw new ConfigError('invalid-value', `could not build ${name}, you should increase ${name}_max_size: ${maxSize}`);
  if (bucketSize > 65536 - CACHELINE_BYTES) throw new ConfigError('invalid-value', `could not build ${name}, too large ${name}_bucket_size: ${bucketSize}`);
  for (const key of keys) {
    if (bucketSize < align(POINTER_BYTES + key.length + 2, POINTER_BYTES) + POINTER_BYTES) {
      throw new ConfigError('invalid-value', `could not build ${name}, you should increase ${name}_bucket_size: ${bucketSize}`);
    }
  }
}

/** `NGX_HASH_ELT_SIZE`: a key's bytes in a bucket (a value pointer, its length, the name, aligned). */
const eltSize = (key: string): number => POINTER_BYTES + align(key.length + 2, POINTER_BYTES);

/** `ngx_hash_key` (`ngx_hash(key, c)`: `key * 31 + c` on 64 bits) of a lowercased key, as its two 32-bit halves. */
function hashKey(key: string): { readonly hi: number; readonly lo: number } {
  let k = 0n;
  for (let i = 0; i < key.length; i++) k = BigInt.asUintN(64, k * 31n + BigInt(key.charCodeAt(i)));
  return { hi: Number(k >> 32n), lo: Number(k & 0xffffffffn) };
}

/**
 * The search of `ngx_hash_init` (`src/core/ngx_hash.c`) for the smallest
 * number of buckets, from `nelts / (bucket / 16)` (or `max - 1000` for a
 * large `max` with few keys per bucket) up to `NAME_max_size`, where no
 * bucket's keys outgrow the bucket size: when none is found nginx uses
 * `max_size` buckets and warns. Returns that warning's text, or undefined.
 * Call after `checkHashSizes` (which refuses what nginx cannot build).
 */
export function optimalHashWarning(name: string, keys: readonly string[], maxSize: number, bucketSizeSet: number): string | undefined {
  const bucketSize = align(bucketSizeSet, CACHELINE_BYTES);
  const room = bucketSize - POINTER_BYTES;
  let start = Math.floor(keys.length / Math.floor(room / (2 * POINTER_BYTES))) || 1;
  if (maxSize > 10000 && keys.length > 0 && Math.floor(maxSize / keys.length) < 100) start = maxSize - 1000;
  const hashes = keys.map(hashKey);
  const sizes = keys.map(eltSize);
  const test = new Uint32Array(maxSize + 1);
  const touched: number[] = [];
  for (let size = start; size <= maxSize; size++) {
    const high = 2 ** 32 % size;
    let fits = true;
    for (let n = 0; n < keys.length; n++) {
      const h = hashes[n]!;
      const bucket = ((h.hi % size) * high + (h.lo % size)) % size;
      if (test[bucket] === 0) touched.push(bucket);
      test[bucket]! += sizes[n]!;
      if (test[bucket]! > room) {
        fits = false;
        break;
      }
    }
    for (const b of touched) test[b] = 0;
    touched.length = 0;
    if (fits) return undefined;
  }
  return `could not build optimal ${name}, you should increase either ${name}_max_size: ${maxSize} or ${name}_bucket_size: ${bucketSize}; `
    + `ignoring ${name}_bucket_size`;
}

/** The plain names of one address as `ngx_hash_add_key` keeps them for `ngx_hash_init` and `ngx_hash_wildcard_init`. */
export interface NameHashKeys {
  /** Exact names, each once. */
  readonly exact: readonly string[];
  /** Head wildcards reversed: `*.example.com` as `com.example.`, `.example.com` as `com.example`. */
  readonly heads: readonly string[];
  /** Tail wildcards without `.*`: `www.example.*` as `www.example`. */
  readonly tails: readonly string[];
}

/**
 * `ngx_hash_add_key` with `NGX_HASH_WILDCARD_KEY` over the plain (not regex)
 * server names of one address, in order: a name already taken (exact, or
 * the wildcard of the same name) is left out, as nginx leaves out what it
 * calls a conflicting server name; invalid wildcards are left out too
 * (refused before, when the names were read).
 */
export function nameHashKeys(names: Iterable<string>): NameHashKeys {
  const exact: string[] = [];
  const exactSeen = new Set<string>();
  const heads: string[] = [];
  const headSeen = new Set<string>();
  const tails: string[] = [];
  const tailSeen = new Set<string>();
  for (const name of names) {
    const stars = name.split('*').length - 1;
    if (stars > 1 || name.includes('..')) continue;
    let skip = -1;
    if (name.length > 1 && name[0] === '.') skip = 1;
    else if (name.length > 2 && name.startsWith('*.')) skip = 2;
    else if (name.length > 2 && name.endsWith('.*')) skip = 0;
    else if (stars > 0) continue;
    if (skip === -1) {
      if (exactSeen.has(name)) continue;
      exactSeen.add(name);
      exact.push(name);
      continue;
    }
    if (skip === 1) {
      if (exactSeen.has(name.slice(1))) continue;
      exactSeen.add(name.slice(1));
    }
    if (skip > 0) {
      const rest = name.slice(skip);
      if (headSeen.has(rest)) continue;
      headSeen.add(rest);
      const labels = name.slice(1).split('.');
      // "*.example.com" → "com.example." ("" first after the split of ".example.com"), ".example.com" → "com.example"
      heads.push(skip === 2 ? `${labels.slice(1).reverse().join('.')}.` : labels.reverse().join('.'));
    } else {
      const rest = name.slice(0, -1);
      if (tailSeen.has(rest)) continue;
      tailSeen.add(rest);
      tails.push(name.slice(0, -2));
    }
  }
  return { exact, heads, tails };
}

/** `ngx_dns_strcmp`: byte order with `.` lowest, a shorter name first. */
function dnsCompare(a: string, b: string): number {
  for (let i = 0; ; i++) {
    const c1 = i < a.length ? a.charCodeAt(i) : 0;
    const c2 = i < b.length ? b.charCodeAt(i) : 0;
    if (c1 === c2) {
      if (c1 === 0) return 0;
      continue;
    }
    return (c1 === 0x2e ? 0x20 : c1) - (c2 === 0x2e ? 0x20 : c2);
  }
}

/**
 * The `ngx_hash_init` calls of `ngx_hash_wildcard_init` over `names` (sorted
 * as `ngx_http_cmp_dns_wildcards` sorts them): one hash of the first labels,
 * after one per group of names sharing a first label (what follows it),
 * depth first; `check` is called with each hash's keys in nginx's order.
 */
function wildcardHashes(names: readonly string[], check: (keys: readonly string[]) => void): void {
  const curr: string[] = [];
  for (let n = 0, i = 0; n < names.length; n = i) {
    const key = names[n]!;
    const dotAt = key.indexOf('.');
    let len = dotAt === -1 ? key.length : dotAt;
    const dot = dotAt !== -1;
    curr.push(key.slice(0, len));
    const dotLen = len + 1;
    if (dot) len++;
    const next: string[] = [];
    if (key.length !== len) next.push(key.slice(len));
    const prefix = key.slice(0, len);
    for (i = n + 1; i < names.length; i++) {
      const other = names[i]!;
      if (other.slice(0, len) !== prefix) break;
      if (!dot && other.length > len && other[len] !== '.') break;
      next.push(other.slice(dotLen));
    }
    if (next.length > 0) wildcardHashes(next, check);
  }
  check(curr);
}

/**
 * The hashes `ngx_http_server_names` (`src/http/ngx_http.c`) builds for one
 * address, in its order: exact names, then head wildcards, then tail
 * wildcards, each with `server_names_hash_max_size` and
 * `server_names_hash_bucket_size`. Returns the warnings nginx gives
 * (`could not build optimal server_names_hash …`), one per hash that does
 * not fit. @throws ConfigError what `checkHashSizes` refuses
 */
export function serverNamesHashWarnings(keys: NameHashKeys, maxSize: number, bucketSizeSet: number): string[] {
  const warnings: string[] = [];
  const check = (names: readonly string[]): void => {
    checkHashSizes('server_names_hash', names, maxSize, bucketSizeSet);
    const w = optimalHashWarning('server_names_hash', names, maxSize, bucketSizeSet);
    if (w) warnings.push(w);
  };
  if (keys.exact.length > 0) check(keys.exact);
  for (const wild of [keys.heads, keys.tails]) if (wild.length > 0) wildcardHashes([...wild].sort(dnsCompare), check);
  return warnings;
}
