/**
 * Differential runs: one configuration, served first by the reference nginx
 * and then by jinx, on the same port and in the same prefix, with the same
 * requests. A scenario returns what it observed; the test compares the two
 * sides. Responses are normalized only for what legitimately differs: the
 * server's name in `Server:` and in its pages (`nginx/1.30.6` vs
 * `jinx/X.Y.Z`, `nginx` vs `jinx` with `server_tokens off`), `Date`, and the
 * `Content-Length` of a page that names the server.
 *
 * Without a reference nginx (or with `JINX_NO_NGINX=1`) nginx's side is the
 * answer recorded in the test's `FOO.recorded.json` (see recorded.ts; re-record
 * with `npm run -s record -- test/DIR/FOO.test.ts`), and both sides are then
 * compared with their times made fixed.
 */
import { strict as assert } from 'node:assert';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { join } from 'node:path';
import { JINX_VERSION } from '../../src/version.js';
import { JINX, freePort, logEntries, referenceNginx, startServer, tempDir, writeFiles, type Response, type ServerProcess } from './harness.js';
import { answer, nextKey, placeholdersOf, recordCommand, stable } from './recorded.js';

/** The version a reference binary reports (`nginx -v`), e.g. `1.30.6`. */
function versionOf(binary: string): string | undefined {
  const r = spawnSync(binary, ['-v'], { encoding: 'utf8', timeout: 10_000 });
  return /nginx\/(\d+\.\d+\.\d+)/.exec(`${r.stderr}${r.stdout}`)?.[1];
}

const FOUND = referenceNginx();
const FOUND_VERSION = FOUND ? versionOf(FOUND) : undefined;
/** Whether a version is 1.30 or later: older nginx differs (upstream keepalive, page titles …). */
const current = (v: string | undefined): boolean => {
  const [major = 0, minor = 0] = (v ?? '0.0').split('.').map(Number);
  return major > 1 || (major === 1 && minor >= 30);
};

/** The reference nginx (1.30 or later), or undefined (differential runs then use the recorded answers). */
export const ORACLE = FOUND && current(FOUND_VERSION) ? FOUND : undefined;

/** How a differential configuration is run. */
export interface ConfOptions {
  /**
   * Keep one worker process under `JINX_TEST_WORKERS`: for a test whose
   * answers depend on state nginx too keeps in each worker process (kept
   * upstream connections, a balancer's position, peer failures without
   * `zone`, the resolver's cache, `worker_connections`, `open_log_file_cache`,
   * TLS session and certificate caches, `$uid_set`'s sequence): with several
   * workers they depend on which worker the kernel gave each connection.
   */
  readonly oneWorker?: boolean;
}

/**
 * The main context every differential config starts with. Both servers run as
 * root (nginx's workers too, so that they read the test's files like jinx does).
 */
export function mainContext(level = 'info', opts: ConfOptions = {}): string {
  return `daemon off;\nuser root;\n${opts.oneWorker ? '' : TEST_WORKERS}pid logs/nginx.pid;\nerror_log logs/error.log ${level};\nevents {}\n`;
}

/**
 * `JINX_TEST_WORKERS=N`: every configuration of `mainContext` gets
 * `worker_processes N;`, on jinx and the reference nginx alike, to run the
 * differential tests on several workers (the recordings, made with one, are
 * then not checked; nginx must be installed).
 */
export const TEST_WORKERS = process.env.JINX_TEST_WORKERS ? `worker_processes ${Number(process.env.JINX_TEST_WORKERS)};\n` : '';

/** The temp paths nginx needs inside the prefix (http context). */
export const TEMP_PATHS = 'client_body_temp_path tmp/body; proxy_temp_path tmp/proxy; fastcgi_temp_path tmp/fastcgi; uwsgi_temp_path tmp/uwsgi; scgi_temp_path tmp/scgi;';

/** A full config: main context, then `http { TEMP_PATHS access_log … BODY }`. */
export function httpConf(body: string, opts: ConfOptions & { level?: string; accessLog?: string } = {}): string {
  return `${mainContext(opts.level, opts)}http {\n  ${TEMP_PATHS}\n  access_log ${opts.accessLog ?? 'off'};\n${body}\n}\n`;
}

/** What a configuration template gets. */
export interface ConfEnv {
  /** The port of the first `listen` (the one requests go to). */
  readonly port: number;
  /** Further free ports, when asked for with `extraPorts`. */
  readonly ports: readonly number[];
  /** The prefix directory, without a trailing `/`. */
  readonly prefix: string;
}

/** One server under test. */
export interface Side {
  readonly kind: 'nginx' | 'jinx';
  readonly port: number;
  /** The extra ports (`extraPorts`). */
  readonly ports: readonly number[];
  readonly prefix: string;
  readonly server: ServerProcess;
  /** A request through node's client (`Connection: close`), normalized. */
  get(path: string, opts?: RequestOpts): Promise<Snap>;
  /** The same, not normalized. */
  request(path: string, opts?: RequestOpts): Promise<Response>;
  /** Sends bytes as they are and returns the parsed response (undefined when the connection closed without one). */
  raw(data: string, port?: number): Promise<Snap | undefined>;
}

export interface RequestOpts {
  method?: string;
  headers?: Record<string, string>;
  /** A body sent with Content-Length. */
  body?: string | Buffer;
  /** A body sent chunked, one chunk per element. */
  chunks?: readonly string[];
  port?: number;
}

/** A normalized response. */
export interface Snap {
  readonly status: number;
  /** The reason phrase of the status line. */
  readonly reason: string;
  readonly headers: Record<string, string>;
  readonly body: string;
}

/** What one side produced. */
export interface SideResult<T> {
  readonly result: T;
  /** Error-log entries of requests (`[level] *CONN …`), as `logEntries` prints them. */
  readonly errorLog: readonly string[];
  /** Every error-log entry, with the timestamp and pid removed. */
  readonly allErrorLog: readonly string[];
  /** Reads a file of the prefix after the run (e.g. `logs/access.log`), lines with `[TIME]` for local times. */
  file(rel: string): string[];
}

const PAGE_NAMES: readonly (readonly [RegExp, string])[] = [
  [new RegExp(`jinx/${JINX_VERSION.replace(/\./g, '\\.')}`, 'g'), 'SERVER/VERSION'],
  [/nginx\/1\.\d+\.\d+/g, 'SERVER/VERSION'],
  [/<center>(?:jinx|nginx)<\/center>/g, '<center>SERVER</center>'],
];

/** Replaces the server's own name in a page. */
export function normalizeBody(body: string): string {
  let out = body;
  for (const [re, to] of PAGE_NAMES) out = out.replace(re, to);
  return out;
}

/** Headers not compared: they name the server or the moment. */
const IGNORED = new Set(['server', 'date']);

/**
 * Normalizes a response: `Server` and `Date` dropped, pages with the server
 * name replaced; a `Content-Length` that matched the body is recomputed for
 * the normalized body (for HEAD, a page's length is adjusted from the
 * server's name).
 */
export function snap(resp: Response, kind: 'nginx' | 'jinx', method = 'GET'): Snap {
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(resp.headers)) {
    if (IGNORED.has(k) || v === undefined) continue;
    headers[k] = Array.isArray(v) ? v.join('\n') : v;
  }
  const body = normalizeBody(resp.body);
  const cl = headers['content-length'];
  if (cl !== undefined) {
    if (Number(cl) === Buffer.byteLength(resp.body, 'latin1')) headers['content-length'] = String(Buffer.byteLength(body, 'latin1'));
    else if (method === 'HEAD' && resp.status >= 300 && headers['content-type'] === 'text/html') {
      const name = kind === 'nginx' ? `nginx/${/nginx\/(\S+)/.exec(String(resp.headers.server))?.[1] ?? ''}` : `jinx/${JINX_VERSION}`;
      const own = String(resp.headers.server) === 'nginx' || String(resp.headers.server) === 'jinx' ? 0 : name.length - 'SERVER/VERSION'.length;
      headers['content-length'] = `${Number(cl) - own} (HEAD)`;
    }
  }
  return { status: resp.status, reason: (resp as { reason?: string }).reason ?? '', headers, body };
}

/** Sends one request with node's client; a `chunks` body is sent chunked. */
export function send(port: number, path: string, opts: RequestOpts = {}): Promise<Response> {
  return new Promise((res, rej) => {
    const r = httpRequest({ host: '127.0.0.1', port, path, method: opts.method ?? 'GET', headers: opts.headers, agent: false }, (resp) => {
      const chunks: Buffer[] = [];
      resp.on('data', (c: Buffer) => chunks.push(c));
      resp.on('end', () => res({
        status: resp.statusCode ?? 0, reason: resp.statusMessage ?? '', headers: resp.headers, body: Buffer.concat(chunks).toString('latin1'),
      } as Response));
      resp.on('error', rej);
    });
    r.setTimeout(15_000, () => r.destroy(new Error(`request ${path} timed out`)));
    r.on('error', rej);
    if (opts.chunks) {
      for (const c of opts.chunks) r.write(c);
      r.end();
    } else r.end(opts.body);
  });
}

/** Writes `data` to 127.0.0.1:port and returns everything read until the server closes (or `timeoutMs`). */
export function rawExchange(port: number, data: string, timeoutMs = 5000): Promise<string> {
  return new Promise((res, rej) => {
    const s = connect({ host: '127.0.0.1', port });
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => s.destroy(), timeoutMs);
    s.on('connect', () => s.write(data, 'latin1'));
    s.on('data', (c: Buffer) => chunks.push(c));
    s.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'ECONNRESET') return;
      clearTimeout(timer);
      rej(err);
    });
    s.on('close', () => {
      clearTimeout(timer);
      res(Buffer.concat(chunks).toString('latin1'));
    });
  });
}

/** Parses one HTTP/1.x response (headers lowercased, repeated ones joined by a newline). */
export function parseRaw(text: string): Response | undefined {
  const end = text.indexOf('\r\n\r\n');
  if (end === -1) return undefined;
  const lines = text.slice(0, end).split('\r\n');
  const m = /^HTTP\/1\.[01] (\d{3}) ?(.*)$/.exec(lines[0]!);
  if (!m) return undefined;
  const headers: Record<string, string> = {};
  for (const line of lines.slice(1)) {
    const c = line.indexOf(':');
    const k = line.slice(0, c).toLowerCase();
    const v = line.slice(c + 1).trim();
    headers[k] = headers[k] === undefined ? v : `${headers[k]}\n${v}`;
  }
  let body = text.slice(end + 4);
  if (headers['transfer-encoding'] === 'chunked') {
    let out = '';
    let rest = body;
    for (let i = 0; i < 10_000; i++) {
      const nl = rest.indexOf('\r\n');
      if (nl === -1) break;
      const size = parseInt(rest.slice(0, nl), 16);
      if (!(size > 0)) break;
      out += rest.slice(nl + 2, nl + 2 + size);
      rest = rest.slice(nl + 2 + size + 2);
    }
    body = out;
  }
  return { status: Number(m[1]), reason: m[2], headers, body } as Response;
}

/** nginx's line for the harness's readiness probe (a connection opened and closed without a request). */
const PROBE = /^\[info\] \*CONN client closed connection while waiting for request, client: 127\.0\.0\.1, server: 127\.0\.0\.1:\d+$/;

const TIME_LOCAL = /\d\d\/[A-Z][a-z]{2}\/\d{4}:\d\d:\d\d:\d\d [+-]\d{4}/g;

/** What one side produced, as plain data (what a recording keeps). */
interface SideRecord<T> {
  /** The configuration, in a recording with its ports and directories as placeholders. */
  readonly conf: string;
  readonly result: T;
  readonly errorLog: readonly string[];
  readonly allErrorLog: readonly string[];
  /** Lines of each file under logs/, keyed `logs/NAME`. */
  readonly files: Readonly<Record<string, string[]>>;
}

/** A notice about the process itself (version, OS, limits, workers, signals): it names the machine. */
const PROCESS_NOTICE = /^\[notice\] (?!\*)/;
/** The same notice in a log file's line. */
const PROCESS_NOTICE_LINE = /^\d{4}\/\d\d\/\d\d \d\d:\d\d:\d\d \[notice\] \d+#\d+: (?!\*)/;

/**
 * What of a side is recorded and compared with a recording: the log lines
 * about the process and the pid file left out, times made fixed (`stable`).
 * The configuration is kept, so a recording for another one is noticed.
 */
function comparableSide<T>(side: SideRecord<T>): SideRecord<T> {
  const files: Record<string, string[]> = {};
  for (const [rel, lines] of Object.entries(side.files)) if (!rel.endsWith('.pid')) files[rel] = lines.filter((l) => !PROCESS_NOTICE_LINE.test(l));
  return stable({ ...side, allErrorLog: side.allErrorLog.filter((l) => !PROCESS_NOTICE.test(l)), files });
}

const sideResult = <T>(r: SideRecord<T>): SideResult<T> => ({
  result: r.result, errorLog: r.errorLog, allErrorLog: r.allErrorLog, file: (rel) => r.files[rel] ?? [],
});

/**
 * Runs `scenario` against nginx, then against jinx, each on a fresh copy of
 * `files` in one prefix and on one port, and returns both sides' results and
 * logs. The config template is called with the port(s) and the prefix.
 *
 * nginx's side is also checked against the test's recording (a stale one
 * fails, naming the command that re-records it; `JINX_RECORD=1` rewrites it). Without a reference nginx, nginx's side is the recording and
 * jinx's side is made comparable with it the same way (`comparableSide`).
 */
export async function differential<T>(
  spec: {
    conf: (env: ConfEnv) => string;
    /** Files of the prefix: text, or bytes (a binary file). */
    files?: Readonly<Record<string, string | Buffer>>;
    extraPorts?: number;
    dirs?: readonly string[];
    /** What else changes from run to run (a port the configuration names without a host, a certificate's serial): name → this run's value, recorded as `@NAME@`. */
    literals?: Readonly<Record<string, string | number>>;
    /**
     * nginx's error-log lines that race the client (written in some runs
     * only, e.g. a shutdown() that finds the peer gone): left out of nginx's
     * recorded answer and of the check of the recording; a live answer keeps
     * them, for the test to judge.
     */
    racing?: RegExp;
  },
  scenario: (side: Side) => Promise<T>,
): Promise<{ nginx: SideResult<T>; jinx: SideResult<T> }> {
  const prefix = tempDir('jinx-diff-');
  const port = await freePort();
  const ports: number[] = [];
  // a port freePort found is free again at once, and the kernel may hand it out twice: the test's ports are kept distinct
  while (ports.length < (spec.extraPorts ?? 0)) {
    const p = await freePort();
    if (p !== port && !ports.includes(p)) ports.push(p);
  }
  const env: ConfEnv = { port, ports, prefix };
  const conf = spec.conf(env);
  const key = nextKey();
  const subs = placeholdersOf(conf, [
    [prefix, '@PREFIX@'], [String(port), '@PORT@'], ...ports.map((p, i) => [String(p), `@PORT${i + 1}@`] as const),
    ...Object.entries(spec.literals ?? {}).map(([name, value]) => [String(value), `@${name}@`] as const),
  ]);
  // written once: both servers see the same files (and the same mtimes, ETags)
  for (const d of spec.dirs ?? []) mkdirSync(join(prefix, d), { recursive: true });
  writeFiles(prefix, { 'nginx.conf': conf, ...spec.files });
  const runOne = async (kind: 'nginx' | 'jinx'): Promise<SideRecord<T>> => {
    for (const d of ['logs', 'tmp']) rmSync(join(prefix, d), { recursive: true, force: true });
    mkdirSync(join(prefix, 'logs'));
    mkdirSync(join(prefix, 'tmp'));
    const server = await startServer(kind === 'nginx' ? ORACLE! : JINX, prefix, join(prefix, 'nginx.conf'), [port, ...ports]);
    let result: T;
    try {
      const side: Side = {
        kind, port, ports, prefix, server,
        request: (path, opts = {}) => send(opts.port ?? port, path, opts),
        get: async (path, opts = {}) => snap(await send(opts.port ?? port, path, opts), kind, opts.method),
        raw: async (data, p) => {
          const parsed = parseRaw(await rawExchange(p ?? port, data));
          return parsed && snap(parsed, kind, /^HEAD /.test(data) ? 'HEAD' : 'GET');
        },
      };
      result = await scenario(side);
    } finally {
      await server.stop('SIGQUIT');
    }
    // error-log entries cut at NGX_MAX_ERROR_STR are compared where the widest pid would cut them (`evenCuts`)
    const errorLogPath = join(prefix, 'logs/error.log');
    const errorLog = existsSync(errorLogPath) ? Buffer.from(evenCuts(readFileSync(errorLogPath, 'latin1')), 'latin1').toString('utf8') : '';
    const all = logEntries(errorLog).map(comparable);
    // the side's log files are read now: the next side starts with fresh ones
    const files: Record<string, string[]> = {};
    const logs = join(prefix, 'logs');
    for (const f of readdirSync(logs)) files[`logs/${f}`] = readLines(join(logs, f));
    return {
      conf,
      result,
      errorLog: all.filter((l) => /^\[\w+\] \*CONN /.test(l) && !PROBE.test(l)),
      allErrorLog: all,
      files,
    };
  };
  const racing = spec.racing;
  const recordable = racing === undefined ? comparableSide : (side: SideRecord<T>): SideRecord<T> => comparableSide({
    ...side,
    errorLog: side.errorLog.filter((l) => !racing.test(l)),
    allErrorLog: side.allErrorLog.filter((l) => !racing.test(l)),
    files: Object.fromEntries(Object.entries(side.files).map(([rel, lines]) => [rel, rel.endsWith('error.log') ? lines.filter((l) => !racing.test(l)) : lines])),
  });
  const nginx = await answer(key, ORACLE ? () => runOne('nginx') : undefined, subs, recordable);
  if (!ORACLE) {
    assert.equal(nginx.conf, stable(conf), `the recorded nginx answer is for another configuration; re-record with ${recordCommand()}`);
  }
  const jinx = await runOne('jinx');
  return ORACLE ? { nginx: sideResult(nginx), jinx: sideResult(jinx) } : { nginx: sideResult(nginx), jinx: sideResult(comparableSide(jinx)) };
}

/**
 * ETIMEDOUT's text: glibc's "Connection timed out" where jinx prints its
 * specification's "Operation timed out" (src/os-errors.ts).
 */
const GLIBC_ETIMEDOUT = /\(110: Connection timed out\)/g;

/**
 * The function field of an OpenSSL error string: jinx prints it
 * (`SSL routines:ssl3_get_record:wrong version number`, its specification's
 * wording), Debian's OpenSSL 3 leaves it empty; lines compare without it.
 */
const OPENSSL_FUNCTION = /(error:[0-9A-F]{8}:[^:()]*):[^:()]*:/g;

/**
 * Memory addresses nginx prints with `%p` (16 hexadecimal digits), as in
 * `zero size buf in output … 00005555817E832F-00005555817E832F`: jinx
 * prints another number in their place. The word is the one recordings
 * put for them (recorded.ts), so that a live answer matches its recording.
 */
const ADDRESS = /\b[0-9A-F]{16}\b/g;

/** A log line with what legitimately differs between the two servers made equal. */
const comparable = (l: string): string => l.replace(GLIBC_ETIMEDOUT, '(110: Operation timed out)').replace(OPENSSL_FUNCTION, '$1::').replace(ADDRESS, '[POINTER]');

/** nginx's `NGX_MAX_ERROR_STR`: an error-log entry is cut to this many bytes, its newline included. */
const MAX_ERROR_STR = 2048;
/** The widest `pid#tid` an error-log line can hold (pid_max is at most 4194304: 7 digits). */
const WIDEST_PID_TID = 15;

/**
 * An error-log text (latin1: one character a byte) whose entries cut at
 * NGX_MAX_ERROR_STR no longer depend on the server's pid: where such an entry
 * is cut depends on the length of its prefix, and so on the digits of
 * `pid#tid`, which change from run to run (and between nginx and jinx). An
 * entry of exactly NGX_MAX_ERROR_STR - 1 bytes is cut further, to where it
 * would end with the widest `pid#tid`, and marked `[CUT]`: an entry cut
 * elsewhere keeps its length and has no mark, so it still differs.
 */
function evenCuts(text: string): string {
  return text.split(/(?<=\n)(?=\d{4}\/\d\d\/\d\d \d\d:\d\d:\d\d \[)/).map((entry) => {
    const body = entry.replace(/\n$/, '');
    const m = /^\d{4}\/\d\d\/\d\d \d\d:\d\d:\d\d \[\w+\] (\d+#\d+): /.exec(body);
    if (!m || body.length !== MAX_ERROR_STR - 1) return entry;
    return `${body.slice(0, body.length - Math.max(0, WIDEST_PID_TID - m[1]!.length))}[CUT]${entry.slice(body.length)}`;
  }).join('');
}

/** The lines of a log file (latin1), entries cut at NGX_MAX_ERROR_STR evened (`evenCuts`), `$time_local` made fixed. */
function readLines(path: string): string[] {
  if (!existsSync(path)) return [];
  return evenCuts(readFileSync(path, 'latin1')).split('\n').filter(Boolean)
    .map((l) => l.replace(TIME_LOCAL, '[TIME]').replace(/\[\[TIME\]\]/g, '[TIME]'));
}

const isSnap = (v: unknown): v is Snap =>
  typeof v === 'object' && v !== null && 'status' in v && 'headers' in v && 'body' in v;

const short = (v: unknown): string => {
  const s = JSON.stringify(v) ?? 'undefined';
  return s.length > 300 ? `${s.slice(0, 300)}…` : s;
};

/** The differences between two observations, one line each (`path: nginx … | jinx …`). */
export function differences(nginx: unknown, jinx: unknown, path = ''): string[] {
  if (isSnap(nginx) && isSnap(jinx)) {
    const out: string[] = [];
    if (nginx.status !== jinx.status || nginx.reason !== jinx.reason) {
      out.push(`${path} status line: nginx "${nginx.status} ${nginx.reason}" | jinx "${jinx.status} ${jinx.reason}"`);
    }
    for (const h of new Set([...Object.keys(nginx.headers), ...Object.keys(jinx.headers)])) {
      if (nginx.headers[h] !== jinx.headers[h]) out.push(`${path} header ${h}: nginx ${short(nginx.headers[h])} | jinx ${short(jinx.headers[h])}`);
    }
    if (nginx.body !== jinx.body) out.push(`${path} body: nginx ${short(nginx.body)} | jinx ${short(jinx.body)}`);
    return out;
  }
  if (typeof nginx === 'object' && nginx !== null && typeof jinx === 'object' && jinx !== null && !Array.isArray(nginx) && !Array.isArray(jinx)) {
    const out: string[] = [];
    for (const k of new Set([...Object.keys(nginx), ...Object.keys(jinx)])) {
      out.push(...differences((nginx as Record<string, unknown>)[k], (jinx as Record<string, unknown>)[k], path ? `${path}.${k}` : k));
    }
    return out;
  }
  if (JSON.stringify(nginx) === JSON.stringify(jinx)) return [];
  return [`${path || '(value)'}: nginx ${short(nginx)} | jinx ${short(jinx)}`];
}

/**
 * Asserts that jinx observed what nginx observed and logged the same request
 * lines (in any order with several workers, `JINX_TEST_WORKERS`); the message
 * lists every difference, one per line.
 */
export function assertSameAsNginx<T>(run: { nginx: SideResult<T>; jinx: SideResult<T> }, opts: { log?: boolean } = {}): void {
  const diffs = differences(run.nginx.result, run.jinx.result);
  // with several workers (JINX_TEST_WORKERS) each writes its own lines as its connections go: their order is the kernel's
  const inOrder = (lines: readonly string[]): readonly string[] => (TEST_WORKERS ? [...lines].sort() : lines);
  if (opts.log !== false) diffs.push(...lineDiff(inOrder(run.nginx.errorLog), inOrder(run.jinx.errorLog)).map((l) => `error.log ${l}`));
  assert.ok(diffs.length === 0, `jinx differs from nginx:\n  ${diffs.join('\n  ')}`);
}

/** A line diff (longest common subsequence): `nginx only: …` and `jinx only: …` lines. */
export function lineDiff(nginx: readonly string[], jinx: readonly string[]): string[] {
  const n = nginx.length;
  const m = jinx.length;
  const lcs: number[][] = Array.from({ length: n + 1 }, () => new Array<number>(m + 1).fill(0));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) lcs[i]![j] = nginx[i] === jinx[j] ? lcs[i + 1]![j + 1]! + 1 : Math.max(lcs[i + 1]![j]!, lcs[i]![j + 1]!);
  }
  const out: string[] = [];
  let i = 0;
  let j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && nginx[i] === jinx[j]) {
      i++;
      j++;
    } else if (j >= m || (i < n && lcs[i + 1]![j]! >= lcs[i]![j + 1]!)) out.push(`nginx only: ${nginx[i++]}`);
    else out.push(`jinx only:  ${jinx[j++]}`);
  }
  return out;
}

/** GETs (or `method`s) each path in turn on one side, keyed `METHOD PATH`. */
export async function takeEach(
  s: { get(path: string, opts?: { method?: string }): Promise<Snap> }, paths: readonly string[], method = 'GET',
): Promise<Record<string, Snap>> {
  const out: Record<string, Snap> = {};
  for (const p of paths) out[`${method} ${p}`] = await s.get(p, { method });
  return out;
}
