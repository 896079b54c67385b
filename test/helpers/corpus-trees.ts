/**
 * The shared corpus (`../shared/corpus`) and the scenario's config tree laid
 * out in a temp root so that `nginx -t` and `jinx -t` can check them on this
 * host: absolute paths moved under the root, free ports instead of 80/443/81,
 * throw-away certificates, the directories the configs expect, and the stream
 * module loaded (both nginx and jinx know `stream {}` only after
 * `load_module …ngx_stream_module.so`). Line numbers are kept: every edit
 * replaces text within its line.
 */
import { cpSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { freePort, referenceNginx, SHARED } from './harness.js';
import { copyTree, makeCertificate, rewriteTree } from './config-test.js';

/** The stream module of the reference nginx (the 1.30 oracle's, else Debian's). */
export function streamModulePath(): string {
  const oracle = '/opt/nginx-oracle/modules/ngx_stream_module.so';
  if (referenceNginx() === '/opt/nginx-oracle/nginx' || !existsSync('/usr/lib/nginx/modules/ngx_stream_module.so')) return oracle;
  return '/usr/lib/nginx/modules/ngx_stream_module.so';
}

/** Whether the reference is nginx 1.25.1 or later (knows `http2 on;`); the recorded answers are 1.30's. */
export function referenceKnowsHttp2Directive(): boolean {
  const reference = referenceNginx();
  return reference === undefined || reference === '/opt/nginx-oracle/nginx';
}

/** `/etc/nginx` → `ROOT/etc/nginx` for each of `paths`, only at path boundaries, in one pass. */
function movePaths(root: string, paths: readonly string[]): [RegExp, string] {
  const alt = paths.map((p) => p.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')).join('|');
  return [new RegExp(`(?<![\\w.-])(${alt})(?![\\w.-])`, 'g'), `${root}$1`];
}

function editFile(file: string, edit: (text: string) => string): void {
  writeFileSync(file, edit(readFileSync(file, 'utf8')));
}

function certAt(cert: string, key: string): void {
  mkdirSync(dirname(cert), { recursive: true });
  mkdirSync(dirname(key), { recursive: true });
  if (!makeCertificate(cert, key)) throw new Error(`openssl could not make ${cert}`);
}

/** A prepared tree: the prefix to pass with `-p` and the config file for `-c`. */
export interface PreparedTree {
  readonly root: string;
  readonly prefix: string;
  readonly conf: string;
}

/**
 * Nginx Proxy Manager's running tree (SOURCE.md): `rootfs/` copied into a
 * temp root, `/etc/nginx`, `/data`, `/etc/letsencrypt`, `/var/lib/nginx`,
 * `/tmp/nginx`, `/run/nginx` moved into it, `user npm;` replaced by the
 * stream module's `load_module`, listen ports 80/443/81 moved to free ports,
 * certificates made, log and cache directories created. Prefix: ROOT/etc/nginx/.
 */
export async function prepareProxyManager(): Promise<PreparedTree> {
  const root = copyTree(join(SHARED, 'corpus/nginx-proxy-manager/rootfs'), 'jinx-npm-');
  const ports = { 80: await freePort(), 443: await freePort(), 81: await freePort() };
  rewriteTree(root, [
    movePaths(root, ['/etc/nginx', '/data', '/etc/letsencrypt', '/var/lib/nginx', '/tmp/nginx', '/run/nginx']),
    [/\blisten(\s+)(\[::\]:)?(80|443|81)\b/g, (_m, sp, v6, p) => `listen${sp}${v6 ?? ''}${ports[p as '80' | '443' | '81']}`],
  ]);
  const conf = join(root, 'etc/nginx/nginx.conf');
  editFile(conf, (t) => t.replace(/^user npm;/m, `load_module ${streamModulePath()}; # user npm;`));
  if (!referenceKnowsHttp2Directive()) {
    for (const f of ['proxy_host/1.conf', 'proxy_host/2.conf', 'redirection_host/1.conf', 'dead_host/1.conf', 'default_host/site.conf']) {
      editFile(join(root, 'data/nginx', f), (t) => t.replace(/^(\s*)(http2 \w+;)/gm, '$1# $2'));
    }
  }
  certAt(join(root, 'etc/letsencrypt/live/npm-1/fullchain.pem'), join(root, 'etc/letsencrypt/live/npm-1/privkey.pem'));
  certAt(join(root, 'etc/letsencrypt/live/npm-3/fullchain.pem'), join(root, 'etc/letsencrypt/live/npm-3/privkey.pem'));
  certAt(join(root, 'data/custom_ssl/npm-2/fullchain.pem'), join(root, 'data/custom_ssl/npm-2/privkey.pem'));
  for (const d of ['data/logs', 'var/lib/nginx/cache', 'tmp/nginx', 'run/nginx', 'data/letsencrypt-acme-challenge', 'etc/nginx/logs']) {
    mkdirSync(join(root, d), { recursive: true });
  }
  return { root, prefix: join(root, 'etc/nginx'), conf };
}

/**
 * Debian's stock /etc/nginx: `/etc/nginx`, `/var/log/nginx`, `/run/nginx.pid`
 * and the snakeoil certificate paths moved into a temp root, port 80 moved to
 * a free port. `user www-data;` stays (the user exists on Debian).
 * With `ssl`, the default site's commented SSL lines (`listen 443 ssl
 * default_server`, `include snippets/snakeoil.conf;`) are enabled too.
 */
export async function prepareDebian(opts: { ssl?: boolean } = {}): Promise<PreparedTree> {
  const root = copyTree(join(SHARED, 'corpus/debian/etc'), 'jinx-debian-', 'etc');
  const base = join(root, 'etc/nginx');
  const port = await freePort();
  const sslPort = await freePort();
  rewriteTree(root, [
    movePaths(root, ['/etc/nginx', '/var/log/nginx', '/run/nginx.pid', '/etc/ssl/certs/ssl-cert-snakeoil.pem', '/etc/ssl/private/ssl-cert-snakeoil.key']),
    [/\blisten(\s+)(\[::\]:)?80\b/g, `listen$1$2${port}`],
    [/\blisten(\s+)(\[::\]:)?443\b/g, `listen$1$2${sslPort}`],
  ]);
  if (opts.ssl) {
    for (const f of ['sites-available/default', 'sites-enabled/default']) {
      editFile(join(base, f), (t) => t
        .replace(/^\t# (listen (\[::\]:)?\d+ ssl default_server;)/gm, '\t$1')
        .replace(/^\t# (include snippets\/snakeoil\.conf;)/m, '\t$1'));
    }
  }
  certAt(join(root, 'etc/ssl/certs/ssl-cert-snakeoil.pem'), join(root, 'etc/ssl/private/ssl-cert-snakeoil.key'));
  for (const d of ['var/log/nginx', 'run', 'etc/nginx/modules-enabled', 'etc/nginx/conf.d', 'etc/nginx/logs']) mkdirSync(join(root, d), { recursive: true });
  return { root, prefix: base, conf: join(base, 'nginx.conf') };
}

/** The scenario's ports, in the order of its PORT_LAYOUT (scenario.sh). */
const SCENARIO_PORTS = ['HTTP', 'HTTPS', 'ADMIN', 'ADMIN_BACKEND', 'APP', 'AUTH', 'DEAD', 'FPM', 'DNS', 'DEAD_AUTH'] as const;

/**
 * The scenario's config tree rendered as `../shared/scenario/run` does:
 * `conf/` copied to PREFIX/conf, `@PREFIX@` and `@PORT_*@` replaced, the
 * MAKE_DIRS created and the certificate made. Prefix: PREFIX/.
 */
export async function prepareScenario(): Promise<PreparedTree> {
  const root = copyTree(join(SHARED, 'scenario/conf'), 'jinx-scenario-', 'conf');
  const confDir = join(root, 'conf');
  const reps: [string, string][] = [['@PREFIX@', root]];
  for (const name of SCENARIO_PORTS) reps.push([`@PORT_${name}@`, String(await freePort())]);
  rewriteTree(confDir, reps);
  for (const d of ['out', 'data', 'logs', 'run', 'tmp', 'letsencrypt-acme-challenge']) mkdirSync(join(root, d), { recursive: true });
  if (existsSync(join(SHARED, 'scenario/www'))) cpSync(join(SHARED, 'scenario/www'), join(root, 'www'), { recursive: true });
  certAt(join(root, 'custom_ssl/npm-1/fullchain.pem'), join(root, 'custom_ssl/npm-1/privkey.pem'));
  return { root, prefix: root, conf: join(confDir, 'nginx.conf') };
}
