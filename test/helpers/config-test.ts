/**
 * Differential `-t`: runs `jinx -t -p DIR/ -c FILE` and the reference
 * `nginx -t -p DIR/ -c FILE` on the same file and returns, for each, the exit
 * status and the output lines with what varies between runs removed.
 *
 * A log line `2026/01/02 03:04:05 [emerg] 123#123: MESSAGE` becomes
 * `[emerg] MESSAGE`; `nginx: …` lines (`configuration file … test failed`,
 * `the configuration file … syntax is ok`, `nginx: [emerg] …`) are kept as
 * they are. Optionally a directory is replaced by a placeholder so that
 * expected lines can be written without the temp path.
 *
 * nginx's side is checked against, or without a reference nginx read from,
 * the test's recording (recorded.ts): keyed by the running test's name, or by
 * `record` where tests run side by side.
 */
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, JINX, onCleanup, referenceNginx, ROOT, runJinx } from './harness.js';
import { answer, answerSync, nextKey } from './recorded.js';

/** One side of a `-t` comparison. */
export interface TestOutcome {
  readonly status: number | null;
  /** stderr and stdout lines, normalized (stderr first). */
  readonly lines: string[];
}

/** Both sides; `nginx` is the recorded answer when no reference binary is installed. */
export interface Comparison {
  readonly jinx: TestOutcome;
  readonly nginx: TestOutcome;
}

export interface ConfigTestOptions {
  /** Flags before `-p` (`-q`, `-g "…"`); `-t` is always passed. */
  readonly flags?: readonly string[];
  /** Replaces every occurrence of this string in the output by `PREFIX`. */
  readonly hidePrefix?: string;
  /** The key of nginx's answer in the recording (default: the running test's next, `nextKey()`). */
  readonly record?: string;
  /** Literals of this run (ports) and their placeholders in the recording. */
  readonly placeholders?: ReadonlyMap<string, string>;
}

/** Drops the timestamp and `pid#tid` of nginx log lines; keeps every other line. */
export function normalizeOutput(text: string, hidePrefix?: string): string[] {
  return text
    .split('\n')
    .filter((l) => l.length > 0)
    .map((l) => l.replace(/^\d{4}\/\d\d\/\d\d \d\d:\d\d:\d\d (\[\w+\]) \d+#\d+: /, '$1 '))
    .map((l) => (hidePrefix ? l.split(hidePrefix).join('PREFIX') : l));
}

function outcome(r: { status: number | null; stdout: string; stderr: string }, hidePrefix?: string): TestOutcome {
  return { status: r.status, lines: [...normalizeOutput(r.stderr, hidePrefix), ...normalizeOutput(r.stdout, hidePrefix)] };
}

/** `jinx -t [flags] -p DIR/ -c FILE`. */
export function jinxTest(dir: string, conf: string, opts: ConfigTestOptions = {}): TestOutcome {
  const r = runJinx(['-t', ...(opts.flags ?? []), '-p', `${dir}/`, '-c', conf]);
  return outcome(r, opts.hidePrefix);
}

/** `nginx -t [flags] -p DIR/ -c FILE` with the reference binary, or undefined when there is none. */
export function nginxTest(dir: string, conf: string, opts: ConfigTestOptions = {}): TestOutcome | undefined {
  const bin = referenceNginx();
  if (!bin) return undefined;
  const r = spawnSync(bin, ['-t', ...(opts.flags ?? []), '-p', `${dir}/`, '-c', conf], { encoding: 'utf8', timeout: 30_000 });
  return outcome({ status: r.status, stdout: r.stdout, stderr: r.stderr }, opts.hidePrefix);
}

/**
 * Runs both on the same file. jinx runs first, on the tree as given; nginx
 * runs second (nginx -t may create log files and temp directories), or its
 * recorded answer stands in.
 */
export function compareConfigTest(dir: string, conf: string, opts: ConfigTestOptions = {}): Comparison {
  const jinx = jinxTest(dir, conf, opts);
  const live = referenceNginx() ? () => nginxTest(dir, conf, opts)! : undefined;
  const nginx = answerSync(opts.record ?? nextKey(), live, opts.placeholders);
  return { jinx, nginx };
}

/** Runs a command to completion without blocking the event loop (30 s limit). */
function runAsync(cmd: string, args: readonly string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolveRun, reject) => {
    const child = spawn(cmd, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => { stdout += d.toString(); });
    child.stderr.on('data', (d: Buffer) => { stderr += d.toString(); });
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.once('error', (err) => { clearTimeout(timer); reject(err); });
    child.once('close', (status) => { clearTimeout(timer); resolveRun({ status, stdout, stderr }); });
  });
}

/**
 * `compareConfigTest` without blocking, so that tests in one file can run
 * side by side (each on its own directory, each with its own `record` key).
 * jinx first, then nginx.
 */
export async function compareConfigTestAsync(dir: string, conf: string, opts: ConfigTestOptions = {}): Promise<Comparison> {
  const args = ['-t', ...(opts.flags ?? []), '-p', `${dir}/`, '-c', conf];
  const key = opts.record ?? nextKey();
  const jinx = outcome(await runAsync(JINX, args), opts.hidePrefix);
  const bin = referenceNginx();
  const nginx = await answer(key, bin ? async () => outcome(await runAsync(bin, args), opts.hidePrefix) : undefined, opts.placeholders);
  return { jinx, nginx };
}

/**
 * Copies a directory tree to `into` (a relative path, default: the root
 * itself) inside a fresh temp directory, removed at cleanup; returns the root.
 */
export function copyTree(src: string, prefix = 'jinx-diff-', into = ''): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  // started as root, nginx's workers and jinx's run as nobody: they must reach the tree
  chmodSync(dir, 0o755);
  onCleanup(() => rmSync(dir, { recursive: true, force: true }));
  cpSync(src, join(dir, into), { recursive: true, dereference: true });
  return dir;
}

/** Every regular file under `dir`, recursively. */
export function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...filesUnder(p));
    else out.push(p);
  }
  return out;
}

/** A text replacement: a string or a regular expression (with `g`), and what replaces it. */
export type Replacement = readonly [string, string] | readonly [RegExp, string | ((match: string, ...groups: string[]) => string)];

/** Applies replacements, in order, to every file under `dir` (text files only: skips files with NUL bytes). */
export function rewriteTree(dir: string, replacements: readonly Replacement[]): void {
  for (const file of filesUnder(dir)) {
    const buf = readFileSync(file);
    if (buf.includes(0)) continue;
    const text = buf.toString('latin1');
    let next = text;
    for (const [from, to] of replacements) {
      next = typeof from === 'string' ? next.split(from).join(to as string) : next.replace(from, to as (m: string, ...g: string[]) => string);
    }
    if (next !== text) writeFileSync(file, Buffer.from(next, 'latin1'));
  }
}

/** Makes a throw-away self-signed certificate and key with openssl. @returns false when openssl fails or is missing. */
export function makeCertificate(certFile: string, keyFile: string, cn = 'localhost'): boolean {
  const r = spawnSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '30',
    '-subj', `/CN=${cn}`, '-keyout', keyFile, '-out', certFile], { encoding: 'utf8', timeout: 30_000 });
  return r.status === 0;
}

/** A fixture copied to a temp directory with its placeholders filled in. */
export interface MaterializedFixture {
  readonly dir: string;
  readonly conf: string;
  /** The values of `@PORT@`, `@PORT2@`, `@PORT3@`. */
  readonly ports: readonly number[];
}

/**
 * Copies a fixture folder to a temp directory and replaces, in every file,
 * `@PREFIX@` (the copy), `@PORT@`/`@PORT2@`/`@PORT3@` (free ports on
 * 127.0.0.1) and `@STREAM_MODULE@` (the reference nginx's stream module).
 * Every edit stays within its line, so FILE:LINE is what the fixture shows.
 */
export async function materializeFixture(src: string, streamModule: string): Promise<MaterializedFixture> {
  const dir = copyTree(src, 'jinx-fixture-');
  const ports = [await freePort(), await freePort(), await freePort()];
  rewriteTree(dir, [
    ['@PREFIX@', dir],
    ['@PORT2@', String(ports[1])],
    ['@PORT3@', String(ports[2])],
    ['@PORT@', String(ports[0])],
    ['@STREAM_MODULE@', streamModule],
  ]);
  return { dir, conf: join(dir, 'nginx.conf'), ports };
}
