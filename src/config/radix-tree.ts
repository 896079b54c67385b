/**
 * nginx's radix tree (`src/core/ngx_radix_tree.c`): a binary trie over the
 * bits of an address, most significant first, whose nodes may hold a value.
 * A lookup returns the value of the deepest node on the address's path
 * (longest-prefix match). The tree is created as `ngx_radix_tree_create(pool,
 * -1)` creates it on amd64: the first 6 levels preallocated without values,
 * which shows in what `delete` reports (a network 6 bits long that was never
 * added is a valueless leaf, and deleting it succeeds).
 */
import type { InetAddr } from './inet.js';

interface RadixNode<T> {
  left: RadixNode<T> | undefined;
  right: RadixNode<T> | undefined;
  parent: RadixNode<T> | undefined;
  value: T | undefined;
}

/** Levels `ngx_radix_tree_create` preallocates with `preallocate == -1` (4 KiB pages, 32-byte nodes). */
const PREALLOCATED_BITS = 6;

const bitOf = (key: InetAddr, i: number): number => (key[i >> 3]! >> (7 - (i & 7))) & 1;

/** A radix tree holding values of type T under address prefixes. */
export class RadixTree<T> {
  private readonly root: RadixNode<T> = { left: undefined, right: undefined, parent: undefined, value: undefined };

  constructor() {
    const grow = (node: RadixNode<T>, depth: number): void => {
      if (depth === PREALLOCATED_BITS) return;
      node.left = { left: undefined, right: undefined, parent: node, value: undefined };
      node.right = { left: undefined, right: undefined, parent: node, value: undefined };
      grow(node.left, depth + 1);
      grow(node.right, depth + 1);
    };
    grow(this.root, 0);
  }

  /**
   * `ngx_radix32tree_insert` / `ngx_radix128tree_insert`: stores `value` at
   * the first `bits` bits of `key`; `busy` when that node already has one.
   */
  insert(key: InetAddr, bits: number, value: T): 'ok' | 'busy' {
    let node = this.root;
    let i = 0;
    for (; i < bits; i++) {
      const next = bitOf(key, i) ? node.right : node.left;
      if (!next) break;
      node = next;
    }
    if (i === bits) {
      if (node.value !== undefined) return 'busy';
      node.value = value;
      return 'ok';
    }
    for (; i < bits; i++) {
      const next: RadixNode<T> = { left: undefined, right: undefined, parent: node, value: undefined };
      if (bitOf(key, i)) node.right = next;
      else node.left = next;
      node = next;
    }
    node.value = value;
    return 'ok';
  }

  /**
   * `ngx_radix32tree_delete` / `ngx_radix128tree_delete`: false when there
   * is no such node, or it has children and no value; a leaf is removed
   * with the valueless parents it leaves childless.
   */
  delete(key: InetAddr, bits: number): boolean {
    let node: RadixNode<T> | undefined = this.root;
    for (let i = 0; node && i < bits; i++) node = bitOf(key, i) ? node.right : node.left;
    if (!node) return false;
    if (node.left || node.right) {
      if (node.value === undefined) return false;
      node.value = undefined;
      return true;
    }
    for (let n: RadixNode<T> = node; n.parent;) {
      const parent: RadixNode<T> = n.parent;
      if (parent.right === n) parent.right = undefined;
      else parent.left = undefined;
      n = parent;
      if (n.left || n.right || n.value !== undefined) break;
    }
    if (node === this.root) node.value = undefined;
    return true;
  }

  /** `ngx_radix32tree_find` / `ngx_radix128tree_find`: the value of the longest prefix of `key` that has one. */
  find(key: InetAddr): T | undefined {
    let value: T | undefined;
    let node: RadixNode<T> | undefined = this.root;
    for (let i = 0; node; i++) {
      if (node.value !== undefined) value = node.value;
      if (i === key.length * 8) break;
      node = bitOf(key, i) ? node.right : node.left;
    }
    return value;
  }
}
