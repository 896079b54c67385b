/**
 * One broken configuration per nginx message: `jinx -t` prints what the
 * reference `nginx -t` prints (same lines, same FILE:LINE, same exit status).
 * Fixtures are `fixtures/broken/<case>/nginx.conf` (+ included files), with
 * `@PORT@`/`@PORT2@`/`@PORT3@` (free ports), `@PREFIX@` and
 * `@STREAM_MODULE@` filled in a temp copy. `expect` is the message nginx 1.30
 * gives for the case: it guards the fixture (nginx must still print it), the
 * comparison itself is against the live reference, or without one against its
 * answer recorded in fixtures.recorded.json (keyed `KIND/CASE [FLAGS]`).
 *
 * `fixtures/valid/<case>/nginx.conf` are configurations nginx accepts: jinx
 * must accept them too, with the same output.
 *
 * `fixtures/unimplemented/<case>/nginx.conf` are configurations nginx accepts
 * with modules compiled into Debian's nginx that jinx deliberately does not
 * implement (README, "Directives": a directive missing from jinx's table is
 * an `unknown directive` error, as in an nginx built without its module).
 * Each states jinx's message instead of nginx's output.
 */
import { strict as assert } from 'node:assert';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { compareConfigTestAsync, makeCertificate, materializeFixture, type TestOutcome } from '../helpers/config-test.js';
import { streamModulePath } from '../helpers/corpus-trees.js';
import { cleanup, ROOT } from '../helpers/harness.js';

const FIXTURES = join(ROOT, 'test/differential/fixtures');
/** Fixtures are independent (own temp dir, own ports): run a few side by side. */
const concurrency = 4;

interface BrokenCase {
  /** Folder under fixtures/broken. */
  readonly name: string;
  /** The first message line nginx prints, normalized (`[level] MESSAGE in PREFIX/FILE:LINE`); undefined: none. */
  readonly expect: string | undefined;
  /** Flags besides `-t -p -c`. */
  readonly flags?: readonly string[];
  /** nginx's exit status, when the first message does not tell it (a warning before an error). */
  readonly status?: number;
  /**
   * jinx's first message where it deliberately differs: the fixture needs a
   * directive of a module jinx does not implement (see README).
   */
  readonly jinx?: string;
}

/** Every fixture under fixtures/broken, with nginx 1.30's message for it. */
const BROKEN: readonly BrokenCase[] = [
  { name: 'access-log-buffer-invalid', expect: '[emerg] invalid buffer size "big" in PREFIX/nginx.conf:6' },
  { name: 'access-log-buffered-variable-name', expect: '[emerg] buffered logs cannot have variables in name in PREFIX/nginx.conf:6' },
  { name: 'access-log-directory-missing', expect: '[emerg] open() "PREFIX/nodir/access.log" failed (2: No such file or directory)' },
  { name: 'access-log-flush-without-buffer', expect: '[emerg] no buffer is defined for access_log "logs/a.log" in PREFIX/nginx.conf:6' },
  { name: 'access-log-gzip-level-invalid', expect: '[emerg] invalid compression level "10" in PREFIX/nginx.conf:6' },
  { name: 'access-log-invalid-parameter', expect: '[emerg] invalid parameter "bogus" in PREFIX/nginx.conf:6' },
  { name: 'access-log-unknown-format', expect: '[emerg] unknown log format "nosuchformat" in PREFIX/nginx.conf:6' },
  { name: 'add-header-in-server-if', expect: '[emerg] "add_header" directive is not allowed here in PREFIX/nginx.conf:7' },
  { name: 'add-header-invalid-parameter', expect: '[emerg] invalid parameter "sometimes" in PREFIX/nginx.conf:6' },
  { name: 'aio-on-unsupported', expect: '[emerg] "aio on" is unsupported on this platform in PREFIX/nginx.conf:4' },
  { name: 'alias-after-root', expect: '[emerg] "alias" directive is duplicate, "root" directive was specified earlier in PREFIX/nginx.conf:8' },
  { name: 'alias-in-server', expect: '[emerg] "alias" directive is not allowed here in PREFIX/nginx.conf:6' },
  { name: 'allow-invalid-address', expect: '[emerg] invalid parameter "10.0.0.300" in PREFIX/nginx.conf:7' },
  { name: 'allow-short-address', expect: '[emerg] invalid parameter "10" in PREFIX/nginx.conf:7' },
  { name: 'auth-basic-duplicate', expect: '[emerg] "auth_basic" directive is duplicate in PREFIX/nginx.conf:8' },
  { name: 'auth-basic-user-file-in-if', expect: '[emerg] "auth_basic_user_file" directive is not allowed here in PREFIX/nginx.conf:8' },
  { name: 'auth-request-set-invalid-name', expect: '[emerg] invalid variable name "user" in PREFIX/nginx.conf:8' },
  { name: 'auth-request-two-arguments', expect: '[emerg] invalid number of arguments in "auth_request" directive in PREFIX/nginx.conf:7' },
  { name: 'autoindex-format-invalid', expect: '[emerg] invalid value "yaml" in PREFIX/nginx.conf:7' },
  { name: 'autoindex-invalid', expect: '[emerg] invalid value "maybe" in "autoindex" directive, it must be "on" or "off" in PREFIX/nginx.conf:7' },
  { name: 'bitmask-duplicate-value-warning', expect: '[warn] duplicate value "error" in PREFIX/nginx.conf:7' },
  { name: 'break-with-argument', expect: '[emerg] invalid number of arguments in "break" directive in PREFIX/nginx.conf:7' },
  { name: 'charset-map-duplicate', expect: '[emerg] duplicate "charset_map" between "windows-1251" and "koi8-r" in PREFIX/nginx.conf:7' },
  { name: 'charset-map-invalid-value', expect: '[emerg] invalid value "1FF" in PREFIX/nginx.conf:6' },
  { name: 'charset-map-missing', expect: '[emerg] no "charset_map" between the charsets "koi8-r" and "windows-1251"' },
  { name: 'charset-map-parameters-number', expect: '[emerg] invalid parameters number in PREFIX/nginx.conf:5' },
  { name: 'charset-map-same-charsets', expect: '[emerg] "charset_map" between the same charsets "koi8-r" and "KOI8-R" in PREFIX/nginx.conf:4' },
  { name: 'charset-map-utf8-invalid', expect: '[emerg] invalid value "41" in PREFIX/nginx.conf:6' },
  { name: 'charset-unknown-variable', expect: '[emerg] unknown "no_such_charset" variable' },
  { name: 'client-body-temp-path-invalid-level', expect: '[emerg] "client_body_temp_path" directive invalid value in PREFIX/nginx.conf:4' },
  { name: 'client-max-body-size-invalid', expect: '[emerg] "client_max_body_size" directive invalid value in PREFIX/nginx.conf:6' },
  { name: 'daemon-invalid', expect: '[emerg] invalid value "yes" in "daemon" directive, it must be "on" or "off" in PREFIX/nginx.conf:1' },
  { name: 'dav-access-invalid', expect: '[emerg] invalid value "owner:rw" in PREFIX/nginx.conf:7' },
  { name: 'dav-methods-invalid', expect: '[emerg] invalid value "PROPFIND" in PREFIX/nginx.conf:7' },
  { name: 'default-type-duplicate', expect: '[emerg] "default_type" directive is duplicate in PREFIX/nginx.conf:7' },
  { name: 'deny-in-if-not-allowed', expect: '[emerg] "deny" directive is not allowed here in PREFIX/nginx.conf:8' },
  { name: 'directive-in-main-not-allowed', expect: '[emerg] "listen" directive is not allowed here in PREFIX/nginx.conf:1' },
  { name: 'disable-symlinks-from-with-off', expect: '[emerg] "from=" cannot be used with "off" parameter in PREFIX/nginx.conf:4' },
  { name: 'duplicate-default-server', expect: '[emerg] a duplicate default server for 127.0.0.1:@PORT@ in PREFIX/nginx.conf:8' },
  { name: 'duplicate-flag', expect: '[emerg] "proxy_buffering" directive is duplicate in PREFIX/nginx.conf:8' },
  { name: 'duplicate-location', expect: '[emerg] duplicate location "/" in PREFIX/nginx.conf:8' },
  { name: 'eof-expecting-close-brace', expect: '[emerg] unexpected end of file, expecting "}" in PREFIX/nginx.conf:7' },
  { name: 'eof-expecting-semicolon-or-brace', expect: '[emerg] unexpected end of file, expecting ";" or "}" in PREFIX/nginx.conf:5' },
  { name: 'error-log-directory-missing', expect: '[emerg] open() "PREFIX/nodir/error.log" failed (2: No such file or directory)' },
  { name: 'error-log-invalid-level', expect: '[emerg] invalid log level "loud" in PREFIX/nginx.conf:1' },
  { name: 'error-page-invalid-code', expect: '[emerg] invalid value "abc" in PREFIX/nginx.conf:6' },
  { name: 'error-page-invalid-response-code', expect: '[emerg] invalid value "=abc" in PREFIX/nginx.conf:6' },
  { name: 'error-page-out-of-range', expect: '[emerg] value "200" must be between 300 and 599 in PREFIX/nginx.conf:6' },
  { name: 'events-duplicate', expect: '[emerg] "events" directive is duplicate in PREFIX/nginx.conf:2' },
  { name: 'events-in-http', expect: '[emerg] "events" directive is not allowed here in PREFIX/nginx.conf:4' },
  { name: 'events-use-unknown', expect: '[emerg] invalid event type "kqueue" in PREFIX/nginx.conf:2' },
  { name: 'expires-duplicate', expect: '[emerg] "expires" directive is duplicate in PREFIX/nginx.conf:8' },
  { name: 'expires-invalid', expect: '[emerg] "expires" directive invalid value in PREFIX/nginx.conf:6' },
  { name: 'fastcgi-buffering-invalid', expect: '[emerg] invalid value "maybe" in "fastcgi_buffering" directive, it must be "on" or "off" in PREFIX/nginx.conf:7' },
  {
    name: 'fastcgi-busy-buffers-too-large', expect: '[emerg] "fastcgi_busy_buffers_size" must be less than the size of all "fastcgi_buffers" minus one buffer in PREFIX/nginx.conf:8',
  },
  { name: 'fastcgi-cache-without-key-warning', expect: '[warn] no "fastcgi_cache_key" for "fastcgi_cache" in PREFIX/nginx.conf:11' },
  { name: 'fastcgi-param-in-if', expect: '[emerg] "fastcgi_param" directive is not allowed here in PREFIX/nginx.conf:8' },
  { name: 'fastcgi-param-one-argument', expect: '[emerg] invalid number of arguments in "fastcgi_param" directive in PREFIX/nginx.conf:7' },
  { name: 'fastcgi-pass-duplicate', expect: '[emerg] "fastcgi_pass" directive is duplicate in PREFIX/nginx.conf:8' },
  { name: 'fastcgi-pass-host-not-found', expect: '[emerg] host not found in upstream "no-such-host.invalid" in PREFIX/nginx.conf:7' },
  { name: 'fastcgi-read-timeout-invalid', expect: '[emerg] "fastcgi_read_timeout" directive invalid value in PREFIX/nginx.conf:7' },
  { name: 'fastcgi-split-path-info-invalid-regex', expect: '[emerg] pcre2_compile() failed: missing closing parenthesis in "^(.+\\.php)(/.+" in PREFIX/nginx.conf:7' },
  { name: 'fastcgi-split-path-info-one-capture', expect: '[emerg] pattern "^(.+\\.php)$" must have 2 captures in PREFIX/nginx.conf:7' },
  { name: 'global-duplicate-daemon', expect: '[emerg] "daemon" directive is duplicate in PREFIX/nginx.conf:1', flags: ['-g', 'daemon on;'] },
  { name: 'global-missing-semicolon', expect: '[emerg] unexpected end of parameter, expecting ";" in command line', flags: ['-g', 'daemon on'] },
  { name: 'global-unknown-directive', expect: '[emerg] unknown directive "foo" in command line', flags: ['-g', 'foo;'] },
  { name: 'gunzip-buffers-invalid', expect: '[emerg] "gunzip_buffers" directive invalid value in PREFIX/nginx.conf:6' },
  { name: 'grpc-next-upstream-updating', expect: '[emerg] invalid value "updating" in PREFIX/nginx.conf:7' },
  { name: 'grpc-pass-duplicate', expect: '[emerg] "grpc_pass" directive is duplicate in PREFIX/nginx.conf:8' },
  { name: 'grpc-pass-no-port', expect: '[emerg] no port in upstream "127.0.0.1" in PREFIX/nginx.conf:7' },
  { name: 'grpc-pass-with-uri', expect: '[emerg] invalid host in upstream "127.0.0.1:9000/service" in PREFIX/nginx.conf:7' },
  { name: 'grpc-ssl-verify-without-trusted-certificate', expect: '[emerg] no grpc_ssl_trusted_certificate for grpc_ssl_verify' },
  { name: 'gzip-buffers-invalid', expect: '[emerg] "gzip_buffers" directive invalid value in PREFIX/nginx.conf:6' },
  { name: 'gzip-comp-level-out-of-range', expect: '[emerg] value must be between 1 and 9 in PREFIX/nginx.conf:6' },
  { name: 'gzip-disable-invalid-regex', expect: '[emerg] pcre2_compile() failed: missing closing parenthesis in "msie(" in PREFIX/nginx.conf:4' },
  { name: 'gzip-hash-invalid', expect: '[emerg] "gzip_hash" directive must be 512, 1k, 2k, 4k, 8k, 16k, 32k, 64k, or 128k in PREFIX/nginx.conf:6' },
  { name: 'gzip-http-version-invalid', expect: '[emerg] invalid value "2.0" in PREFIX/nginx.conf:6' },
  { name: 'gzip-invalid', expect: '[emerg] invalid value "maybe" in "gzip" directive, it must be "on" or "off" in PREFIX/nginx.conf:6' },
  { name: 'gzip-min-length-invalid', expect: '[emerg] "gzip_min_length" directive invalid value in PREFIX/nginx.conf:6' },
  { name: 'gzip-proxied-invalid', expect: '[emerg] invalid value "sometimes" in PREFIX/nginx.conf:6' },
  { name: 'gzip-types-duplicate-warning', expect: '[warn] duplicate MIME type "text/html" in PREFIX/nginx.conf:4' },
  { name: 'gzip-types-in-if', expect: '[emerg] "gzip_types" directive is not allowed here in PREFIX/nginx.conf:8' },
  { name: 'gzip-window-invalid', expect: '[emerg] "gzip_window" directive must be 512, 1k, 2k, 4k, 8k, 16k, or 32k in PREFIX/nginx.conf:6' },
  { name: 'host-not-found-in-upstream', expect: '[emerg] host not found in upstream "no-such-host.invalid" in PREFIX/nginx.conf:7' },
  { name: 'http-duplicate', expect: '[emerg] "http" directive is duplicate in PREFIX/nginx.conf:4' },
  { name: 'http2-in-location', expect: '[emerg] "http2" directive is not allowed here in PREFIX/nginx.conf:7' },
  { name: 'http2-invalid', expect: '[emerg] invalid value "maybe" in "http2" directive, it must be "on" or "off" in PREFIX/nginx.conf:6' },
  { name: 'http2-max-concurrent-streams-invalid', expect: '[emerg] "http2_max_concurrent_streams" directive invalid number in PREFIX/nginx.conf:6' },
  { name: 'http2-push-preload-obsolete-warning', expect: '[warn] the "http2_push_preload" directive is obsolete, ignored in PREFIX/nginx.conf:6' },
  {
    name: 'http2-recv-timeout-obsolete-warning', expect: '[warn] the "http2_recv_timeout" directive is obsolete, use the "client_header_timeout" directive instead in PREFIX/nginx.conf:4',
  },
  { name: 'if-in-http', expect: '[emerg] "if" directive is not allowed here in PREFIX/nginx.conf:4' },
  { name: 'if-invalid-condition', expect: '[emerg] invalid condition "$request_method" in PREFIX/nginx.conf:7' },
  { name: 'if-invalid-file-test', expect: '[emerg] invalid condition "-q" in PREFIX/nginx.conf:7' },
  { name: 'if-missing-closing-paren', expect: '[emerg] invalid condition "GET" in PREFIX/nginx.conf:7' },
  { name: 'if-modified-since-invalid', expect: '[emerg] invalid value "sometimes" in PREFIX/nginx.conf:6' },
  { name: 'if-unexpected-operator', expect: '[emerg] unexpected "==" in condition in PREFIX/nginx.conf:7' },
  { name: 'include-error-in-included-file', expect: '[emerg] invalid value "sometimes" in "proxy_buffering" directive, it must be "on" or "off" in PREFIX/sub/site.conf:2' },
  { name: 'include-in-included-file-missing', expect: '[emerg] open() "PREFIX/b.conf" failed (2: No such file or directory) in PREFIX/a.conf:3' },
  { name: 'include-missing-file', expect: '[emerg] open() "PREFIX/missing.conf" failed (2: No such file or directory) in PREFIX/nginx.conf:6' },
  { name: 'internal-with-argument', expect: '[emerg] invalid number of arguments in "internal" directive in PREFIX/nginx.conf:7' },
  { name: 'invalid-flag-value', expect: '[emerg] invalid value "maybe" in "proxy_buffering" directive, it must be "on" or "off" in PREFIX/nginx.conf:7' },
  { name: 'invalid-location-modifier', expect: '[emerg] invalid location modifier "~~" in PREFIX/nginx.conf:6' },
  { name: 'invalid-time-value', expect: '[emerg] "proxy_read_timeout" directive invalid value in PREFIX/nginx.conf:7' },
  { name: 'keepalive-disable-invalid', expect: '[emerg] invalid value "netscape" in PREFIX/nginx.conf:6' },
  { name: 'keepalive-timeout-invalid', expect: '[emerg] "keepalive_timeout" directive invalid value in PREFIX/nginx.conf:6' },
  {
    name: 'large-client-header-buffers-below-pool-size',
    expect: '[emerg] the "large_client_header_buffers" size must be equal to or greater than "connection_pool_size" in PREFIX/nginx.conf:11',
  },
  { name: 'limit-except-invalid-method', expect: '[emerg] invalid method "FETCH" in PREFIX/nginx.conf:7' },
  { name: 'limit-rate-invalid', expect: '[emerg] "limit_rate" directive invalid value in PREFIX/nginx.conf:6' },
  { name: 'limit-req-burst-invalid', expect: '[emerg] invalid burst value "burst=0" in PREFIX/nginx.conf:7' },
  { name: 'limit-req-delay-invalid', expect: '[emerg] invalid delay value "delay=soon" in PREFIX/nginx.conf:7' },
  { name: 'limit-req-duplicate', expect: '[emerg] "limit_req" directive is duplicate in PREFIX/nginx.conf:8' },
  { name: 'limit-req-invalid-parameter', expect: '[emerg] invalid parameter "please" in PREFIX/nginx.conf:7' },
  { name: 'limit-req-log-level-invalid', expect: '[emerg] invalid value "debug" in PREFIX/nginx.conf:7' },
  { name: 'limit-req-status-out-of-range', expect: '[emerg] value must be between 400 and 599 in PREFIX/nginx.conf:7' },
  { name: 'limit-req-unknown-zone', expect: '[emerg] zero size shared memory zone "two"' },
  { name: 'limit-req-without-zone', expect: '[emerg] "limit_req" must have "zone" parameter in PREFIX/nginx.conf:7' },
  { name: 'limit-req-zone-bound-key', expect: '[emerg] limit_req_zone "one" is already bound to key "$binary_remote_addr" in PREFIX/nginx.conf:5' },
  { name: 'limit-req-zone-different-use', expect: '[emerg] the shared memory zone "one" is already declared for a different use in PREFIX/nginx.conf:5' },
  { name: 'limit-req-zone-invalid', expect: '[emerg] invalid rate "rate=fast" in PREFIX/nginx.conf:4' },
  { name: 'limit-req-zone-size-conflict', expect: '[emerg] the size 2097152 of shared memory zone "one" conflicts with already declared size 1048576 in PREFIX/nginx.conf:5' },
  { name: 'limit-req-zone-size-invalid', expect: '[emerg] invalid zone size "zone=one" in PREFIX/nginx.conf:4' },
  { name: 'limit-req-zone-too-small', expect: '[emerg] zone "zone=one:16k" is too small in PREFIX/nginx.conf:4' },
  { name: 'limit-req-zone-without-zone', expect: '[emerg] "limit_req_zone" must have "zone" parameter in PREFIX/nginx.conf:4' },
  { name: 'lingering-close-invalid', expect: '[emerg] invalid value "sometimes" in PREFIX/nginx.conf:6' },
  { name: 'listen-address-not-local', expect: '[emerg] bind() to 192.0.2.1:@PORT2@ failed (99: Cannot assign requested address)' },
  { name: 'listen-duplicate-in-server', expect: '[emerg] a duplicate listen 127.0.0.1:@PORT@ in PREFIX/nginx.conf:6' },
  { name: 'listen-host-not-found', expect: '[emerg] host not found in "no-such-host.invalid:@PORT2@" of the "listen" directive in PREFIX/nginx.conf:6' },
  { name: 'listen-http2-deprecated-warning', expect: '[warn] the "listen ... http2" directive is deprecated, use the "http2" directive instead in PREFIX/nginx.conf:6' },
  { name: 'listen-invalid-parameter', expect: '[emerg] invalid parameter "bogus" in PREFIX/nginx.conf:6' },
  { name: 'listen-invalid-port', expect: '[emerg] invalid port in "127.0.0.1:99999" of the "listen" directive in PREFIX/nginx.conf:6' },
  { name: 'listen-port-range-backwards', expect: '[emerg] invalid port range in "127.0.0.1:8183-8182" of the "listen" directive in PREFIX/nginx.conf:6' },
  { name: 'listen-unix-no-path', expect: '[emerg] no path in the unix domain socket in "unix:" of the "listen" directive in PREFIX/nginx.conf:6' },
  { name: 'listen-unix-duplicate-in-server', expect: '[emerg] a duplicate listen unix:PREFIX/app.sock in PREFIX/nginx.conf:7' },
  { name: 'listen-ipv6only-invalid', expect: '[emerg] invalid ipv6only flags "ox" in PREFIX/nginx.conf:5' },
  { name: 'listen-no-arguments', expect: '[emerg] invalid number of arguments in "listen" directive in PREFIX/nginx.conf:6' },
  { name: 'listen-not-terminated', expect: '[emerg] directive "listen" is not terminated by ";" in PREFIX/nginx.conf:6' },
  { name: 'listen-so-keepalive-invalid', expect: '[emerg] invalid so_keepalive value: "::" in PREFIX/nginx.conf:5' },
  { name: 'load-module-missing-file', expect: '[emerg] dlopen() "PREFIX/modules/ngx_nope_module.so" failed (PREFIX/modules/ngx_nope_module.so: cannot open shared object file: No such file or directory) in PREFIX/nginx.conf:1' },
  {
    name: 'load-module-not-elf', expect: '[emerg] dlopen() "PREFIX/not-a-module.so" failed (PREFIX/not-a-module.so: file too short) in PREFIX/nginx.conf:1',
  },
  { name: 'load-module-twice', expect: '[emerg] module "ngx_stream_module" is already loaded in PREFIX/nginx.conf:2' },
  { name: 'location-in-http', expect: '[emerg] "location" directive is not allowed here in PREFIX/nginx.conf:4' },
  { name: 'location-inside-exact', expect: '[emerg] location "/a/b" cannot be inside the exact location "/a" in PREFIX/nginx.conf:7' },
  { name: 'location-invalid-regex', expect: '[emerg] pcre2_compile() failed: missing closing parenthesis in "^/(a" in PREFIX/nginx.conf:6' },
  { name: 'location-outside-parent', expect: '[emerg] location "/b/" is outside location "/a/" in PREFIX/nginx.conf:7' },
  {
    name: 'location-regex-bracket-first-in-class', expect: '[emerg] pcre2_compile() failed: missing terminating ] for character class in "^/[]a" in PREFIX/nginx.conf:6',
  },
  {
    name: 'location-regex-duplicate-names', expect: '[emerg] pcre2_compile() failed: two named subpatterns have the same name (PCRE2_DUPNAMES not set) in "^/(?<x>a)(?<x>b)/" at "b)/" in PREFIX/nginx.conf:6',
  },
  {
    name: 'location-regex-code-point-too-large',
    expect: '[emerg] pcre2_compile() failed: character code point value in \\x{} or \\o{} is too large in "^/\\x{100}/" at "}/" in PREFIX/nginx.conf:6',
  },
  {
    name: 'location-regex-invalid-range',
    expect: '[emerg] pcre2_compile() failed: invalid range in character class in "^/[\\d-z]" at "z]" in PREFIX/nginx.conf:6',
  },
  {
    name: 'location-regex-lookbehind-unlimited',
    expect: '[emerg] pcre2_compile() failed: length of lookbehind assertion is not limited in "(?<=/a+)b" at "(?<=/a+)b" in PREFIX/nginx.conf:6',
  },
  {
    name: 'location-regex-missing-reference',
    expect: '[emerg] pcre2_compile() failed: reference to non-existent subpattern in "^/(a)\\2" in PREFIX/nginx.conf:6',
  },
  {
    name: 'location-regex-unknown-escape',
    expect: '[emerg] pcre2_compile() failed: unrecognized character follows \\ in "^/\\i" in PREFIX/nginx.conf:6',
  },
  {
    name: 'location-regex-unknown-posix-class',
    expect: '[emerg] pcre2_compile() failed: unknown POSIX class name in "^/[[:letters:]]+$" at "]+$" in PREFIX/nginx.conf:6',
  },
  {
    name: 'location-regex-nothing-to-repeat', expect: '[emerg] pcre2_compile() failed: quantifier does not follow a repeatable item in "*a" at "a" in PREFIX/nginx.conf:6',
  },
  { name: 'log-format-duplicate', expect: '[emerg] duplicate "log_format" name "main" in PREFIX/nginx.conf:5' },
  { name: 'log-format-duplicate-combined', expect: '[emerg] duplicate "log_format" name "combined" in PREFIX/nginx.conf:4' },
  { name: 'log-format-escape-invalid', expect: '[emerg] unknown log format escaping "bogus" in PREFIX/nginx.conf:4' },
  { name: 'log-format-in-server', expect: '[emerg] "log_format" directive is not allowed here in PREFIX/nginx.conf:6' },
  { name: 'log-format-unknown-variable', expect: '[emerg] unknown "no_such_thing" variable' },
  { name: 'low-address-bits-warning', expect: '[warn] low address bits of 10.1.1.1/8 are meaningless in PREFIX/nginx.conf:7' },
  { name: 'map-conflicting-parameter', expect: '[emerg] conflicting parameter "a" in PREFIX/nginx.conf:6' },
  { name: 'map-duplicate-default', expect: '[emerg] duplicate default map parameter in PREFIX/nginx.conf:6' },
  { name: 'map-in-server', expect: '[emerg] "map" directive is not allowed here in PREFIX/nginx.conf:6' },
  { name: 'map-invalid-variable-name', expect: '[emerg] invalid variable name "foo" in PREFIX/nginx.conf:4' },
  { name: 'map-too-many-parameters', expect: '[emerg] invalid number of the map parameters in PREFIX/nginx.conf:5' },
  { name: 'memcached-key-undefined', expect: '[emerg] unknown "memcached_key" variable' },
  { name: 'memcached-next-upstream-invalid', expect: '[emerg] invalid value "bogus" in PREFIX/nginx.conf:9' },
  { name: 'mp4-buffer-size-invalid', expect: '[emerg] "mp4_buffer_size" directive invalid value in PREFIX/nginx.conf:7' },
  { name: 'mp4-in-server', expect: '[emerg] "mp4" directive is not allowed here in PREFIX/nginx.conf:6' },
  // a directive of nginx's commercial build: unknown to nginx 1.30's open source mp4 module, as to jinx
  { name: 'mp4-limit-rate-unknown', expect: '[emerg] unknown directive "mp4_limit_rate" in PREFIX/nginx.conf:7' },
  { name: 'mp4-max-buffer-size-duplicate', expect: '[emerg] "mp4_max_buffer_size" directive is duplicate in PREFIX/nginx.conf:7' },
  { name: 'mp4-start-key-frame-invalid', expect: '[emerg] invalid value "yes" in "mp4_start_key_frame" directive, it must be "on" or "off" in PREFIX/nginx.conf:7' },
  { name: 'mp4-with-argument', expect: '[emerg] invalid number of arguments in "mp4" directive in PREFIX/nginx.conf:7' },
  { name: 'named-location-nested', expect: '[emerg] named location "@x" can be on the server level only in PREFIX/nginx.conf:7' },
  { name: 'no-events-section', expect: '[emerg] no "events" section in configuration' },
  { name: 'not-allowed-here', expect: '[emerg] "proxy_pass" directive is not allowed here in PREFIX/nginx.conf:4' },
  { name: 'open-file-cache-invalid', expect: '[emerg] invalid "open_file_cache" parameter "max=many" in PREFIX/nginx.conf:6' },
  { name: 'open-file-cache-without-max', expect: '[emerg] "open_file_cache" must have the "max" parameter in PREFIX/nginx.conf:4' },
  { name: 'open-log-file-cache-invalid', expect: '[emerg] invalid "open_log_file_cache" parameter "max=many" in PREFIX/nginx.conf:6' },
  { name: 'override-charset-invalid', expect: '[emerg] invalid value "yes" in "override_charset" directive, it must be "on" or "off" in PREFIX/nginx.conf:6' },
  { name: 'pcre-jit-invalid', expect: '[emerg] invalid value "maybe" in "pcre_jit" directive, it must be "on" or "off" in PREFIX/nginx.conf:1' },
  { name: 'proxy-buffer-size-invalid', expect: '[emerg] "proxy_buffer_size" directive invalid value in PREFIX/nginx.conf:7' },
  { name: 'proxy-buffers-invalid', expect: '[emerg] "proxy_buffers" directive invalid value in PREFIX/nginx.conf:7' },
  { name: 'proxy-buffers-too-few', expect: '[emerg] there must be at least 2 "proxy_buffers" in PREFIX/nginx.conf:10' },
  { name: 'proxy-busy-buffers-too-large', expect: '[emerg] "proxy_busy_buffers_size" must be less than the size of all "proxy_buffers" minus one buffer in PREFIX/nginx.conf:11' },
  { name: 'proxy-cache-path-no-zone', expect: '[emerg] "proxy_cache_path" must have "keys_zone" parameter in PREFIX/nginx.conf:4' },
  { name: 'proxy-cache-path-zone-too-small', expect: '[emerg] keys zone "keys_zone=one:1k" is too small in PREFIX/nginx.conf:4' },
  { name: 'proxy-cache-valid-invalid', expect: '[emerg] invalid time value "soon" in PREFIX/nginx.conf:7' },
  { name: 'proxy-cache-valid-invalid-status', expect: '[emerg] invalid status "99" in PREFIX/nginx.conf:7' },
  { name: 'proxy-cache-zone-unknown', expect: '[emerg] "proxy_cache" zone "nozone" is unknown in PREFIX/nginx.conf:11' },
  { name: 'proxy-http-version-invalid', expect: '[emerg] invalid value "2.0" in PREFIX/nginx.conf:7' },
  {
    name: 'proxy-max-temp-file-size-too-small', expect: '[emerg] "proxy_max_temp_file_size" must be equal to zero to disable temporary files usage or must be equal to or greater than the maximum of the value of "proxy_buffer_size" and one of the "proxy_buffers" in PREFIX/nginx.conf:8',
  },
  { name: 'proxy-next-upstream-invalid', expect: '[emerg] invalid value "sometimes" in PREFIX/nginx.conf:7' },
  { name: 'proxy-pass-duplicate', expect: '[emerg] "proxy_pass" directive is duplicate in PREFIX/nginx.conf:8' },
  { name: 'proxy-pass-in-server-if', expect: '[emerg] "proxy_pass" directive is not allowed here in PREFIX/nginx.conf:7' },
  { name: 'proxy-pass-invalid-port', expect: '[emerg] invalid port in upstream "127.0.0.1:0" in PREFIX/nginx.conf:7' },
  { name: 'proxy-pass-unix-no-path', expect: '[emerg] no path in the unix domain socket in upstream "unix:" in PREFIX/nginx.conf:6' },
  { name: 'proxy-pass-invalid-url-prefix', expect: '[emerg] invalid URL prefix in PREFIX/nginx.conf:7' },
  { name: 'proxy-pass-uri-in-regex-location', expect: '[emerg] "proxy_pass" cannot have URI part in location given by regular expression, or inside named location, or inside "if" statement, or inside "limit_except" block in PREFIX/nginx.conf:7' },
  {
    name: 'proxy-redirect-default-before-proxy-pass', expect: '[emerg] "proxy_redirect default" should be placed after the "proxy_pass" directive in PREFIX/nginx.conf:7',
  },
  { name: 'proxy-redirect-invalid', expect: '[emerg] invalid parameter "sometimes" in PREFIX/nginx.conf:7' },
  { name: 'proxy-set-header-one-argument', expect: '[emerg] invalid number of arguments in "proxy_set_header" directive in PREFIX/nginx.conf:7' },
  { name: 'proxy-ssl-verify-invalid', expect: '[emerg] invalid value "maybe" in "proxy_ssl_verify" directive, it must be "on" or "off" in PREFIX/nginx.conf:7' },
  { name: 'quiet-error', expect: '[emerg] unknown directive "proxy_passs" in PREFIX/nginx.conf:7', flags: ['-q'] },
  { name: 'quiet-success', expect: undefined, flags: ['-q'] },
  { name: 'quiet-warning', expect: '[warn] low address bits of 10.1.1.1/8 are meaningless in PREFIX/nginx.conf:7', flags: ['-q'] },
  { name: 'real-ip-header-duplicate', expect: '[emerg] "real_ip_header" directive is duplicate in PREFIX/nginx.conf:7' },
  { name: 'real-ip-recursive-invalid', expect: '[emerg] invalid value "maybe" in "real_ip_recursive" directive, it must be "on" or "off" in PREFIX/nginx.conf:6' },
  { name: 'resolver-host-not-found', expect: '[emerg] host not found in resolver "no-such-host.invalid" in PREFIX/nginx.conf:6' },
  { name: 'resolver-invalid-valid', expect: '[emerg] invalid parameter: valid=never in PREFIX/nginx.conf:6' },
  { name: 'return-in-http', expect: '[emerg] "return" directive is not allowed here in PREFIX/nginx.conf:4' },
  { name: 'return-invalid-code', expect: '[emerg] invalid return code "1000" in PREFIX/nginx.conf:7' },
  { name: 'return-invalid-text-code', expect: '[emerg] invalid return code "abc" in PREFIX/nginx.conf:7' },
  { name: 'rewrite-in-http', expect: '[emerg] "rewrite" directive is not allowed here in PREFIX/nginx.conf:4' },
  { name: 'rewrite-invalid-flag', expect: '[emerg] invalid parameter "bogus" in PREFIX/nginx.conf:7' },
  { name: 'rewrite-invalid-regex', expect: '[emerg] pcre2_compile() failed: missing closing parenthesis in "^/(a" in PREFIX/nginx.conf:7' },
  {
    name: 'rewrite-regex-unmatched-parenthesis', expect: '[emerg] pcre2_compile() failed: unmatched closing parenthesis in "^/a)b" at "b" in PREFIX/nginx.conf:7',
  },
  { name: 'root-duplicate', expect: '[emerg] "root" directive is duplicate in PREFIX/nginx.conf:8' },
  { name: 'scgi-pass-duplicate', expect: '[emerg] "scgi_pass" directive is duplicate in PREFIX/nginx.conf:7' },
  { name: 'scgi-temp-path-invalid-level', expect: '[emerg] "scgi_temp_path" directive invalid value in PREFIX/nginx.conf:4' },
  { name: 'send-lowat-ignored-warning', expect: '[warn] "send_lowat" is not supported, ignored in PREFIX/nginx.conf:4' },
  { name: 'sendfile-duplicate', expect: '[emerg] "sendfile" directive is duplicate in PREFIX/nginx.conf:5' },
  { name: 'sendfile-invalid', expect: '[emerg] invalid value "maybe" in "sendfile" directive, it must be "on" or "off" in PREFIX/nginx.conf:6' },
  { name: 'server-in-server', expect: '[emerg] "server" directive is not allowed here in PREFIX/nginx.conf:6' },
  { name: 'server-name-invalid', expect: '[emerg] server name "*bad" is invalid in PREFIX/nginx.conf:6' },
  { name: 'server-name-suspicious-warning', expect: '[warn] server name "example.com/path" has suspicious symbols in PREFIX/nginx.conf:6' },
  { name: 'server-names-hash-bucket-size-invalid', expect: '[emerg] "server_names_hash_bucket_size" directive invalid number in PREFIX/nginx.conf:4' },
  { name: 'server-no-opening-brace', expect: '[emerg] directive "server" has no opening "{" in PREFIX/nginx.conf:4' },
  { name: 'server-tokens-invalid', expect: '[emerg] invalid value "maybe" in PREFIX/nginx.conf:6' },
  { name: 'set-builtin-variable', expect: '[emerg] the duplicate "uri" variable in PREFIX/nginx.conf:7' },
  { name: 'set-invalid-variable-name', expect: '[emerg] invalid variable name "foo" in PREFIX/nginx.conf:7' },
  { name: 'set-real-ip-from-invalid', expect: '[emerg] host not found in set_real_ip_from "not-an-address.invalid" in PREFIX/nginx.conf:6' },
  { name: 'ssl-certificate-in-location', expect: '[emerg] "ssl_certificate" directive is not allowed here in PREFIX/nginx.conf:7' },
  { name: 'ssl-certificate-missing-file', expect: '[emerg] cannot load certificate "PREFIX/missing.pem": BIO_new_file() failed (SSL: error:80000002:system library::No such file or directory:calling fopen(PREFIX/missing.pem, r) error:10000080:BIO routines::no such file)' },
  { name: 'ssl-ciphers-before-certificate-key', expect: '[emerg] SSL_CTX_set_cipher_list("NO-SUCH-CIPHER") failed (SSL: error:0A0000B9:SSL routines::no cipher match)' },
  { name: 'ssl-ciphers-invalid-byte', expect: '[emerg] SSL_CTX_set_cipher_list("ECDHE-ECDSA-AES128-GCM-SHA256:ECDH#-RSA-AES128-GCM-SHA256") failed (SSL: error:0A000118:SSL routines::invalid command)' },
  { name: 'ssl-dhparam-missing-file', expect: '[emerg] BIO_new_file("PREFIX/missing-dhparam.pem") failed (SSL: error:80000002:system library::No such file or directory:calling fopen(PREFIX/missing-dhparam.pem, r) error:10000080:BIO routines::no such file)' },
  {
    name: 'ssl-dhparam-not-dh-parameters', expect: '[emerg] PEM_read_bio_DHparams("PREFIX/cert.pem") failed (SSL: error:0480006C:PEM routines::no start line:Expecting: DH PARAMETERS)',
  },
  { name: 'ssl-listen-without-certificate', expect: '[emerg] no "ssl_certificate" is defined for the "listen ... ssl" directive in PREFIX/nginx.conf:4' },
  { name: 'ssl-protocols-invalid', expect: '[emerg] invalid value "TLSv9" in PREFIX/nginx.conf:6' },
  { name: 'ssl-session-cache-invalid', expect: '[emerg] invalid session cache "sometimes" in PREFIX/nginx.conf:6' },
  { name: 'ssl-session-cache-too-small', expect: '[emerg] session cache "shared:SSL:1k" is too small in PREFIX/nginx.conf:4' },
  { name: 'ssl-session-timeout-invalid', expect: '[emerg] "ssl_session_timeout" directive invalid value in PREFIX/nginx.conf:6' },
  { name: 'ssl-stapling-invalid', expect: '[emerg] invalid value "maybe" in "ssl_stapling" directive, it must be "on" or "off" in PREFIX/nginx.conf:6' },
  { name: 'ssl-verify-client-invalid', expect: '[emerg] invalid value "sometimes" in PREFIX/nginx.conf:6' },
  { name: 'stream-access-log-without-format', expect: '[emerg] log format is not specified in PREFIX/nginx.conf:7' },
  { name: 'stream-conflicting-server-warning', expect: '[warn] conflicting server name "" on 127.0.0.1:@PORT@, ignored' },
  { name: 'stream-listen-duplicate', expect: '[emerg] a duplicate listen 127.0.0.1:@PORT@ in PREFIX/nginx.conf:6' },
  { name: 'stream-listen-invalid-parameter', expect: '[emerg] invalid parameter "bogus" in PREFIX/nginx.conf:5' },
  {
    name: 'stream-listen-ssl-without-certificate', expect: '[emerg] no "ssl_certificate" is defined for the "listen ... ssl" directive in PREFIX/nginx.conf:4',
  },
  { name: 'stream-proxy-pass-host-not-found', expect: '[emerg] host not found in upstream "no-such-host.invalid" in PREFIX/nginx.conf:6' },
  { name: 'stream-proxy-pass-no-port', expect: '[emerg] no port in upstream "127.0.0.1" in PREFIX/nginx.conf:6' },
  { name: 'stream-proxy-pass-upstream-with-port', expect: '[emerg] upstream "backend" may not have port 80 in PREFIX/nginx.conf:9' },
  { name: 'stream-proxy-timeout-invalid', expect: '[emerg] "proxy_timeout" directive invalid value in PREFIX/nginx.conf:6' },
  { name: 'stream-server-without-listen', expect: '[emerg] no "listen" is defined for server in PREFIX/nginx.conf:4' },
  { name: 'stream-ssl-certificate-without-key', expect: '[emerg] no "ssl_certificate_key" is defined for certificate "cert.pem"' },
  { name: 'stream-unknown-directive', expect: '[emerg] unknown directive "proxy_passs" in PREFIX/nginx.conf:6' },
  { name: 'stream-upstream-no-servers', expect: '[emerg] no servers are inside upstream in PREFIX/nginx.conf:5' },
  { name: 'stub-status-arguments', expect: '[emerg] invalid number of arguments in "stub_status" directive in PREFIX/nginx.conf:7' },
  { name: 'stub-status-in-http', expect: '[emerg] "stub_status" directive is not allowed here in PREFIX/nginx.conf:4' },
  { name: 'tcp-nopush-invalid', expect: '[emerg] invalid value "maybe" in "tcp_nopush" directive, it must be "on" or "off" in PREFIX/nginx.conf:6' },
  { name: 'temp-path-parent-missing', expect: '[emerg] mkdir() "PREFIX/no/such/dir" failed (2: No such file or directory)' },
  { name: 'thread-pool-without-threads', expect: '[emerg] "thread_pool" must have "threads" parameter in PREFIX/nginx.conf:1' },
  { name: 'timer-resolution-invalid', expect: '[emerg] "timer_resolution" directive invalid value in PREFIX/nginx.conf:1' },
  { name: 'too-many-arguments', expect: '[emerg] invalid number of arguments in "proxy_pass" directive in PREFIX/nginx.conf:7' },
  { name: 'try-files-one-argument', expect: '[emerg] invalid number of arguments in "try_files" directive in PREFIX/nginx.conf:7' },
  { name: 'types-duplicate-extension-warning', expect: '[warn] duplicate extension "html", content type: "text/plain", previous content type: "text/html" in PREFIX/nginx.conf:8' },
  { name: 'types-hash-max-size-invalid', expect: '[emerg] "types_hash_max_size" directive invalid number in PREFIX/nginx.conf:4' },
  { name: 'unexpected-char-after-quote', expect: '[emerg] unexpected "b" in PREFIX/nginx.conf:6' },
  { name: 'unexpected-close-brace', expect: '[emerg] unexpected "}" in PREFIX/nginx.conf:5' },
  { name: 'unexpected-end-of-file-in-quotes', expect: '[emerg] unexpected end of file, expecting ";" or "}" in PREFIX/nginx.conf:8' },
  { name: 'unexpected-open-brace', expect: '[emerg] unexpected "{" in PREFIX/nginx.conf:3' },
  { name: 'unexpected-semicolon', expect: '[emerg] unexpected ";" in PREFIX/nginx.conf:2' },
  { name: 'uninitialized-variable-warn-invalid', expect: '[emerg] invalid value "maybe" in "uninitialized_variable_warn" directive, it must be "on" or "off" in PREFIX/nginx.conf:6' },
  { name: 'unknown-directive', expect: '[emerg] unknown directive "proxy_passs" in PREFIX/nginx.conf:7' },
  { name: 'unknown-directive-at-top', expect: '[emerg] unknown directive "foo" in PREFIX/nginx.conf:1' },
  { name: 'unknown-variable', expect: '[emerg] unknown "foo" variable' },
  { name: 'unknown-variable-in-if', expect: '[emerg] unknown "no_such_var" variable' },
  { name: 'unknown-variable-in-proxy-set-header', expect: '[emerg] unknown "bar_baz" variable' },
  { name: 'upstream-ip-hash-backup', expect: '[emerg] balancing method does not support parameter "backup" in PREFIX/nginx.conf:7' },
  { name: 'upstream-hash-parameter-invalid', expect: '[emerg] invalid parameter "ring" in PREFIX/nginx.conf:6' },
  { name: 'upstream-random-backup', expect: '[emerg] balancing method does not support parameter "backup" in PREFIX/nginx.conf:7' },
  { name: 'sticky-route-empty', expect: '[emerg] route is empty in PREFIX/nginx.conf:5' },
  { name: 'sticky-route-too-long', expect: '[emerg] route is longer than 32 in PREFIX/nginx.conf:5' },
  { name: 'sticky-duplicate', expect: '[emerg] "sticky" directive is duplicate in PREFIX/nginx.conf:6' },
  { name: 'sticky-cookie-empty-name', expect: '[emerg] "sticky" directive empty cookie name in PREFIX/nginx.conf:6' },
  { name: 'sticky-unknown-method', expect: '[emerg] unknown parameter "session" in PREFIX/nginx.conf:6' },
  { name: 'sticky-cookie-expires-invalid', expect: '[emerg] "sticky" directive invalid "expires" parameter value in PREFIX/nginx.conf:6' },
  { name: 'sticky-cookie-samesite-invalid', expect: '[emerg] "sticky" directive invalid "samesite" parameter value in PREFIX/nginx.conf:6' },
  { name: 'sticky-cookie-unknown-parameter', expect: '[emerg] unknown parameter "partitioned" in PREFIX/nginx.conf:6' },
  { name: 'sticky-route-not-a-variable', expect: '[emerg] invalid variable name "arg_r" in PREFIX/nginx.conf:6' },
  { name: 'sticky-before-balancer-warning', expect: '[warn] load balancing method redefined in PREFIX/nginx.conf:6' },
  { name: 'upstream-backup-only', expect: '[emerg] no servers in upstream "backend" in PREFIX/nginx.conf:4' },
  { name: 'mirror-off-duplicate', expect: '[emerg] "mirror" directive is duplicate in PREFIX/nginx.conf:8' },
  { name: 'upstream-unix-no-path', expect: '[emerg] no path in the unix domain socket in upstream "unix:" in PREFIX/nginx.conf:5' },
  { name: 'upstream-balancer-redefined-warning', expect: '[warn] load balancing method redefined in PREFIX/nginx.conf:6' },
  { name: 'upstream-duplicate', expect: '[emerg] duplicate upstream "backend" in PREFIX/nginx.conf:7' },
  { name: 'upstream-keepalive-invalid', expect: '[emerg] invalid value "none" in "keepalive" directive in PREFIX/nginx.conf:6' },
  { name: 'upstream-keepalive-timeout-duplicate', expect: '[emerg] "keepalive_timeout" directive is duplicate in PREFIX/nginx.conf:7' },
  { name: 'upstream-keepalive-timeout-invalid', expect: '[emerg] "keepalive_timeout" directive invalid value in PREFIX/nginx.conf:6' },
  { name: 'upstream-no-servers', expect: '[emerg] no servers are inside upstream in PREFIX/nginx.conf:5' },
  { name: 'upstream-server-host-not-found', expect: '[emerg] host not found in upstream "no-such-host.invalid:8080" in PREFIX/nginx.conf:5' },
  { name: 'upstream-server-in-http', expect: '[emerg] directive "server" has no opening "{" in PREFIX/nginx.conf:4' },
  { name: 'upstream-server-invalid-parameter', expect: '[emerg] invalid parameter "heavy" in PREFIX/nginx.conf:5' },
  { name: 'upstream-server-invalid-weight', expect: '[emerg] invalid parameter "weight=0" in PREFIX/nginx.conf:5' },
  { name: 'upstream-zone-invalid-size', expect: '[emerg] invalid zone size "tiny" in PREFIX/nginx.conf:5' },
  { name: 'upstream-zone-without-size', expect: '[emerg] zero size shared memory zone "backend"' },
  { name: 'user-group-unknown', expect: '[emerg] getgrnam("no-such-group-jinx") failed in PREFIX/nginx.conf:1' },
  { name: 'user-unknown', expect: '[emerg] getpwnam("no-such-user-jinx") failed in PREFIX/nginx.conf:1' },
  { name: 'uwsgi-cache-without-key', expect: '[warn] no "uwsgi_cache_key" for "uwsgi_cache" in PREFIX/nginx.conf:12' },
  { name: 'uwsgi-modifier-out-of-range', expect: '[emerg] value must be between 0 and 255 in PREFIX/nginx.conf:6' },
  { name: 'uwsgi-param-one-argument', expect: '[emerg] invalid number of arguments in "uwsgi_param" directive in PREFIX/nginx.conf:6' },
  { name: 'uwsgi-ssl-verify-without-trusted-certificate', expect: '[emerg] no uwsgi_ssl_trusted_certificate for uwsgi_ssl_verify' },
  { name: 'uwsgi-pass-invalid-port', expect: '[emerg] invalid port in upstream "127.0.0.1:99999" in PREFIX/nginx.conf:6' },
  { name: 'variable-closing-bracket-missing', expect: '[emerg] the closing bracket in "x" variable is missing in PREFIX/nginx.conf:7' },
  { name: 'variable-name-empty', expect: '[emerg] invalid variable name in PREFIX/nginx.conf:7' },
  { name: 'warning-before-error', expect: '[warn] duplicate value "error" in PREFIX/nginx.conf:7', status: 1 },
  { name: 'worker-connections-invalid', expect: '[emerg] invalid number "lots" in PREFIX/nginx.conf:2' },
  { name: 'worker-connections-too-few', expect: '[emerg] 1 worker_connections are not enough for 1 listening sockets' },
  {
    name: 'worker-cpu-affinity-masks-warning', expect: '[warn] the number of "worker_processes" is not equal to the number of "worker_cpu_affinity" masks, using last mask for remaining worker processes',
  },
  { name: 'worker-processes-invalid', expect: '[emerg] "worker_processes" directive invalid value in PREFIX/nginx.conf:1' },
  { name: 'worker-rlimit-nofile-invalid', expect: '[emerg] "worker_rlimit_nofile" directive invalid number in PREFIX/nginx.conf:1' },
];

/** Fixtures nginx accepts that need a module jinx does not implement, with jinx's message (README, "Directives"). */
const UNIMPLEMENTED: readonly { readonly name: string; readonly jinx: string }[] = [
  // jinx has no QUIC: it answers as an nginx built without ngx_http_v3_module (its -V says so too)
  { name: 'listen-quic', jinx: '[emerg] the "quic" parameter requires ngx_http_v3_module in PREFIX/nginx.conf:6' },
  // a branch reset group's named groups would be one name twice in JavaScript, which Node.js 20 refuses
  {
    name: 'regex-branch-reset-named',
    jinx: '[emerg] a named group in the branch reset group "(?|" in regex "^/(?|(?<part>a)|(?<part>b))" is not supported by jinx in PREFIX/nginx.conf:6',
  },
];

/** jinx's whole output for a deliberate difference: the message, then the test failed. */
const deliberate = (message: string): TestOutcome => ({
  status: 1, lines: [message, 'nginx: configuration file PREFIX/nginx.conf test failed'],
});

const isMessage = (l: string): boolean => !/^nginx: (the )?configuration file /.test(l);

/** Materializes a fixture, runs both binaries and puts the ports back as placeholders. */
async function run(kind: 'broken' | 'valid' | 'unimplemented', name: string, flags: readonly string[] = []): Promise<{ jinx: TestOutcome; nginx: TestOutcome }> {
  const f = await materializeFixture(join(FIXTURES, kind, name), streamModulePath());
  if (readFileSync(f.conf, 'utf8').includes('cert.pem')) assert.ok(makeCertificate(join(f.dir, 'cert.pem'), join(f.dir, 'key.pem')), 'openssl failed');
  const placeholders = new Map(f.ports.map((p, i) => [String(p), i === 0 ? '@PORT@' : `@PORT${i + 1}@`]));
  const record = `${kind}/${name}${flags.length > 0 ? ` ${flags.join(' ')}` : ''}`;
  const r = await compareConfigTestAsync(f.dir, f.conf, { flags, hidePrefix: f.dir, record, placeholders });
  const ports = (o: TestOutcome): TestOutcome => ({
    status: o.status,
    lines: o.lines.map((l) => l.split(String(f.ports[0])).join('@PORT@').split(String(f.ports[1])).join('@PORT2@').split(String(f.ports[2])).join('@PORT3@')),
  });
  return { jinx: ports(r.jinx), nginx: ports(r.nginx) };
}

describe('jinx -t reports each broken configuration as nginx -t does', { concurrency }, () => {
  after(cleanup);

  it('has an expected message for every fixture folder and a folder for every case', () => {
    const folders = readdirSync(join(FIXTURES, 'broken')).sort();
    assert.deepEqual(folders, BROKEN.map((c) => c.name).sort());
    for (const c of BROKEN) assert.ok(existsSync(join(FIXTURES, 'broken', c.name, 'nginx.conf')), c.name);
  });

  for (const c of BROKEN) {
    const status = c.status ?? (c.expect === undefined || c.expect.startsWith('[warn]') ? 0 : 1);
    const said = c.jinx ? `nginx: ${c.expect}; jinx reports ${c.jinx} (not implemented, see README)` : c.expect ?? 'no output';
    const title = `${c.flags ? `${c.flags.join(' ')}: ` : ''}${said}, exit ${status} (${c.name})`;
    it(title, async () => {
      const { jinx, nginx } = await run('broken', c.name, c.flags);
      // the fixture still shows what it is named for
      assert.equal(nginx.status, status, `nginx's exit status for ${c.name}: ${nginx.lines.join('\n')}`);
      assert.equal(nginx.lines.find(isMessage), c.expect, `nginx's first message for ${c.name}`);
      if (c.jinx) assert.deepEqual(jinx, deliberate(c.jinx), `jinx's deliberate message for ${c.name}`);
      else assert.deepEqual(jinx, nginx, `jinx -t and nginx -t differ on ${c.name}`);
    });
  }
});

describe('jinx -t accepts what nginx -t accepts', { concurrency }, () => {
  after(cleanup);
  for (const name of readdirSync(join(FIXTURES, 'valid')).sort()) {
    it(`syntax is ok, test is successful, exit 0 (${name})`, async () => {
      const { jinx, nginx } = await run('valid', name);
      assert.equal(nginx.status, 0, `nginx rejects ${name}: ${nginx.lines.join('\n')}`);
      assert.deepEqual(jinx, nginx, `jinx -t and nginx -t differ on ${name}`);
    });
  }
});

describe('modules jinx does not implement: nginx accepts, jinx reports them (README, "Directives")', { concurrency }, () => {
  after(cleanup);

  it('has a message for every fixture folder and a folder for every case', () => {
    assert.deepEqual(readdirSync(join(FIXTURES, 'unimplemented')).sort(), UNIMPLEMENTED.map((c) => c.name).sort());
  });

  for (const c of UNIMPLEMENTED) {
    it(`jinx reports ${c.jinx.replace(/ in PREFIX.*$/, '')} (not implemented, see README), exit 1; nginx accepts (${c.name})`, async () => {
      const { jinx, nginx } = await run('unimplemented', c.name);
      assert.equal(nginx.status, 0, `nginx rejects ${c.name}: ${nginx.lines.join('\n')}`);
      assert.deepEqual(jinx, deliberate(c.jinx), `jinx's message for ${c.name}`);
    });
  }
});
