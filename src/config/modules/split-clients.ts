/**
 * The split_clients module (`src/http/modules/ngx_http_split_clients_module.c`):
 * `split_clients STRING $variable { 0.5% a; 20% b; * c; }` hashes the
 * evaluated string with nginx's MurmurHash2 and gives the value of the part
 * the hash falls in, the parts taking their shares of the 32-bit hash space in
 * order (`*` takes what is left). So a key lands in the same part as in nginx.
 */
import type { Directive } from '../../parser/ast.js';
import type { RequestView } from '../request-view.js';
import { scopeRegistry } from '../scope.js';
import { DirectiveFailure, fail, type DirectiveSpec } from '../spec.js';
import type { ScriptView, ValueSource, VariableRegistry } from '../variables.js';

const SPLIT_CLIENTS = 'ngx_http_split_clients_module';

/** A `split_clients` block as read (of http, `V` = `RequestView`, or of stream, `StreamView`). */
export interface SplitClientsDef<V extends ScriptView = RequestView> {
  readonly source: ValueSource;
  /** Upper bounds of the parts in the hash space (exclusive), or 0 for `*`, with their values, in order. */
  readonly parts: { readonly bound: number; readonly value: string }[];
  /** Set once bound at compile time; read by the variable's getter. */
  bound: ((r: V) => string) | undefined;
}

/** Every `split_clients` block of a configuration, bound once all variables are declared. */
export const splitClientsBlocks = scopeRegistry((): SplitClientsDef[] => []);

const MAX_INT_T = 0x7fff_ffff_ffff_ffffn;

/**
 * `ngx_atofp(text, n, 2)`: a decimal number with at most one dot and at
 * most two decimals, as an integer of hundredths. Undefined when malformed
 * or past `NGX_MAX_INT_T_VALUE`.
 */
function atofp2(text: string): bigint | undefined {
  if (text.length === 0) return undefined;
  let value = 0n;
  let point = 2;
  let dot = false;
  for (const c of text) {
    if (c === '.') {
      if (dot) return undefined;
      dot = true;
      continue;
    }
    if (c < '0' || c > '9' || point === 0) return undefined;
    value = value * 10n + BigInt(c.charCodeAt(0) - 48);
    if (value > MAX_INT_T) return undefined;
    if (dot) point--;
  }
  for (; point > 0; point--) {
    value *= 10n;
    if (value > MAX_INT_T) return undefined;
  }
  return value;
}

/**
 * `ngx_murmur_hash2` (`src/core/ngx_murmurhash.c`) over the bytes of a
 * string (one byte per character, as jinx holds request bytes).
 */
export function murmurHash2(text: string): number {
  const data = Buffer.from(text, 'latin1');
  const m = 0x5bd1e995;
  let len = data.length;
  let h = len >>> 0;
  let i = 0;
  while (len >= 4) {
    let k = data[i]! | (data[i + 1]! << 8) | (data[i + 2]! << 16) | (data[i + 3]! << 24);
    k = Math.imul(k, m);
    k ^= k >>> 24;
    k = Math.imul(k, m);
    h = Math.imul(h, m) ^ k;
    i += 4;
    len -= 4;
  }
  // the tail bytes, as the switch's fall-through cases take them
  if (len >= 3) h ^= data[i + 2]! << 16;
  if (len >= 2) h ^= data[i + 1]! << 8;
  if (len >= 1) {
    h ^= data[i]!;
    h = Math.imul(h, m);
  }
  h ^= h >>> 13;
  h = Math.imul(h, m);
  h ^= h >>> 15;
  return h >>> 0;
}

/**
 * `ngx_http_split_clients`: `PERCENT% VALUE` or `* VALUE`; the percentage as
 * hundredths (uint32, as nginx stores it). nginx does not count the words:
 * the value is the second word, and an entry of one word takes the second
 * word nginx's argument array still holds, that of the statement before it
 * (`carried`).
 * @throws DirectiveFailure `invalid percent value "X"`
 */
function readPart(e: Directive, carried: string): { percent: number; value: string } {
  if (e.block !== null) fail('unexpected "{"', e.loc);
  const key = e.name;
  const value = e.args[0] ?? carried;
  if (key === '*') return { percent: 0, value };
  const n = key.endsWith('%') ? atofp2(key.slice(0, -1)) : undefined;
  if (!n) fail(`invalid percent value "${key}"`, e.loc);
  return { percent: Number(n & 0xffff_ffffn), value };
}

/**
 * `ngx_conf_split_clients_block` (http's and stream's): the block read into
 * a `SplitClientsDef`, its variable declared in `vars`.
 * @throws DirectiveFailure nginx's messages for a bad name, part or total
 */
export function readSplitClients<V extends ScriptView>(d: Directive, vars: VariableRegistry<V>): SplitClientsDef<V> {
  const source = vars.value(d.args[0]!, d.loc);
  const name = d.args[1]!;
  if (name.length < 2 || !name.startsWith('$')) fail(`invalid variable name "${name}"`);
  const def: SplitClientsDef<V> = { source, parts: [], bound: undefined };
  vars.declare(name.slice(1), { kind: 'lazy', compute: (r) => def.bound!(r) });
  const read: { percent: number; value: string }[] = [];
  let carried = d.args[0]!;
  for (const e of d.block ?? []) {
    if (e.kind === 'error') throw e.error;
    try {
      read.push(readPart(e, carried));
      carried = e.args[0] ?? carried;
    } catch (err) {
      if (err instanceof DirectiveFailure && !err.loc) throw new DirectiveFailure(err.text, err.kind, e.loc);
      throw err;
    }
  }
  // ngx_conf_split_clients_block: shares in 1/10000, summed in uint32; `*` fills up to 100%
  let sum = 0;
  let last = 0n;
  for (const p of read) {
    sum = p.percent ? (sum + p.percent) >>> 0 : 10000;
    // reported where nginx is once the block is read: its closing brace
    if (sum > 10000) fail('percent total is greater than 100%', { file: d.loc.file, line: d.closeLine ?? d.loc.line });
    if (p.percent) {
      last = (last + (BigInt(p.percent) * 0xffffffffn) / 10000n) & 0xffff_ffffn;
      def.parts.push({ bound: Number(last), value: p.value });
    } else def.parts.push({ bound: 0, value: p.value });
  }
  return def;
}

export const splitClientsDirectives: readonly DirectiveSpec[] = [
  {
    name: 'split_clients', module: SPLIT_CLIENTS, contexts: ['http'], args: ['TAKE2'], block: 'raw', effect: 'runtime',
    set: (d, cx) => void cx.scope.registry(splitClientsBlocks).push(readSplitClients(d, cx.scope.variables)),
  },
];

/** Binds a split_clients block: the first part whose bound is above the hash, or `*`; else the empty value. */
export function bindSplitClients<V extends ScriptView>(def: SplitClientsDef<V>, vars: VariableRegistry<V>): void {
  const source = vars.bind(def.source);
  const parts = def.parts;
  def.bound = (r) => {
    const hash = murmurHash2(source.evaluate(r));
    for (const p of parts) if (hash < p.bound || p.bound === 0) return p.value;
    return '';
  };
}
