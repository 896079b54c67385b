/**
 * What `jinx -v` and `jinx -V` print, in nginx's format so that tools that
 * parse it keep working: the nginx release jinx follows, jinx's own version,
 * and configure arguments that truthfully say which nginx modules jinx has.
 * The module list is read off the directive table, so it cannot drift from
 * what jinx does: a module is built in when its key directive takes effect
 * (`effect: 'runtime'`), and is then named `--with-…` if nginx builds it only
 * on request; a default module jinx lacks is named `--without-…`, as
 * nginx's `auto/options` spells them.
 */
import type { DirectiveSpec } from '../config/spec.js';
import { allDirectives } from '../config/modules/index.js';
import { JINX_VERSION, NGINX_VERSION } from '../version.js';

/** Default paths, the same as Debian's nginx package. */
export const DEFAULT_PREFIX = '/usr/share/nginx/';
export const DEFAULT_CONF = '/etc/nginx/nginx.conf';

/**
 * One of nginx's configure-time modules: its option name (`http_gzip_module`
 * in `--without-http_gzip_module`), whether nginx builds it by default, and
 * the directive (of the named nginx module) whose effect tells whether jinx
 * has it.
 */
interface ConfigureModule {
  readonly option: string;
  readonly builtByDefault: boolean;
  readonly module: string;
  readonly directive: string;
}

const m = (option: string, builtByDefault: boolean, module: string, directive: string): ConfigureModule => ({ option, builtByDefault, module, directive });

/** nginx's HTTP and stream modules that configure can add or leave out (`auto/options`), in its order. */
const CONFIGURE_MODULES: readonly ConfigureModule[] = [
  m('http_ssl_module', false, 'ngx_http_ssl_module', 'ssl_certificate'),
  m('http_v2_module', false, 'ngx_http_v2_module', 'http2'),
  m('http_realip_module', false, 'ngx_http_realip_module', 'set_real_ip_from'),
  m('http_addition_module', false, 'ngx_http_addition_filter_module', 'add_before_body'),
  m('http_sub_module', false, 'ngx_http_sub_filter_module', 'sub_filter'),
  m('http_dav_module', false, 'ngx_http_dav_module', 'dav_methods'),
  m('http_flv_module', false, 'ngx_http_flv_module', 'flv'),
  m('http_mp4_module', false, 'ngx_http_mp4_module', 'mp4'),
  m('http_gunzip_module', false, 'ngx_http_gunzip_filter_module', 'gunzip'),
  m('http_gzip_static_module', false, 'ngx_http_gzip_static_module', 'gzip_static'),
  m('http_auth_request_module', false, 'ngx_http_auth_request_module', 'auth_request'),
  m('http_random_index_module', false, 'ngx_http_random_index_module', 'random_index'),
  m('http_secure_link_module', false, 'ngx_http_secure_link_module', 'secure_link'),
  m('http_slice_module', false, 'ngx_http_slice_filter_module', 'slice'),
  m('http_stub_status_module', false, 'ngx_http_stub_status_module', 'stub_status'),
  m('http-cache', true, 'ngx_http_proxy_module', 'proxy_cache'),
  m('http_charset_module', true, 'ngx_http_charset_filter_module', 'charset'),
  m('http_gzip_module', true, 'ngx_http_gzip_filter_module', 'gzip'),
  m('http_ssi_module', true, 'ngx_http_ssi_filter_module', 'ssi'),
  m('http_userid_module', true, 'ngx_http_userid_filter_module', 'userid'),
  m('http_access_module', true, 'ngx_http_access_module', 'allow'),
  m('http_auth_basic_module', true, 'ngx_http_auth_basic_module', 'auth_basic'),
  m('http_mirror_module', true, 'ngx_http_mirror_module', 'mirror'),
  m('http_autoindex_module', true, 'ngx_http_autoindex_module', 'autoindex'),
  m('http_geo_module', true, 'ngx_http_geo_module', 'geo'),
  m('http_map_module', true, 'ngx_http_map_module', 'map'),
  m('http_split_clients_module', true, 'ngx_http_split_clients_module', 'split_clients'),
  m('http_referer_module', true, 'ngx_http_referer_module', 'valid_referers'),
  m('http_rewrite_module', true, 'ngx_http_rewrite_module', 'rewrite'),
  m('http_proxy_module', true, 'ngx_http_proxy_module', 'proxy_pass'),
  m('http_fastcgi_module', true, 'ngx_http_fastcgi_module', 'fastcgi_pass'),
  m('http_uwsgi_module', true, 'ngx_http_uwsgi_module', 'uwsgi_pass'),
  m('http_scgi_module', true, 'ngx_http_scgi_module', 'scgi_pass'),
  m('http_grpc_module', true, 'ngx_http_grpc_module', 'grpc_pass'),
  m('http_memcached_module', true, 'ngx_http_memcached_module', 'memcached_pass'),
  m('http_limit_conn_module', true, 'ngx_http_limit_conn_module', 'limit_conn'),
  m('http_limit_req_module', true, 'ngx_http_limit_req_module', 'limit_req'),
  m('http_empty_gif_module', true, 'ngx_http_empty_gif_module', 'empty_gif'),
  m('http_browser_module', true, 'ngx_http_browser_module', 'modern_browser'),
  m('http_upstream_hash_module', true, 'ngx_http_upstream_hash_module', 'hash'),
  m('http_upstream_ip_hash_module', true, 'ngx_http_upstream_ip_hash_module', 'ip_hash'),
  m('http_upstream_least_conn_module', true, 'ngx_http_upstream_least_conn_module', 'least_conn'),
  m('http_upstream_random_module', true, 'ngx_http_upstream_random_module', 'random'),
  m('http_upstream_keepalive_module', true, 'ngx_http_upstream_keepalive_module', 'keepalive'),
  m('http_upstream_zone_module', true, 'ngx_http_upstream_zone_module', 'zone'),
  m('stream', false, 'ngx_stream_module', 'stream'),
  m('stream_ssl_module', false, 'ngx_stream_ssl_module', 'ssl_certificate'),
  m('stream_realip_module', false, 'ngx_stream_realip_module', 'set_real_ip_from'),
  m('stream_ssl_preread_module', false, 'ngx_stream_ssl_preread_module', 'ssl_preread'),
  m('stream_limit_conn_module', true, 'ngx_stream_limit_conn_module', 'limit_conn'),
  m('stream_access_module', true, 'ngx_stream_access_module', 'allow'),
  m('stream_geo_module', true, 'ngx_stream_geo_module', 'geo'),
  m('stream_map_module', true, 'ngx_stream_map_module', 'map'),
  m('stream_split_clients_module', true, 'ngx_stream_split_clients_module', 'split_clients'),
  m('stream_return_module', true, 'ngx_stream_return_module', 'return'),
  m('stream_pass_module', true, 'ngx_stream_pass_module', 'pass'),
  m('stream_set_module', true, 'ngx_stream_set_module', 'set'),
  m('stream_upstream_hash_module', true, 'ngx_stream_upstream_hash_module', 'hash'),
  m('stream_upstream_least_conn_module', true, 'ngx_stream_upstream_least_conn_module', 'least_conn'),
  m('stream_upstream_random_module', true, 'ngx_stream_upstream_random_module', 'random'),
  m('stream_upstream_zone_module', true, 'ngx_stream_upstream_zone_module', 'zone'),
];

/**
 * The `--with-…`/`--without-…` options for `directives`: optional modules
 * whose key directive takes effect, default ones whose key directive does
 * not (or is unknown).
 */
export function moduleOptions(directives: readonly DirectiveSpec[]): string[] {
  const effective = new Set(directives.filter((d) => d.effect === 'runtime').map((d) => `${d.module} ${d.name}`));
  const out: string[] = [];
  for (const mod of CONFIGURE_MODULES) {
    const has = effective.has(`${mod.module} ${mod.directive}`);
    if (has && !mod.builtByDefault) out.push(`--with-${mod.option}`);
    else if (!has && mod.builtByDefault) out.push(`--without-${mod.option}`);
  }
  return out;
}

/** The first line of `-v` and `-V`. */
export function versionLine(): string {
  return `nginx version: nginx/${NGINX_VERSION} (jinx ${JINX_VERSION})`;
}

/** The whole `-V` text. */
export function buildInfo(): string {
  const args = [
    `--prefix=${DEFAULT_PREFIX.replace(/\/$/, '')}`, `--conf-path=${DEFAULT_CONF}`, '--error-log-path=stderr',
    '--http-log-path=logs/access.log', '--pid-path=logs/nginx.pid', ...moduleOptions(allDirectives),
    // the debug log: `error_log FILE debug` writes nginx's debug lines of a request's head and location
    '--with-debug',
  ];
  return [
    versionLine(),
    `built by jinx ${JINX_VERSION} on Node.js ${process.version}`,
    `built with OpenSSL ${process.versions.openssl}`,
    'TLS SNI support enabled',
    `configure arguments: ${args.join(' ')}`,
  ].join('\n');
}
