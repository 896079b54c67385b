/**
 * Runs `-t` (or `-T`) of jinx or of the reference nginx on a configuration
 * written to a fresh prefix, and returns what a user sees: the exit status
 * and the stderr lines, normalized so that the two binaries compare equal
 * when they say the same thing.
 *
 * Normalization: the timestamp and `pid#tid` of a log line are dropped
 * (`[emerg] unknown directive "x" in PREFIX/nginx.conf:2`), Debian's
 * `nginx: [emerg] …` form becomes the same `[emerg] …`, and the prefix
 * directory is written `PREFIX`. Output is decoded byte for byte (latin1), so
 * a byte that is not UTF-8 stays one character (`\xe9`) and differs from
 * U+FFFD (`\xef\xbf\xbd`).
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { strict as assert } from 'node:assert';
import { after, describe, it } from 'node:test';
import { cleanup, JINX, referenceNginx, tempDir } from './harness.js';
import { answerSync, nextKey } from './recorded.js';

/** Files of a prefix: relative path → content (a Buffer for exact bytes). */
export type PrefixFiles = Readonly<Record<string, string | Buffer>>;

/**
 * Temp paths under the prefix, for configs with an `http` block: nginx creates
 * them even with `-t`. `makePrefix` creates `PREFIX/tmp` for them.
 */
export const HTTP_TEMP_PATHS = 'client_body_temp_path tmp/body; proxy_temp_path tmp/proxy; '
  + 'fastcgi_temp_path tmp/fastcgi; uwsgi_temp_path tmp/uwsgi; scgi_temp_path tmp/scgi;';

/** Writes `files` into a fresh prefix (with `logs/` and `tmp/`), removed at cleanup. No trailing `/`. */
export function makePrefix(files: PrefixFiles): string {
  const prefix = tempDir('jinx-conf-');
  mkdirSync(join(prefix, 'logs'));
  mkdirSync(join(prefix, 'tmp'));
  for (const [rel, content] of Object.entries(files)) {
    const path = join(prefix, rel);
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, content);
  }
  return prefix;
}

/** What `-t` printed, normalized. */
export interface ConfTestResult {
  readonly status: number | null;
  /** stderr lines, normalized (see the module doc). */
  readonly lines: string[];
  /** stdout, with the prefix written `PREFIX` (the `-T` dump). */
  readonly stdout: string;
}

/** Normalizes one stderr text of nginx or jinx. `replace` maps literal strings to placeholders, longest first. */
export function normalizeStderr(text: string, replace: Readonly<Record<string, string>>): string[] {
  return text.split('\n').filter((l) => l !== '')
    .map((l) => l
      .replace(/^\d{4}\/\d\d\/\d\d \d\d:\d\d:\d\d (\[\w+\]) \d+#\d+: (\*\d+ )?/, '$1 ')
      .replace(/^nginx: (\[\w+\]) /, '$1 '))
    .map((l) => replaceAll(l, replace));
}

function replaceAll(s: string, replace: Readonly<Record<string, string>>): string {
  const keys = Object.keys(replace).sort((a, b) => b.length - a.length);
  let out = s;
  for (const k of keys) out = out.split(k).join(replace[k]!);
  return out;
}

/** How to run a binary on a prefix. */
export interface ConfTestOptions {
  /** Arguments instead of the default `-t -p PREFIX/ -c PREFIX/nginx.conf`. */
  readonly args?: readonly string[];
  /** Extra arguments after the default ones (e.g. `['-g', 'daemon off;']`). */
  readonly extra?: readonly string[];
  readonly cwd?: string;
  /** More literal → placeholder replacements for the output. */
  readonly replace?: Readonly<Record<string, string>>;
}

/**
 * Runs `binary` (`JINX` or a reference nginx path) with `-t` on `prefix`.
 * Both are run directly (`bin/jinx` finds node on the PATH).
 */
export function confTest(binary: string, prefix: string, opts: ConfTestOptions = {}): ConfTestResult {
  const args = opts.args ?? ['-t', '-p', `${prefix}/`, '-c', `${prefix}/nginx.conf`, ...(opts.extra ?? [])];
  const r = spawnSync(binary, args, { cwd: opts.cwd ?? prefix, encoding: 'latin1', timeout: 30_000 });
  const replace = { [prefix]: 'PREFIX', ...opts.replace };
  return {
    status: r.status,
    lines: normalizeStderr(r.stderr ?? '', replace),
    stdout: replaceAll(r.stdout ?? '', replace),
  };
}

/**
 * `confTest` of the reference nginx on `prefix`, checked against the running
 * test's recording, or the recorded answer when no reference is installed
 * (recorded.ts).
 */
export function referenceConfTest(prefix: string, opts: ConfTestOptions = {}): ConfTestResult {
  const reference = referenceNginx();
  return answerSync(nextKey(), reference === undefined ? undefined : () => confTest(reference, prefix, opts));
}

/** The lines nginx prints after a failed test of PREFIX/nginx.conf. */
export function failed(...messages: string[]): string[] {
  return [...messages, 'nginx: configuration file PREFIX/nginx.conf test failed'];
}

/** The lines nginx prints after a successful test of PREFIX/nginx.conf. */
export function succeeded(...messages: string[]): string[] {
  return [
    ...messages,
    'nginx: the configuration file PREFIX/nginx.conf syntax is ok',
    'nginx: configuration file PREFIX/nginx.conf test is successful',
  ];
}

/** A UTF-8 string as the latin1 string of its bytes, to compare with byte-for-byte decoded output. */
export function utf8Bytes(s: string): string {
  return Buffer.from(s, 'utf8').toString('latin1');
}

/** One configuration and what `-t` must print for it (as current nginx prints it). */
export interface ConfCase {
  /** The behaviour, as a user sees it. */
  readonly name: string;
  readonly files: PrefixFiles;
  readonly status: number;
  /** Normalized stderr lines; see `failed()` and `succeeded()`. */
  readonly lines: readonly string[];
  /** Options, or a function of the prefix for options that name it. */
  readonly opts?: ConfTestOptions | ((prefix: string) => ConfTestOptions);
  /** Why the reference is not asked (e.g. nginx crashes on this input). */
  readonly noReference?: string;
}

/**
 * Defines, under `describe(title)`, one test per case that runs `jinx -t`,
 * and under `describe(title + " (reference nginx agrees)")` one per case that
 * runs the reference nginx on the same files, so an expectation that is not
 * nginx's behaviour fails too. Without a reference nginx the second test
 * checks the expectation against nginx's answer recorded in the test file's
 * `FOO.recorded.json` (recorded.ts).
 */
export function defineConfCases(title: string, cases: readonly ConfCase[]): void {
  const run = (binary: 'jinx' | 'nginx', c: ConfCase): void => {
    const prefix = makePrefix(c.files);
    const opts = typeof c.opts === 'function' ? c.opts(prefix) : c.opts;
    const got = binary === 'jinx' ? confTest(JINX, prefix, opts) : referenceConfTest(prefix, opts);
    assert.deepEqual({ status: got.status, lines: got.lines }, { status: c.status, lines: [...c.lines] });
  };
  describe(title, () => {
    after(cleanup);
    for (const c of cases) it(c.name, () => run('jinx', c));
  });
  describe(`${title} (reference nginx agrees)`, () => {
    after(cleanup);
    for (const c of cases) it(c.name, { skip: c.noReference ?? false }, () => run('nginx', c));
  });
}
