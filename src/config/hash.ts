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
