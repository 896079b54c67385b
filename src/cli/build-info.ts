/**
 * What `jinx -v` and `jinx -V` print, in nginx's format so that tools that
 * parse it keep working: the nginx release jinx follows, jinx's own version,
 * and configure arguments that truthfully say which nginx modules jinx has
 * (`--with-…` for optional ones it implements, `--without-…` for default
 * ones it lacks).
 */
import { JINX_VERSION, NGINX_VERSION } from '../version.js';

/** Default paths, the same as Debian's nginx package. */
export const DEFAULT_PREFIX = '/usr/share/nginx/';
export const DEFAULT_CONF = '/etc/nginx/nginx.conf';

/** nginx's optional modules that jinx implements. */
const WITH = ['http_ssl_module', 'http_realip_module', 'http_auth_request_module'];

/** nginx's default modules that jinx does not have (their directives are unknown or have no effect). */
const WITHOUT = [
  'http_charset_module', 'http_gzip_module', 'http_ssi_module', 'http_userid_module', 'http_mirror_module',
  'http_autoindex_module', 'http_geo_module', 'http_split_clients_module', 'http_referer_module', 'http_fastcgi_module',
  'http_uwsgi_module', 'http_scgi_module', 'http_grpc_module', 'http_memcached_module', 'http_limit_conn_module',
  'http_limit_req_module', 'http_empty_gif_module', 'http_browser_module', 'http_upstream_hash_module',
  'http_upstream_ip_hash_module', 'http_upstream_least_conn_module', 'http_upstream_random_module',
  'http_upstream_zone_module', 'http-cache',
];

/** The first line of `-v` and `-V`. */
export function versionLine(): string {
  return `nginx version: nginx/${NGINX_VERSION} (jinx ${JINX_VERSION})`;
}

/** The whole `-V` text. */
export function buildInfo(): string {
  const args = [
    `--prefix=${DEFAULT_PREFIX.replace(/\/$/, '')}`, `--conf-path=${DEFAULT_CONF}`, '--error-log-path=stderr',
    '--http-log-path=logs/access.log', '--pid-path=logs/nginx.pid',
    ...WITH.map((m) => `--with-${m}`), ...WITHOUT.map((m) => `--without-${m}`),
  ];
  return [
    versionLine(),
    `built by jinx ${JINX_VERSION} on Node.js ${process.version}`,
    `built with OpenSSL ${process.versions.openssl}`,
    'TLS SNI support enabled',
    `configure arguments: ${args.join(' ')}`,
  ].join('\n');
}
