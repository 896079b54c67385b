/**
 * `-t` on the directives and variables of the proxy, FastCGI, headers and SSL
 * modules that nginx 1.30 accepts: what a configuration may say, and the
 * `[emerg]` for what it may not, each checked against the reference nginx.
 */
import { defineConfCases, failed, HTTP_TEMP_PATHS, succeeded, type ConfCase } from '../helpers/conf-test.js';
import { selfSigned } from '../helpers/pki.js';

/** A config with one location holding `body`. */
const inLocation = (body: string): Record<string, string> => ({
  'nginx.conf': `events {}\nhttp {\n${HTTP_TEMP_PATHS}\nserver {\nlisten 127.0.0.1:1;\nlocation / {\n${body}\n}\n}\n}\n`,
});

const ok = (name: string, body: string): ConfCase => ({ name, files: inLocation(body), status: 0, lines: succeeded() });
/** A config `-t` refuses: `message` at the body's `line` (its first line is the file's 7th). */
const bad = (name: string, body: string, message: string, line = 7): ConfCase => ({
  name, files: inLocation(body), status: 1, lines: failed(`[emerg] ${message} in PREFIX/nginx.conf:${line}`),
});

const proxy: ConfCase[] = [
  ok('proxy_method and proxy_set_body take a value with variables', 'proxy_method $arg_m; proxy_set_body "a=$arg_a"; proxy_pass http://127.0.0.1:1;'),
  ok('proxy_cookie_domain, proxy_cookie_path and proxy_cookie_flags take rules, regexes and variables', [
    'proxy_cookie_domain www.example.org .example.com;', 'proxy_cookie_domain ~^(.+)\\.com$ $1.org;',
    'proxy_cookie_path /a/ /b/;', 'proxy_cookie_path ~*^/c/(.+)$ /$1;',
    'proxy_cookie_flags a secure httponly samesite=lax;', 'proxy_cookie_flags ~b nosecure;', 'proxy_cookie_flags $arg_c $arg_f;',
  ].join('\n')),
  ok('proxy_cookie_* off in a nested location', 'proxy_cookie_domain a b; location /off/ { proxy_cookie_domain off; proxy_cookie_path off; proxy_cookie_flags off; }'),
  bad('proxy_cookie_domain off after a rule is a duplicate', 'proxy_cookie_domain a b;\nproxy_cookie_domain off;', '"proxy_cookie_domain" directive is duplicate', 8),
  bad('a rule after proxy_cookie_domain off is a duplicate', 'proxy_cookie_domain off;\nproxy_cookie_domain a b;', '"proxy_cookie_domain" directive is duplicate', 8),
  bad('proxy_cookie_path with one word other than off', 'proxy_cookie_path foo;', 'invalid parameter "foo"'),
  bad('proxy_cookie_flags with a cookie and no flag', 'proxy_cookie_flags foo;', 'invalid parameter "foo"'),
  bad('proxy_cookie_flags takes at most three flags', 'proxy_cookie_flags a b c d e;', 'invalid number of arguments in "proxy_cookie_flags" directive'),
  bad('proxy_cookie_flags with a broken regex', 'proxy_cookie_flags ~( secure;', 'pcre2_compile() failed: missing closing parenthesis in "("'),
  bad('proxy_ssl_password_file names a file that is read at once', 'proxy_ssl_password_file nofile;',
    'open() "PREFIX/nofile" failed (2: No such file or directory)'),
  ok('proxy_redirect takes regexes', 'proxy_redirect ~^(.+)/x/(.*)$ $1/$2; proxy_redirect ~*y /z; proxy_pass http://127.0.0.1:1;'),
  ok('directives jinx does not act on are accepted', [
    'proxy_bind 127.0.0.1 transparent;', 'proxy_store off;', 'proxy_store_access user:r group:rw;', 'proxy_limit_rate 1k;',
    'proxy_force_ranges on;', 'proxy_pass_trailers on;', 'proxy_ssl_conf_command Options -SessionTicket;', 'proxy_ssl_crl crl.pem;',
    'proxy_ssl_certificate_cache max=10 inactive=5s;', 'proxy_cache_lock_timeout 1s;', 'proxy_cache_convert_head off;',
    'fastcgi_bind off;', 'fastcgi_limit_rate 1k;', 'fastcgi_cache_use_stale error;', 'fastcgi_catch_stderr a;', 'fastcgi_catch_stderr b;',
  ].join('\n')),
  bad('proxy_bind checks its address', 'proxy_bind 1.2.3;', 'invalid address "1.2.3"'),
  bad('proxy_bind takes only transparent after the address', 'proxy_bind 127.0.0.1 foo;', 'invalid parameter "foo"'),
];

const variables: ConfCase[] = [
  ok('$arg_ with an empty name is a variable', 'return 200 "$arg_:$http_:$cookie_";'),
  ok('variables of nginx 1.30 exist', [
    'add_header X "$request_body $request_body_file $http2 $upstream_response_length $upstream_bytes_received $upstream_bytes_sent";',
    'add_header Y "$upstream_connect_time $upstream_header_time $upstream_cookie_a $upstream_trailer_b $sent_trailer_c";',
    'add_header Z "$tcpinfo_rtt $tcpinfo_rttvar $tcpinfo_snd_cwnd $tcpinfo_rcv_space $proxy_internal_body_length $proxy_internal_chunked";',
  ].join('\n')),
  ok('set on variables nginx lets change', 'set $proxy_host x; set $proxy_port 1; set $limit_rate 1k; set $args a;'),
  bad('set on a variable nginx does not let change', 'set $uri x;', 'the duplicate "uri" variable'),
];

const expires: ConfCase[] = [
  ok('expires takes epoch, max, off, times, modified, a time of day and variables', [
    'location /a { expires epoch; }', 'location /b { expires max; }', 'location /c { expires off; }', 'location /d { expires -1h; }',
    'location /e { expires +15m; }', 'location /f { expires modified 1d; }', 'location /g { expires @15h30m; }',
    'location /h { expires $arg_e; }', 'location /i { expires modified $arg_e; }',
  ].join('\n')),
  bad('expires modified with a time of day', 'expires modified @1h;', '"expires" directive daily time cannot be used with "modified" parameter'),
  bad('expires with two words not starting with modified', 'expires access 1h;', '"expires" directive invalid value'),
  bad('a time of day over 24 hours', 'expires @25h;', '"expires" directive daily time value must be less than 24 hours'),
  bad('an invalid time', 'expires foo;', '"expires" directive invalid value'),
  ok('add_trailer, with always', 'add_trailer X-T $request_time always; add_trailer Y y;'),
];

const pair = selfSigned('localhost');
const tlsFiles = { 'c.pem': pair.cert, 'c.key': pair.key };
const tlsConf = (servers: string): Record<string, string> => ({
  ...tlsFiles, 'nginx.conf': `events {}\nhttp {\n${HTTP_TEMP_PATHS}\n${servers}\n}\n`,
});
const withCert = 'ssl_certificate c.pem; ssl_certificate_key c.key;';

const listenSsl: ConfCase[] = [
  {
    name: 'a server without a certificate on an address whose default server has one',
    files: tlsConf(`server { listen 127.0.0.1:1 ssl; ${withCert} }\nserver { listen 127.0.0.1:1 ssl; server_name b; ssl_verify_client on; }`),
    status: 0, lines: succeeded(),
  },
  {
    name: 'a default server without a certificate',
    files: tlsConf(`server { listen 127.0.0.1:1 ssl; }\nserver { listen 127.0.0.1:1 ssl; server_name b; ${withCert} }`),
    status: 1, lines: failed('[emerg] no "ssl_certificate" is defined for the "listen ... ssl" directive in PREFIX/nginx.conf:4'),
  },
  {
    name: 'a default server that rejects handshakes, the others with certificates',
    files: tlsConf(`server { listen 127.0.0.1:1 ssl; ssl_reject_handshake on; }\nserver { listen 127.0.0.1:1 ssl; server_name b; ${withCert} }`),
    status: 0, lines: succeeded(),
  },
  {
    name: 'a default server that rejects handshakes and another server without a certificate',
    files: tlsConf('server { listen 127.0.0.1:1 ssl; ssl_reject_handshake on; }\nserver { listen 127.0.0.1:1 ssl; server_name b; }'),
    status: 1, lines: failed('[emerg] no "ssl_certificate" is defined for the "listen ... ssl" directive in PREFIX/nginx.conf:5'),
  },
];

defineConfCases('proxy and FastCGI directives of nginx 1.30', proxy);
defineConfCases('variables of nginx 1.30', variables);
defineConfCases('expires and add_trailer', expires);
defineConfCases('listen … ssl without a certificate', listenSsl);
