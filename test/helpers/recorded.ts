/**
 * nginx's answers recorded next to the test, so that tests comparing jinx
 * with the reference nginx run on a machine without it.
 *
 * A test file `test/DIR/FOO.test.ts` keeps its recordings in
 * `test/DIR/FOO.recorded.json`: one entry per question asked of nginx, keyed
 * `TEST FULL NAME #N` (the N-th question of that test; `(setup)` for a
 * question asked in a `before` hook) or by a key the test chooses. An entry
 * holds only what the comparison compares, made machine-independent: the
 * test's ports, temp directories and the checkout's paths become placeholders (`@PORT@`,
 * `@PREFIX@` …, filled in again when the entry is read), and times that
 * change from run to run (HTTP dates, ISO 8601 times, `$msec`, error-log
 * timestamps and pids, ETags' mtimes, debug lines' addresses) become fixed
 * words on both sides.
 *
 * Three modes, chosen by the environment:
 * - nginx installed (default): nginx answers live and the test compares jinx
 *   with that answer; the recording is checked too: a stale one (nginx's live
 *   answer differs from it) is reported with the command that re-records it,
 *   and fails the test where the difference cannot come from timing (the
 *   configuration, a `-t` answer; any difference with
 *   `JINX_STRICT_RECORDINGS=1`); a missing one is reported on stderr.
 * - no nginx (neither /opt/nginx-oracle/nginx nor /usr/sbin/nginx, or
 *   `JINX_NO_NGINX=1`, which makes every helper behave as if neither existed):
 *   the recorded answer stands in for nginx's.
 * - `JINX_RECORD=1` (with nginx installed): each test file run rewrites its
 *   recording from nginx's live answers. Re-record with
 *   `npm run -s record` (every test file) or
 *   `npm run -s record -- test/runtime/FOO.test.ts` (some files).
 */
import { strict as assert } from 'node:assert';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { relative, resolve } from 'node:path';
import { afterEach, beforeEach } from 'node:test';

/** Whether this run rewrites the recordings from nginx's live answers (`JINX_RECORD=1`). */
const RECORDING = process.env.JINX_RECORD === '1';
/** Whether any difference from a recording fails the test, also one in a server's timing-dependent answers (`JINX_STRICT_RECORDINGS=1`). */
const STRICT = process.env.JINX_STRICT_RECORDINGS === '1';

/** The project root, as harness.ts finds it (dist/test/helpers → root). */
const ROOT = new URL('../../..', import.meta.url).pathname.replace(/\/$/, '');

/**
 * Where the checkout and the shared tree (corpus, scenario) lie: a
 * configuration naming a file there is recorded with `@ROOT@` / `@SHARED@`,
 * so that a recording made in one checkout holds in another (CI's).
 */
const TREE: Placeholders = new Map([[resolve(ROOT, '../shared'), '@SHARED@'], [ROOT, '@ROOT@']]);

/** `test/DIR/FOO.test.ts` for the test file this process runs (`dist/test/DIR/FOO.test.js`), or undefined. */
function testSource(): string | undefined {
  const m = /(?:^|\/)dist\/(test\/.+)\.test\.js$/.exec(process.argv[1] ?? '');
  return m ? `${m[1]}.test.ts` : undefined;
}

/** The command that re-records this test file's answers. */
export function recordCommand(): string {
  return `npm run -s record -- ${testSource() ?? 'test/DIR/FOO.test.ts'}`;
}

/** Where this test file's recordings live, absolute. */
function recordingPath(): string {
  const source = testSource();
  if (source === undefined) throw new Error(`recorded answers need a test file under dist/test (running ${process.argv[1]})`);
  return `${ROOT}/${source.replace(/\.test\.ts$/, '.recorded.json')}`;
}

let entries: Record<string, unknown> | undefined;

function store(): Record<string, unknown> {
  if (entries) return entries;
  const path = recordingPath();
  // a recording run starts empty: entries of tests that no longer exist go
  entries = !RECORDING && existsSync(path) ? (JSON.parse(readFileSync(path, 'utf8')) as { entries: Record<string, unknown> }).entries : {};
  return entries;
}

function save(): void {
  const all = store();
  const sorted: Record<string, unknown> = {};
  for (const k of Object.keys(all).sort()) sorted[k] = all[k];
  const about = `nginx's answers for ${testSource()}, read when no reference nginx is installed; re-record with ${recordCommand()}`;
  writeFileSync(recordingPath(), `${JSON.stringify({ about, entries: sorted }, null, 1)}\n`);
}

let currentTest: string | undefined;
const asked = new Map<string, number>();
if (process.env.NODE_TEST_CONTEXT !== undefined && testSource() !== undefined) {
  beforeEach((t) => { currentTest = (t as { fullName?: string }).fullName ?? t.name; });
  afterEach(() => { currentTest = undefined; });
}

/** The key of the next question of the running test: `FULL NAME #N`, `(setup) #N` outside a test. */
export function nextKey(): string {
  const name = currentTest ?? '(setup)';
  const n = (asked.get(name) ?? 0) + 1;
  asked.set(name, n);
  return `${name} #${n}`;
}

/** Literal text → placeholder, e.g. a port → `@PORT@`. */
export type Placeholders = ReadonlyMap<string, string>;

/** Times and run-specific numbers, and the fixed words that replace them on both sides. */
const UNSTABLE: readonly (readonly [RegExp, string])[] = [
  [/\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT\b/g, '[HTTP-DATE]'],
  [/\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)day, \d\d-[A-Z][a-z]{2}-\d\d \d\d:\d\d:\d\d GMT\b/g, '[HTTP-DATE]'],
  [/\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[+-]\d\d:\d\d|Z)/g, '[ISO8601]'],
  [/\b\d{4}\/\d\d\/\d\d \d\d:\d\d:\d\d (\[\w+\]) \d+#\d+: /g, '[DATE] $1 PID#TID: '],
  [/\b1\d{9}\.\d{3}\b/g, '[MSEC]'],
  // addresses in nginx's debug lines (buffers, pools)
  [/\b[0-9A-F]{16}\b/g, '[POINTER]'],
  // the client's port and the event timers' expiry (msec of the clock) in nginx's debug lines
  [/(\] \S+: \*\d+ accept: [\d.]+:)\d+/g, '$1[CLIENT-PORT]'],
  [/(\] \S+: \*\d+ event timer (?:add: \d+: \d+:|del: \d+: ))\d+/g, '$1[TIMER]'],
  // the resolver's random query ids
  [/\bquery id:\d+/g, 'query id:ID'],
  [/\bwrong ident \d+ (in DNS response for \S+), expect \d+/g, 'wrong ident ID $1, expect ID'],
  [/\binvalid UDP DNS response \d+ fl:/g, 'invalid UDP DNS response ID fl:'],
  [/"[0-9a-f]{8}-([0-9a-f]+)"/g, '"[MTIME]-$1"'],
];

/** A string with its times made fixed (see UNSTABLE). */
function stableText(s: string): string {
  let out = s;
  for (const [re, to] of UNSTABLE) out = out.replace(re, to);
  return out;
}

/** Applies `f` to every string of a JSON value, object keys included. */
function mapStrings(v: unknown, f: (s: string) => string): unknown {
  if (typeof v === 'string') return f(v);
  if (Array.isArray(v)) return v.map((x) => mapStrings(x, f));
  if (typeof v === 'object' && v !== null) {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) out[f(k)] = mapStrings(x, f);
    return out;
  }
  return v;
}

/** A value as JSON keeps it (undefined members gone, Buffers as arrays), its times made fixed. */
export function stable<T>(v: T): T {
  return v === undefined ? v : mapStrings(JSON.parse(JSON.stringify(v)), stableText) as T;
}

const escapeRe = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
/** A number matches only as a whole number, a text anywhere. */
const literalRe = (s: string): RegExp => new RegExp(/^\d+$/.test(s) ? `(?<!\\d)${s}(?!\\d)` : escapeRe(s), 'g');

/** Replaces each literal by its placeholder, longest literal first. */
function placehold<T>(v: T, subs: Placeholders): T {
  const order = [...TREE.entries(), ...subs.entries()].sort((a, b) => b[0].length - a[0].length).map(([k, p]) => [literalRe(k), p] as const);
  return mapStrings(v, (s) => order.reduce((acc, [re, p]) => acc.replace(re, p), s)) as T;
}

/** Puts this run's literals back in place of the placeholders. */
function fill<T>(v: T, subs: Placeholders): T {
  const back = [...TREE.entries(), ...subs.entries()].map(([k, p]) => [new RegExp(escapeRe(p), 'g'), k] as const);
  return mapStrings(v, (s) => back.reduce((acc, [re, k]) => acc.replace(re, () => k), s)) as T;
}

/**
 * Placeholders for what a configuration names that changes from run to run:
 * the ports after a host (`127.0.0.1:N`, `[::1]:N`, `$host:N`; `@UPSTREAM_PORTn@`,
 * numbered in order of first appearance after the `named` ones) and temp
 * directories (`@TMPn@`). `named` come first (e.g. the prefix → `@PREFIX@`,
 * a port the configuration names alone → a name of the test's). A path is
 * also replaced where it appears JSON-escaped (`\/tmp\/…`, as PHP prints
 * it), by its placeholder with `/JSON` added.
 */
export function placeholdersOf(text: string, named: readonly (readonly [string, string])[] = []): Map<string, string> {
  const subs = new Map<string, string>(named);
  let ports = 0;
  for (const m of text.matchAll(/(?<=[\w\]$]):(\d{4,5})(?!\d)/g)) {
    if (!subs.has(m[1]!)) subs.set(m[1]!, `@UPSTREAM_PORT${++ports}@`);
  }
  let dirs = 0;
  const tmp = escapeRe(tmpdir());
  for (const m of text.matchAll(new RegExp(`${tmp}/[\\w.-]+`, 'g'))) {
    if (![...subs.keys()].some((k) => m[0].startsWith(k) || k.startsWith(m[0]))) subs.set(m[0], `@TMP${++dirs}@`);
  }
  for (const [literal, placeholder] of [...subs]) {
    if (literal.includes('/')) subs.set(literal.replaceAll('/', '\\/'), placeholder.replace(/@$/, '/JSON@'));
  }
  return subs;
}

const short = (v: unknown): string => {
  const s = JSON.stringify(v) ?? 'undefined';
  return s.length > 200 ? `${s.slice(0, 200)}…` : s;
};

/** Where two JSON values differ, one line each (`PATH: recorded … | live …`). */
function jsonDiff(recorded: unknown, live: unknown, path = ''): string[] {
  if (typeof recorded === 'object' && recorded !== null && typeof live === 'object' && live !== null) {
    const out: string[] = [];
    for (const k of new Set([...Object.keys(recorded), ...Object.keys(live)])) {
      out.push(...jsonDiff((recorded as Record<string, unknown>)[k], (live as Record<string, unknown>)[k], `${path}.${k}`));
    }
    return out;
  }
  if (JSON.stringify(recorded) === JSON.stringify(live)) return [];
  if (typeof recorded === 'string' && typeof live === 'string') {
    // long texts (a configuration, a body) from just before where they part
    let at = 0;
    while (at < recorded.length && recorded[at] === live[at]) at++;
    const from = Math.max(0, at - 40);
    return [`${path || '(value)'} from character ${from}: recorded ${short(recorded.slice(from))} | live ${short(live.slice(from))}`];
  }
  return [`${path || '(value)'}: recorded ${short(recorded)} | live ${short(live)}`];
}

/** The message of a missing or stale recording. */
function reRecord(key: string, why: string): string {
  return `${why} (${relative(ROOT, recordingPath())}, "${key}"); re-record with ${recordCommand()}`;
}

/** The recorded answer for `key`, with this run's literals filled in. */
function recordedAnswer<T>(key: string, subs: Placeholders): T {
  const entry = store()[key];
  assert.ok(entry !== undefined, reRecord(key, 'no recorded nginx answer and no reference nginx installed'));
  return fill(entry, subs) as T;
}

/** Rewrites the recording of `key` (`JINX_RECORD=1`) or checks it against nginx's live answer. */
function checkRecording<T>(key: string, value: T, subs: Placeholders, comparable: (v: T) => unknown): void {
  const recorded = placehold(comparable(value), subs);
  if (RECORDING) {
    store()[key] = recorded;
    save();
    return;
  }
  // configurations with `worker_processes N` (JINX_TEST_WORKERS) are not the recorded ones
  if (process.env.JINX_TEST_WORKERS) return;
  const entry = store()[key];
  if (entry === undefined) {
    // nginx answered, so the test stands; only machines without nginx miss the answer
    console.warn(reRecord(key, 'no recorded nginx answer yet'));
    return;
  }
  const diffs = jsonDiff(entry, recorded);
  if (diffs.length === 0) return;
  const message = `${reRecord(key, 'the recorded nginx answer is stale: nginx answers otherwise now')}:\n  ${diffs.slice(0, 10).join('\n  ')}`;
  // a server's answers and logs may vary with timing where the test compares only part of them (a tally, lines
  // without the client's port); its configuration, and an answer without one (`-t`), are the same in every run
  const isSide = typeof entry === 'object' && entry !== null && 'conf' in entry;
  if (STRICT || !isSide || diffs.some((d) => d.startsWith('.conf'))) assert.fail(message);
  console.warn(message);
}

/**
 * nginx's answer to one question, live or recorded.
 *
 * @param key the entry's key (`nextKey()` for the running test's next one)
 * @param live asks nginx; undefined when no reference nginx is installed
 * @param subs this run's literals and their placeholders
 * @param comparable what of the answer is recorded and checked (default: `stable`)
 * @returns the live answer when nginx is installed (after checking the
 *   recording, or rewriting it with `JINX_RECORD=1`), else the recorded one
 *   with this run's literals filled in
 * @throws AssertionError when nginx's live answer differs from the recording,
 *   or without nginx when there is no recording, naming the command that
 *   re-records it
 */
export async function answer<T>(
  key: string, live: (() => Promise<T>) | undefined, subs: Placeholders = new Map(), comparable: (v: T) => unknown = stable,
): Promise<T> {
  if (live === undefined) return recordedAnswer(key, subs);
  const value = await live();
  checkRecording(key, value, subs, comparable);
  return value;
}

/** `answer` for a question asked synchronously (`spawnSync`). */
export function answerSync<T>(
  key: string, live: (() => T) | undefined, subs: Placeholders = new Map(), comparable: (v: T) => unknown = stable,
): T {
  if (live === undefined) return recordedAnswer(key, subs);
  const value = live();
  checkRecording(key, value, subs, comparable);
  return value;
}
