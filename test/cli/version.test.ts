import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { ROOT, runJinx } from '../helpers/harness.js';
import { referenceImpl, runImpl } from '../helpers/cli.js';
import { moduleOptions } from '../../src/cli/build-info.js';
import type { DirectiveSpec } from '../../src/config/spec.js';

const PKG_VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
const VERSION_LINE = /^nginx version: nginx\/(\d+\.\d+\.\d+) \(jinx (\d+\.\d+\.\d+)\)$/;

/**
 * The `--with-…`/`--without-…` options (without a value) that nginx's
 * `auto/options` accepts, for modules: `-V` must only name real ones, so
 * that scripts that grep for a module read it the way they read nginx's.
 */
const NGINX_MODULE_OPTIONS = new Set([
  // optional modules, --with-…
  'with-http_ssl_module', 'with-http_v2_module', 'with-http_v3_module', 'with-http_realip_module',
  'with-http_addition_module', 'with-http_xslt_module', 'with-http_image_filter_module', 'with-http_geoip_module',
  'with-http_sub_module', 'with-http_dav_module', 'with-http_flv_module', 'with-http_mp4_module',
  'with-http_gunzip_module', 'with-http_gzip_static_module', 'with-http_auth_request_module',
  'with-http_random_index_module', 'with-http_secure_link_module', 'with-http_degradation_module',
  'with-http_slice_module', 'with-http_stub_status_module', 'with-http_perl_module', 'with-mail',
  'with-mail_ssl_module', 'with-stream', 'with-stream_ssl_module', 'with-stream_realip_module',
  'with-stream_geoip_module', 'with-stream_ssl_preread_module', 'with-threads', 'with-file-aio', 'with-compat',
  'with-debug', 'with-pcre', 'with-pcre-jit', 'with-select_module', 'with-poll_module', 'with-google_perftools_module',
  'with-cpp_test_module', 'with-libatomic',
  // default modules, --without-…
  'without-http', 'without-http-cache', 'without-http_charset_module', 'without-http_gzip_module',
  'without-http_ssi_module', 'without-http_userid_module', 'without-http_access_module',
  'without-http_auth_basic_module', 'without-http_mirror_module', 'without-http_autoindex_module',
  'without-http_geo_module', 'without-http_map_module', 'without-http_split_clients_module',
  'without-http_referer_module', 'without-http_rewrite_module', 'without-http_proxy_module',
  'without-http_fastcgi_module', 'without-http_uwsgi_module', 'without-http_scgi_module', 'without-http_grpc_module',
  'without-http_memcached_module', 'without-http_limit_conn_module', 'without-http_limit_req_module',
  'without-http_empty_gif_module', 'without-http_browser_module', 'without-http_upstream_hash_module',
  'without-http_upstream_ip_hash_module', 'without-http_upstream_least_conn_module',
  'without-http_upstream_random_module', 'without-http_upstream_keepalive_module', 'without-http_upstream_zone_module',
  'without-mail_pop3_module', 'without-mail_imap_module', 'without-mail_smtp_module',
  'without-stream_limit_conn_module', 'without-stream_access_module', 'without-stream_geo_module',
  'without-stream_map_module', 'without-stream_split_clients_module', 'without-stream_return_module',
  'without-stream_pass_module', 'without-stream_set_module', 'without-stream_upstream_hash_module',
  'without-stream_upstream_least_conn_module', 'without-stream_upstream_random_module',
  'without-stream_upstream_zone_module', 'without-pcre', 'without-select_module', 'without-poll_module',
]);

describe('jinx -v and -V', () => {
  it('-v prints "nginx version: nginx/X.Y.Z (jinx X.Y.Z)" on stderr, nothing on stdout, exit 0', () => {
    const r = runJinx(['-v']);
    assert.equal(r.status, 0);
    assert.equal(r.stdout, '');
    const lines = r.stderr.split('\n');
    assert.equal(lines.length, 2, `one line and a newline: ${JSON.stringify(r.stderr)}`);
    assert.equal(lines[1], '');
    const m = VERSION_LINE.exec(lines[0]!);
    assert.ok(m, `version line: ${lines[0]}`);
    assert.equal(m[2], PKG_VERSION, 'jinx version from package.json');
  });

  it('-v names the same nginx release as the reference nginx 1.30', (t) => {
    const ref = referenceImpl();
    if (!ref || !ref.name.includes('1.30')) return t.skip('no reference nginx 1.30 installed');
    const nginx = runImpl(ref, ['-v']);
    assert.equal(nginx.status, 0);
    const jinx = runJinx(['-v']);
    // nginx's line plus jinx's own version in parentheses
    assert.equal(jinx.stderr, nginx.stderr.replace(/\n$/, ` (jinx ${PKG_VERSION})\n`));
  });

  it('-V prints the version line, build lines and "configure arguments:" with --with-/--without- options on stderr, exit 0', () => {
    const r = runJinx(['-V']);
    assert.equal(r.status, 0);
    assert.equal(r.stdout, '');
    const lines = r.stderr.trimEnd().split('\n');
    assert.match(lines[0]!, VERSION_LINE);
    assert.equal(lines.filter((l) => l === 'TLS SNI support enabled').length, 1);
    const configure = lines.at(-1)!;
    assert.match(configure, /^configure arguments: /);
    const args = configure.slice('configure arguments: '.length).split(' ');
    assert.ok(args.some((a) => a.startsWith('--with-')), 'has --with- options');
    for (const a of args) assert.match(a, /^--[a-z][a-z0-9_-]*(=\S+)?$/, `argument ${a}`);
    // what jinx implements and what it lacks, as the directive table says
    assert.ok(args.includes('--with-http_ssl_module'));
    assert.ok(args.includes('--with-http_auth_request_module'));
    assert.ok(args.includes('--with-http_dav_module'));
    // compression, charsets, server-side includes, request limits, the userid cookie, uwsgi, SCGI, gRPC and memcached are implemented
    for (const missing of [
      '--without-http_gzip_module', '--without-http_charset_module', '--without-http_ssi_module', '--without-http_limit_req_module',
      '--without-http_userid_module', '--without-http_uwsgi_module', '--without-http_scgi_module', '--without-http_grpc_module',
      '--without-http_memcached_module',
    ]) {
      assert.ok(!args.includes(missing), missing);
    }
    assert.ok(args.includes('--with-http_gzip_static_module') && args.includes('--with-http_gunzip_module'));
    // HTTP/2 and FastCGI are implemented: tools (and nginx's test suite) must not believe them missing
    assert.ok(args.includes('--with-http_v2_module'));
    assert.ok(!args.includes('--without-http_fastcgi_module'));
  });

  it('-V derives each module from its key directive: --with- when it takes effect, --without- for a default module when it does not', () => {
    const spec = (module: string, name: string, effect: 'runtime' | 'none'): DirectiveSpec =>
      ({ name, module, effect, contexts: [], args: [], set: () => undefined });
    const options = moduleOptions([
      spec('ngx_http_v2_module', 'http2', 'runtime'),
      spec('ngx_http_gzip_filter_module', 'gzip', 'none'),
      spec('ngx_http_proxy_module', 'proxy_pass', 'runtime'),
    ]);
    assert.ok(options.includes('--with-http_v2_module'));
    assert.ok(!options.includes('--with-http_ssl_module'), 'an optional module without directives is not named');
    assert.ok(options.includes('--without-http_gzip_module'), 'a default module accepted with no effect');
    assert.ok(options.includes('--without-http_fastcgi_module'), 'a default module with no directives');
    assert.ok(!options.includes('--without-http_proxy_module'));
  });

  it('-V names only module options that nginx\'s configure accepts', () => {
    const configure = runJinx(['-V']).stderr.trimEnd().split('\n').at(-1)!;
    const unknown = configure.slice('configure arguments: '.length).split(' ')
      .filter((a) => /^--with(out)?-/.test(a) && !a.includes('='))
      .map((a) => a.slice(2))
      .filter((a) => !NGINX_MODULE_OPTIONS.has(a));
    assert.deepEqual(unknown, [], 'nginx\'s configure rejects these options ("invalid option")');
  });

  it('-V with -t prints the version, then tests the configuration', () => {
    const r = runJinx(['-V', '-t', '-c', '/nonexistent/jinx-test/nginx.conf']);
    assert.equal(r.status, 1);
    assert.match(r.stderr, /^nginx version: nginx\//);
    assert.match(r.stderr, /configure arguments: /);
    assert.match(r.stderr, /\[emerg\] \d+#\d+: open\(\) "\/nonexistent\/jinx-test\/nginx.conf" failed \(2: No such file or directory\)\n/);
    assert.match(r.stderr, /nginx: configuration file \/nonexistent\/jinx-test\/nginx.conf test failed\n$/);
  });
});
