/**
 * Directive specs, configuration slots and the generic value parsers.
 *
 * As in nginx (`ngx_command_t` in `src/core/ngx_conf_file.h`), a directive is
 * data: its name, module, contexts, argument bits and a setter. Most setters
 * are generic (`ngx_conf_set_flag_slot`, `…_msec_slot`, `…_size_slot`): they
 * parse the argument and store it in a slot of the current level. Each level
 * (http, server, location, if) keeps only what was set in it; a `ConfChain`
 * reads a slot through the enclosing levels, which is nginx's merge
 * `child ?? parent ?? default` (`ngx_conf_merge_*_value`).
 */
import { cString } from '../c-string.js';
import type { Directive, SourceLoc } from '../parser/ast.js';
import { DirectiveFailure, fail } from './failure.js';
import type { ArgFlag, Context } from './flags.js';
import type { ConfigScope } from './scope.js';
import type { ValueSource } from './variables.js';

export { DirectiveFailure, fail } from './failure.js';

/** A single-valued setting. `inherit: false` slots are read from their own level only. */
export interface Slot<T> {
  readonly kind: 'single';
  readonly key: string;
  readonly inherit: boolean;
  readonly defaultValue: T;
}

/**
 * A list setting (`proxy_set_header`, `add_header`, `allow`/`deny`): every
 * directive at a level appends, and a level that has any entry replaces the
 * whole list of the levels above it, nginx's rule for array directives.
 */
export interface ListSlot<T> {
  readonly kind: 'list';
  readonly key: string;
  readonly inherit: boolean;
  /** Carries the entry type; never set. */
  readonly entryType?: T;
}

/** Declares a single-valued slot. */
export function slot<T>(key: string, defaultValue: T, inherit = true): Slot<T> {
  return { kind: 'single', key, inherit, defaultValue };
}

/** Declares a list slot. */
export function listSlot<T>(key: string, inherit = true): ListSlot<T> {
  return { kind: 'list', key, inherit };
}

interface Entry<T> {
  readonly value: T;
  readonly loc: SourceLoc;
}

/** What was set at one configuration level. */
export class LevelConf {
  private readonly singles = new Map<Slot<unknown>, Entry<unknown>>();
  private readonly lists = new Map<ListSlot<unknown>, Entry<unknown>[]>();

  /** Stores a value. @throws DirectiveFailure `is duplicate` when the slot is already set here. */
  set<T>(s: Slot<T>, value: T, loc: SourceLoc): void {
    if (this.singles.has(s as Slot<unknown>)) throw new DirectiveFailure('is duplicate');
    this.singles.set(s as Slot<unknown>, { value, loc });
  }

  /** Stores a value, replacing one set earlier at this level. */
  replace<T>(s: Slot<T>, value: T, loc: SourceLoc): void {
    this.singles.set(s as Slot<unknown>, { value, loc });
  }

  /** Appends an entry to a list slot. */
  append<T>(s: ListSlot<T>, value: T, loc: SourceLoc): void {
    const list = this.lists.get(s as ListSlot<unknown>);
    if (list) list.push({ value, loc });
    else this.lists.set(s as ListSlot<unknown>, [{ value, loc }]);
  }

  /** The entry set at this level, if any. */
  own<T>(s: Slot<T>): Entry<T> | undefined {
    return this.singles.get(s as Slot<unknown>) as Entry<T> | undefined;
  }

  /** Every entry set at this level, by slot (for `ConfChain`'s merge). */
  ownSingles(): ReadonlyMap<Slot<unknown>, Entry<unknown>> {
    return this.singles;
  }

  /** Every list set at this level, by slot (for `ConfChain`'s merge). */
  ownLists(): ReadonlyMap<ListSlot<unknown>, readonly Entry<unknown>[]> {
    return this.lists;
  }

  /** The list entries set at this level, if any. */
  ownList<T>(s: ListSlot<T>): readonly Entry<T>[] | undefined {
    return this.lists.get(s as ListSlot<unknown>) as Entry<T>[] | undefined;
  }

  /** The slots set at this level, single and list (for `jinx explain`, which shows where each setting in effect came from). */
  slots(): (Slot<unknown> | ListSlot<unknown>)[] {
    return [...this.singles.keys(), ...this.lists.keys()];
  }
}

/**
 * A level together with the levels enclosing it, innermost first; reading a
 * slot through it is nginx's merge of that setting. The first read makes the
 * merge of the entries set at this level and above (what the enclosing chain
 * merged, this level's own entries over it; the enclosing chain's map itself
 * when this level sets nothing), so a read is one map lookup at any depth.
 * Levels are not changed once checked. The map holds only what is set, a
 * few entries a level, not every slot read.
 */
export class ConfChain {
  private singles: ReadonlyMap<Slot<unknown>, Entry<unknown>> | undefined;
  private lists: ReadonlyMap<ListSlot<unknown>, readonly Entry<unknown>[]> | undefined;
  /** While a `LevelMerge` runs its merge on this chain: the slots read, and whether one read found a value set at this level only (`inherit: false`). */
  private recording: { readonly slots: Set<Slot<unknown> | ListSlot<unknown>>; ownOnly: boolean } | undefined;
  /** What each `LevelMerge` made at this level, at its index. */
  readonly mergeRecords: (MergeRecord | undefined)[] = [];
  private ownSlotList: readonly (Slot<unknown> | ListSlot<unknown>)[] | undefined;

  constructor(
    readonly level: LevelConf,
    readonly parent: ConfChain | undefined,
  ) {}

  private mergedSingles(): ReadonlyMap<Slot<unknown>, Entry<unknown>> {
    if (this.singles) return this.singles;
    const above = this.parent?.mergedSingles();
    this.singles = mergeOver(above, this.level.ownSingles());
    return this.singles;
  }

  private mergedLists(): ReadonlyMap<ListSlot<unknown>, readonly Entry<unknown>[]> {
    if (this.lists) return this.lists;
    const above = this.parent?.mergedLists();
    this.lists = mergeOver(above, this.level.ownLists());
    return this.lists;
  }

  private find<T>(s: Slot<T>): Entry<T> | undefined {
    if (this.recording) this.recorded(s, !s.inherit && this.level.own(s) !== undefined);
    if (!s.inherit) return this.level.own(s);
    return this.mergedSingles().get(s as Slot<unknown>) as Entry<T> | undefined;
  }

  /** The slots set at this level, single and list. */
  ownSlots(): readonly (Slot<unknown> | ListSlot<unknown>)[] {
    this.ownSlotList ??= this.level.slots();
    return this.ownSlotList;
  }

  private recorded(s: Slot<unknown> | ListSlot<unknown>, ownOnly: boolean): void {
    this.recording!.slots.add(s);
    if (ownOnly) this.recording!.ownOnly = true;
  }

  /**
   * Runs `merge` on this chain and returns its result with the slots it read
   * (`LevelMerge`); `ownOnly`: a slot read was one that does not inherit
   * and is set at this level.
   */
  recordReads<T>(merge: (c: ConfChain) => T): { readonly value: T; readonly slots: ReadonlySet<Slot<unknown> | ListSlot<unknown>>; readonly ownOnly: boolean } {
    const recording = { slots: new Set<Slot<unknown> | ListSlot<unknown>>(), ownOnly: false };
    this.recording = recording;
    try {
      return { value: merge(this), slots: recording.slots, ownOnly: recording.ownOnly };
    } finally {
      this.recording = undefined;
    }
  }

  /** The merged value of a slot. */
  get<T>(s: Slot<T>): T {
    const e = this.find(s);
    return e ? e.value : s.defaultValue;
  }

  /** Whether a slot is set at this level or, when it inherits, above it. */
  has<T>(s: Slot<T>): boolean {
    return this.find(s) !== undefined;
  }

  /** Where the merged value of a slot was set. */
  locOf<T>(s: Slot<T>): SourceLoc | undefined {
    return this.find(s)?.loc;
  }

  /** The merged entries of a list slot: those of the innermost level that has any. */
  listEntries<T>(s: ListSlot<T>): readonly Entry<T>[] {
    if (this.recording) this.recorded(s, !s.inherit && this.level.ownList(s) !== undefined);
    if (!s.inherit) return this.level.ownList(s) ?? [];
    return (this.mergedLists().get(s as ListSlot<unknown>) ?? []) as readonly Entry<T>[];
  }

  /** The merged values of a list slot. */
  list<T>(s: ListSlot<T>): T[] {
    return this.listEntries(s).map((e) => e.value);
  }

  /** The values of a list slot set at this level alone, unmerged (a `LevelMerge` that reads them makes a result for this level only). */
  ownList<T>(s: ListSlot<T>): T[] {
    if (this.recording) this.recorded(s, true);
    return (this.level.ownList(s) ?? []).map((e) => e.value);
  }
}

/** What a `LevelMerge` made at a level: the result, and the slots its merge read there. */
interface MergeRecord {
  readonly value: unknown;
  readonly slots: ReadonlySet<Slot<unknown> | ListSlot<unknown>>;
  /** A slot read does not inherit and was set at that level: the result is that level's only. */
  readonly ownOnly: boolean;
}

/** How many `LevelMerge`s there are: each has its place in a chain's `mergeRecords`. */
let levelMerges = 0;

/**
 * One module's merge of every level (`merge_loc_conf`), made once for a
 * level and the levels below it that set none of the slots it read: nginx's
 * merge is per module, and a `server` that sets only `listen` and
 * `server_name`, or a `location` with only a `return`, has the same gzip
 * (or headers, or charset …) settings as the level it is in, so it gets
 * the same object. `merge` must read the level only through the chain it is
 * given (`get`, `has`, `locOf`, `list`, `listEntries`; not `level` or
 * `parent`), and give the same result for the same values read (and the
 * same context), without warnings or errors: a function of the settings
 * read. What it keeps for the start (a temp path, a log file) it keeps
 * once, for the level it ran for: the levels that share its result need
 * the same. Declared once, at module level (the records are kept in the chains,
 * which are made for each compile).
 */
export class LevelMerge<T, X> {
  private readonly index = levelMerges++;

  constructor(private readonly merge: (c: ConfChain, context: X) => T) {}

  /** The merge of the settings of `chain`'s level. */
  of(chain: ConfChain, context: X): T {
    const known = chain.mergeRecords[this.index];
    if (known) return known.value as T;
    // the levels above without a record, innermost first: made outermost first, without recursion; never the
    // top of the tree (main), which is merged only when asked for: modules merge from their block (`http`) down,
    // and what a merge keeps for the start (a default access log, temp path) must not be kept for main
    const path: ConfChain[] = [chain];
    let top = chain.parent;
    for (; top?.parent && !top.mergeRecords[this.index]; top = top.parent) path.push(top);
    let above = top?.mergeRecords[this.index];
    for (let i = path.length - 1; i >= 0; i--) {
      const c = path[i]!;
      const record = above && !above.ownOnly && !setsAny(c.ownSlots(), above.slots) ? above : c.recordReads((cc) => this.merge(cc, context));
      c.mergeRecords[this.index] = record;
      above = record;
    }
    return above!.value as T;
  }
}

/** Whether one of `own` is in `slots`. */
function setsAny(own: readonly (Slot<unknown> | ListSlot<unknown>)[], slots: ReadonlySet<Slot<unknown> | ListSlot<unknown>>): boolean {
  for (let i = 0; i < own.length; i++) if (slots.has(own[i]!)) return true;
  return false;
}

/**
 * `own` over `above`: `above` itself when `own` sets no slot that inherits,
 * a new map otherwise. A slot that does not inherit (`listen`,
 * `server_name`) is read from its level only, never from a merged map, so it
 * is left out: a `server` that sets only those shares the merge of `http`.
 */
function mergeOver<K extends { readonly inherit: boolean }, V>(above: ReadonlyMap<K, V> | undefined, own: ReadonlyMap<K, V>): ReadonlyMap<K, V> {
  let merged: Map<K, V> | undefined;
  for (const [k, v] of own) {
    if (!k.inherit) continue;
    merged ??= new Map(above);
    merged.set(k, v);
  }
  return merged ?? above ?? new Map<K, V>();
}

/** How a directive's arguments name a host to resolve (`DirectiveSpec.resolves`). */
export type HostArgument = 'url' | 'address' | 'server' | 'name';

/** Whether a directive is acted on by jinx or only accepted. */
export type Effect = 'runtime' | 'none';

/** The nginx module a directive belongs to, as nginx names it (`ngx_http_proxy_module`). */
export type ModuleName = string;

/** What a block directive opens. */
export interface ChildBlock {
  readonly context: Context;
  readonly level: LevelConf;
}

/** What a setter may use besides the directive. */
export interface SetContext {
  /** The level the directive is in. */
  readonly level: LevelConf;
  /** The context the directive is in. */
  readonly context: Context;
  /** The directive that opened the current block (`location`, `if`, `server` …), if any. */
  readonly parentDirective: Directive | undefined;
  /** The registries shared by the whole configuration (variables, upstreams, maps …). */
  readonly scope: ConfigScope;
  /** The innermost enclosing level of `context` (this one included), as read so far; undefined outside one. */
  enclosing(context: Context): LevelConf | undefined;
  /**
   * Reports a warning at the directive's place, or at `loc` (nginx's
   * `ngx_conf_log_error(NGX_LOG_WARN …)`); `loc: null` for one without a
   * place (`ngx_log_error`).
   */
  warn(text: string, code: string, loc?: SourceLoc | null): void;
}

/** A directive, declared once as data. */
export interface DirectiveSpec {
  readonly name: string;
  readonly module: ModuleName;
  readonly contexts: readonly Context[];
  readonly args: readonly ArgFlag[];
  /** `context`: the block holds directives of `ChildBlock.context`; `raw`: the setter reads the block itself. */
  readonly block?: 'context' | 'raw';
  readonly effect: Effect;
  /** Why a directive has no effect in jinx, for `jinx lint` and the README. */
  readonly note?: string;
  /** A dynamic module that must be loaded with `load_module` for the directive to exist. */
  readonly dynamicModule?: string;
  /**
   * A host name the directive's arguments give, resolved before the check
   * (nginx resolves names while it reads the configuration): `url` in a
   * lone `http[s]://HOST[:PORT]/…`, `address` a lone `HOST[:PORT]`, `server`
   * `HOST[:PORT]` before parameters, `name` a lone name that is not a
   * network. A lone value with variables, a `unix:` path or an IP address
   * names none.
   */
  readonly resolves?: HostArgument;
  /**
   * Validates and stores the directive. Returns the child block for
   * `block: 'context'` directives. @throws DirectiveFailure
   */
  readonly set: (d: Directive, cx: SetContext) => ChildBlock | void;
  /**
   * For `block: 'context'` directives: checks made once the block has been
   * read, as nginx's block handlers do after `ngx_conf_parse` returns
   * (`no "listen" is defined for server` in `ngx_stream_core_server`).
   * @throws DirectiveFailure
   */
  readonly close?: (d: Directive, cx: SetContext, block: ChildBlock) => void;
}

// ---------------------------------------------------------------------------
// Value parsers: nginx's ngx_atoi, ngx_parse_size, ngx_parse_offset, ngx_parse_time
// (src/core/ngx_string.c, src/core/ngx_parse.c) with their 64-bit limits. Every
// number a directive takes goes through one of these; the arithmetic is done on
// BigInt so that the limits are nginx's to the unit, and the result is returned
// as a number (exact up to 2^53, the nearest double above).

/** `NGX_MAX_INT_T_VALUE`, and on 64-bit `NGX_MAX_SIZE_T_VALUE` and `NGX_MAX_OFF_T_VALUE` too. */
const MAX_INT_T = 0x7fff_ffff_ffff_ffffn;

/**
 * `ngx_atoi` (and `ngx_atosz`, `ngx_atoof`, the same on 64-bit): one or more
 * decimal digits, nothing else, at most `NGX_MAX_INT_T_VALUE`.
 */
function atoi(text: string): bigint | undefined {
  if (!/^[0-9]+$/.test(text)) return undefined;
  const v = BigInt(text);
  return v > MAX_INT_T ? undefined : v;
}

const TIME_UNITS: Readonly<Record<string, { readonly step: number; readonly scale: bigint }>> = {
  y: { step: 1, scale: 60n * 60n * 24n * 365n },
  M: { step: 2, scale: 60n * 60n * 24n * 30n },
  w: { step: 3, scale: 60n * 60n * 24n * 7n },
  d: { step: 4, scale: 60n * 60n * 24n },
  h: { step: 5, scale: 60n * 60n },
  m: { step: 6, scale: 60n },
  s: { step: 7, scale: 1n },
};

/**
 * nginx's `ngx_parse_time`: `1y 2M 3w 4d 5h 6m 7s 8ms`, units in that order,
 * a bare number meaning milliseconds (`isSec` false, where `y` is refused)
 * or seconds (`ms` refused). Returns milliseconds or seconds, or undefined
 * for an invalid value or one past `NGX_MAX_INT_T_VALUE`.
 */
export function parseTime(text: string, isSec: boolean): number | undefined {
  // steps of ngx_parse_time: start, year … sec (TIME_UNITS), msec, last
  const [START, MONTH, SEC, MSEC, LAST] = [0, 2, 7, 8, 9];
  let step = isSec ? START : MONTH;
  let value = 0n;
  let total = 0n;
  let valid = false;
  let i = 0;
  while (i < text.length) {
    const ch = text[i++]!;
    if (ch >= '0' && ch <= '9') {
      value = value * 10n + BigInt(ch.charCodeAt(0) - 48);
      if (value > MAX_INT_T) return undefined;
      valid = true;
      continue;
    }
    let scale: bigint;
    if (ch === 'm' && text[i] === 's') {
      if (isSec || step >= MSEC) return undefined;
      i++;
      [step, scale] = [MSEC, 1n];
    } else if (ch === ' ') {
      if (step >= SEC) return undefined;
      [step, scale] = [LAST, 1n];
    } else {
      const unit = TIME_UNITS[ch];
      // `y` is the only unit allowed at the start step; the others must follow a larger one
      if (!unit || (unit.step === 1 ? step > START : step >= unit.step)) return undefined;
      [step, scale] = [unit.step, unit.scale];
    }
    let max = MAX_INT_T / scale;
    if (step !== MSEC && !isSec) {
      scale *= 1000n;
      max /= 1000n;
    }
    if (value > max) return undefined;
    value *= scale;
    if (total > MAX_INT_T - value) return undefined;
    total += value;
    value = 0n;
    while (text[i] === ' ') i++;
  }
  if (!valid) return undefined;
  if (!isSec) {
    if (value > MAX_INT_T / 1000n) return undefined;
    value *= 1000n;
  }
  if (total > MAX_INT_T - value) return undefined;
  return Number(total + value);
}

/** A number with an optional unit letter from `units` (scale by letter), at most `NGX_MAX_INT_T_VALUE` once scaled. */
function parseScaled(text: string, units: Readonly<Record<string, bigint>>): number | undefined {
  const scale = units[text[text.length - 1] ?? ''];
  const v = atoi(scale === undefined ? text : text.slice(0, -1));
  if (v === undefined) return undefined;
  if (scale === undefined) return Number(v);
  return v > MAX_INT_T / scale ? undefined : Number(v * scale);
}

const SIZE_UNITS: Readonly<Record<string, bigint>> = { k: 1024n, K: 1024n, m: 1024n ** 2n, M: 1024n ** 2n };
const OFFSET_UNITS: Readonly<Record<string, bigint>> = { ...SIZE_UNITS, g: 1024n ** 3n, G: 1024n ** 3n };

/** nginx's `ngx_parse_size`: a number with an optional `k`/`K` or `m`/`M` suffix, at most `NGX_MAX_SIZE_T_VALUE` bytes; bytes or undefined. */
export function parseSize(text: string): number | undefined {
  return parseScaled(text, SIZE_UNITS);
}

/** nginx's `ngx_parse_offset`: like a size, also with `g`/`G`, at most `NGX_MAX_OFF_T_VALUE` bytes; bytes or undefined. */
export function parseOffset(text: string): number | undefined {
  return parseScaled(text, OFFSET_UNITS);
}

/** nginx's `ngx_atoi` for a whole argument: a decimal integer of at most `NGX_MAX_INT_T_VALUE`, or undefined. */
export function parseNumber(text: string): number | undefined {
  const v = atoi(text);
  return v === undefined ? undefined : Number(v);
}

// ---------------------------------------------------------------------------
// Generic setters, nginx's ngx_conf_set_*_slot.

type Setter = DirectiveSpec['set'];

/** `ngx_conf_set_flag_slot`: `on` or `off` (any case). */
export function flagSetter(s: Slot<boolean>): Setter {
  return (d, cx) => {
    // nginx compares with ngx_strcasecmp and prints with %s: the value ends at a NUL byte
    const v = cString(d.args[0]!).toLowerCase();
    if (cx.level.own(s)) throw new DirectiveFailure('is duplicate');
    if (v !== 'on' && v !== 'off') {
      fail(`invalid value "${cString(d.args[0]!)}" in "${d.name}" directive, it must be "on" or "off"`);
    }
    cx.level.set(s, v === 'on', d.loc);
  };
}

/**
 * The longest timer node keeps: `setTimeout` fires at once (after 1 ms) for a
 * longer delay, so a longer time is kept as this one (about 24.8 days).
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * A time in milliseconds as `ngx_parse_time(…, 0)` reads it (bare numbers in
 * milliseconds), held to `MAX_TIMER_MS`: a timeout of `30d` waits 24.8 days
 * rather than firing at once. Undefined for an invalid time.
 */
export function parseMsec(text: string): number | undefined {
  const ms = parseTime(text, false);
  return ms === undefined ? undefined : Math.min(ms, MAX_TIMER_MS);
}

/** `ngx_conf_set_msec_slot`: a time, bare numbers in milliseconds; stores milliseconds (at most `MAX_TIMER_MS`). */
export function msecSetter(s: Slot<number>): Setter {
  return (d, cx) => {
    if (cx.level.own(s)) throw new DirectiveFailure('is duplicate');
    const v = parseMsec(d.args[0]!);
    if (v === undefined) throw new DirectiveFailure('invalid value');
    cx.level.set(s, v, d.loc);
  };
}

/** `ngx_conf_set_sec_slot`: a time, bare numbers in seconds; stores seconds. */
export function secSetter(s: Slot<number>): Setter {
  return (d, cx) => {
    if (cx.level.own(s)) throw new DirectiveFailure('is duplicate');
    const v = parseTime(d.args[0]!, true);
    if (v === undefined) throw new DirectiveFailure('invalid value');
    cx.level.set(s, v, d.loc);
  };
}

/** `ngx_conf_set_size_slot`: a size in bytes (slots whose unset value is `undefined` too). */
export function sizeSetter(s: Slot<number> | Slot<number | undefined>): Setter {
  return (d, cx) => {
    if (cx.level.own(s)) throw new DirectiveFailure('is duplicate');
    const v = parseSize(d.args[0]!);
    if (v === undefined) throw new DirectiveFailure('invalid value');
    cx.level.set(s as Slot<number | undefined>, v, d.loc);
  };
}

/** `ngx_conf_set_off_slot`: an offset in bytes (`g` allowed). */
export function offSetter(s: Slot<number>): Setter {
  return (d, cx) => {
    if (cx.level.own(s)) throw new DirectiveFailure('is duplicate');
    const v = parseOffset(d.args[0]!);
    if (v === undefined) throw new DirectiveFailure('invalid value');
    cx.level.set(s, v, d.loc);
  };
}

/** `ngx_conf_set_num_slot`: a non-negative integer. */
export function numSetter(s: Slot<number>): Setter {
  return (d, cx) => {
    if (cx.level.own(s)) throw new DirectiveFailure('is duplicate');
    const v = parseNumber(d.args[0]!);
    if (v === undefined) throw new DirectiveFailure('invalid number');
    cx.level.set(s, v, d.loc);
  };
}

/** `ngx_conf_set_str_slot`: the argument as written. */
export function strSetter(s: Slot<string> | Slot<string | undefined>): Setter {
  return (d, cx) => {
    if (cx.level.own(s)) throw new DirectiveFailure('is duplicate');
    cx.level.set(s as Slot<string | undefined>, d.args[0]!, d.loc);
  };
}

/** `ngx_http_set_complex_value_slot`: a string with variables, split when read and bound after the configuration is. */
export function valueSetter(s: Slot<ValueSource | undefined>): Setter {
  return (d, cx) => {
    if (cx.level.own(s)) throw new DirectiveFailure('is duplicate');
    cx.level.set(s, cx.scope.variables.value(d.args[0]!, d.loc), d.loc);
  };
}

/**
 * `ngx_http_set_complex_value_size_slot`: a size, or a string with
 * variables whose value is parsed as a size when the request needs it.
 * @throws DirectiveFailure `invalid value` for a size without variables that does not parse
 */
export function valueSizeSetter(s: Slot<ValueSource | undefined>): Setter {
  return (d, cx) => {
    if (cx.level.own(s)) throw new DirectiveFailure('is duplicate');
    const v = cx.scope.variables.value(d.args[0]!, d.loc);
    if (!d.args[0]!.includes('$') && parseSize(d.args[0]!) === undefined) throw new DirectiveFailure('invalid value');
    cx.level.set(s, v, d.loc);
  };
}

/** `ngx_conf_set_enum_slot`: one of `values` (any case); stores the lowercase name. */
export function enumSetter<T extends string>(s: Slot<T>, values: readonly T[]): Setter {
  return (d, cx) => {
    if (cx.level.own(s)) throw new DirectiveFailure('is duplicate');
    const v = values.find((x) => x.toLowerCase() === d.args[0]!.toLowerCase());
    // printed with %s: up to a NUL byte
    if (v === undefined) fail(`invalid value "${cString(d.args[0]!)}"`);
    cx.level.set(s, v, d.loc);
  };
}

/**
 * `ngx_conf_set_bitmask_slot`: several of `values` (any case); a repeated
 * value is nginx's warning `duplicate value "X"`.
 */
export function bitmaskSetter<T extends string>(s: Slot<readonly T[]>, values: readonly T[]): Setter {
  return (d, cx) => {
    const own = cx.level.own(s);
    const picked: T[] = own ? [...own.value] : [];
    for (const arg of d.args) {
      const v = values.find((x) => x.toLowerCase() === arg.toLowerCase());
      if (v === undefined) fail(`invalid value "${cString(arg)}"`);
      if (picked.includes(v)) cx.warn(`duplicate value "${arg}"`, 'duplicate-value');
      else picked.push(v);
    }
    cx.level.replace(s, picked, d.loc);
  };
}

/** A temp path as set by `PATH [level1 [level2 [level3]]]`. */
export interface TempPathValue {
  readonly dir: string;
  readonly levels: readonly number[];
}

/**
 * `ngx_conf_set_path_slot`: a directory and up to three level lengths of 1
 * or 2 digits. The directory resolves against the prefix.
 */
export function pathSetter(s: Slot<TempPathValue | undefined>, fullPath: (p: string) => string): Setter {
  return (d, cx) => {
    if (cx.level.own(s)) throw new DirectiveFailure('is duplicate');
    const levels = d.args.slice(1).map((a) => {
      const n = parseNumber(a);
      if (!n) throw new DirectiveFailure('invalid value');
      return n;
    });
    if (levels.reduce((sum, l) => sum + l + 1, 0) > 10 + levels.length) throw new DirectiveFailure('invalid value');
    let dir = fullPath(d.args[0]!);
    if (dir.length > 1 && dir.endsWith('/')) dir = dir.slice(0, -1);
    cx.level.set(s, { dir, levels }, d.loc);
  };
}

/** `ngx_conf_set_bufs_slot`: `NUMBER SIZE`, both positive. */
export function bufsSetter(s: Slot<{ readonly count: number; readonly sizeBytes: number }>): Setter {
  return (d, cx) => {
    if (cx.level.own(s)) throw new DirectiveFailure('is duplicate');
    const count = parseNumber(d.args[0]!);
    if (!count) throw new DirectiveFailure('invalid value');
    const sizeBytes = parseSize(d.args[1]!);
    if (!sizeBytes) throw new DirectiveFailure('invalid value');
    cx.level.set(s, { count, sizeBytes }, d.loc);
  };
}

/** A MIME type list (`gzip_types`, `charset_types`): lowercase types, or `*` for every type. */
export type MimeTypeSet = ReadonlySet<string> | '*';

/**
 * `ngx_http_types_slot` (`src/http/ngx_http.c`): the first directive at a
 * level starts the list with the module's `defaults`; a type listed twice is
 * the warning `duplicate MIME type "X"`; `*` stands for every type and ends
 * the list (later directives at the level change nothing). Unset, a level
 * inherits its parent's list (`ngx_http_merge_types`); read it with
 * `mimeTypes(chain.get(slot), defaults)`.
 */
export function typesSetter(s: Slot<MimeTypeSet | undefined>, defaults: readonly string[]): Setter {
  return (d, cx) => {
    const own = cx.level.own(s)?.value;
    if (own === '*') return;
    const types = new Set(own ?? defaults);
    for (const arg of d.args) {
      if (arg === '*') {
        cx.level.replace(s, '*', d.loc);
        return;
      }
      const type = arg.toLowerCase();
      if (types.has(type)) cx.warn(`duplicate MIME type "${type}"`, 'duplicate-mime-type');
      types.add(type);
    }
    cx.level.replace(s, types, d.loc);
  };
}

/** `ngx_conf_set_str_array_slot`, `ngx_conf_set_keyval_slot`: every directive appends; never a duplicate. */
export function arraySetter(s: ListSlot<readonly string[]>): Setter {
  return (d, cx) => cx.level.append(s, d.args, d.loc);
}

/**
 * `ngx_conf_check_num_bounds` (`src/core/ngx_conf_file.c`), the post handler
 * of number slots with bounds (`gzip_comp_level` 1..9): `value must be between
 * LOW and HIGH`, or `value must be equal to or greater than LOW` without a high bound.
 */
export function numBounds(low: number, high?: number): PostCheck {
  return (v) => {
    if (high === undefined && v < low) fail(`value must be equal to or greater than ${low}`);
    if (high !== undefined && (v < low || v > high)) fail(`value must be between ${low} and ${high}`);
  };
}

// ---------------------------------------------------------------------------
// Directives jinx checks but does not act on.

/** A check of the number a slot setter stored: nginx's `cmd->post` handler. */
export type PostCheck = (value: number, d: Directive, cx: SetContext) => void;

/**
 * Which nginx setter (`ngx_command_t.set`) a directive with no effect in jinx
 * has, so that its arguments are checked as nginx checks them:
 *
 * - `flag` `msec` `sec` `size` `off` `num` `str` `path` `bufs` `enum` `bitmask`:
 *   `ngx_conf_set_*_slot`, each with a slot of the directive's own, so that a
 *   second one at the same level is `"X" directive is duplicate`; `num` and
 *   `size` may have a post handler (`numBounds`, …);
 * - `array`: `ngx_conf_set_str_array_slot` / `…_keyval_slot`, appending;
 * - `value`: `ngx_http_set_complex_value_slot`, a string with variables;
 * - `value-size`: `ngx_http_set_complex_value_size_slot`, a size or a string with variables;
 * - `custom`: a handler of the module's own; `parse` validates and returns the value
 *   to store, after the usual duplicate check (in `into` when the compile step reads it);
 * - `repeatable`: a handler of the module's own that may be given several times
 *   at a level (or checks duplicates itself).
 */
export type Rule =
  | { readonly kind: 'flag' | 'msec' | 'sec' | 'off' | 'str' | 'path' | 'bufs' | 'array' | 'value' | 'value-size' }
  | { readonly kind: 'num' | 'size'; readonly post?: PostCheck }
  | { readonly kind: 'enum' | 'bitmask'; readonly values: readonly string[] }
  | { readonly kind: 'custom'; readonly parse: (d: Directive, cx: SetContext) => unknown; readonly slot?: Slot<unknown> }
  | { readonly kind: 'repeatable'; readonly parse: (d: Directive, cx: SetContext) => void };

/** The rules, by name: `rule.flag`, `rule.num(numBounds(1, 9))`, `rule.enumOf('on', 'off')` … */
export const rule = {
  flag: { kind: 'flag' },
  msec: { kind: 'msec' },
  sec: { kind: 'sec' },
  off: { kind: 'off' },
  str: { kind: 'str' },
  path: { kind: 'path' },
  bufs: { kind: 'bufs' },
  array: { kind: 'array' },
  value: { kind: 'value' },
  valueSize: { kind: 'value-size' },
  num: (post?: PostCheck): Rule => ({ kind: 'num', post }),
  size: (post?: PostCheck): Rule => ({ kind: 'size', post }),
  enumOf: (...values: string[]): Rule => ({ kind: 'enum', values }),
  bitmaskOf: (...values: string[]): Rule => ({ kind: 'bitmask', values }),
  custom: <T>(parse: (d: Directive, cx: SetContext) => T, into?: Slot<T | undefined>): Rule =>
    ({ kind: 'custom', parse, slot: into as Slot<unknown> | undefined }),
  repeatable: (parse: (d: Directive, cx: SetContext) => void): Rule => ({ kind: 'repeatable', parse }),
} as const satisfies Record<string, Rule | ((...a: never[]) => Rule)>;

/**
 * The setter of a directive that jinx checks and does not act on: the
 * generic setter named by `r`, on a slot of the directive's own (keyed by
 * `name`; a custom rule's `into` when the compile step reads the value), so
 * that a duplicate is found as nginx finds it.
 */
export function ruleSetter(name: string, r: Rule): Setter {
  const s = slot<unknown>(name, undefined);
  const any = s as Slot<never>;
  const withPost = (set: Setter, post: PostCheck | undefined): Setter => (post
    ? (d, cx) => {
        set(d, cx);
        post(cx.level.own(s)!.value as number, d, cx);
      }
    : set);
  switch (r.kind) {
    case 'flag': return flagSetter(any);
    case 'msec': return msecSetter(any);
    case 'sec': return secSetter(any);
    case 'off': return offSetter(any);
    case 'str': return strSetter(any);
    case 'path': return (d, cx) => pathSetter(any, (p) => cx.scope.fullPath(p))(d, cx);
    case 'bufs': return bufsSetter(any);
    case 'num': return withPost(numSetter(any), r.post);
    case 'size': return withPost(sizeSetter(any), r.post);
    case 'enum': return enumSetter(any, r.values as never[]);
    case 'bitmask': return bitmaskSetter(any, r.values as never[]);
    case 'array': return arraySetter(listSlot<readonly string[]>(name));
    case 'value':
      return valueSetter(any);
    case 'value-size':
      return valueSizeSetter(any);
    case 'custom': {
      const into = r.slot ?? s;
      return (d, cx) => {
        if (cx.level.own(into)) throw new DirectiveFailure('is duplicate');
        cx.level.set(into, r.parse(d, cx), d.loc);
      };
    }
    case 'repeatable':
      return r.parse;
  }
}

/**
 * A directive jinx reads, checks as nginx does (by `r`) and does not act
 * on; `note` says why, for `jinx lint` and the README.
 */
export function noEffect(base: Omit<DirectiveSpec, 'effect' | 'set'>, r: Rule): DirectiveSpec {
  return { ...base, effect: 'none', set: ruleSetter(base.name, r) };
}
