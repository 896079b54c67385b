/**
 * `jinx -t` at nginx's limits, each case as nginx 1.30 says it: blocks
 * nested 500 and 5,000 deep, numbers past 2^63 - 1 (`ngx_parse_size`,
 * `ngx_parse_offset`, `ngx_parse_time`, `ngx_atoi`), `set $`, NUL bytes in
 * paths and keywords, tokens that overflow nginx's 4096-byte read buffer,
 * the pid file `-t` opens, the types and server names hash sizes (and the
 * `could not build optimal server_names_hash` warning), a resolver without
 * addresses and `listen` hosts in `inet_aton`'s forms. And a request
 * finds a location 5,000 blocks deep.
 */
import { strict as assert } from 'node:assert';
import { after, describe, it } from 'node:test';
import { defineConfCases, failed, HTTP_TEMP_PATHS, succeeded, type ConfCase } from '../helpers/conf-test.js';
import { cleanup, freePort, request, startJinx } from '../helpers/harness.js';

const http = (body: string): string => `events {}\nhttp {\n${HTTP_TEMP_PATHS}\n${body}}\n`;
const server = (body: string): string => http(` server {\n  listen 127.0.0.1:8000;\n${body} }\n`);
const nested = (depth: number, inner: string): string => `${'location /a {\n'.repeat(depth)}${inner}\n${'}\n'.repeat(depth)}`;
const huge = '99999999999999999999';
/** `count` servers on one address, server `i` named `name(i)`. */
const serverNames = (count: number, name: (i: number) => string): string =>
  Array.from({ length: count }, (_, i) => ` server { listen 127.0.0.1:8000; server_name ${name(i)}; }\n`).join('');
const OPTIMAL_WARNING = '[warn] could not build optimal server_names_hash, you should increase either server_names_hash_max_size: 512 '
  + 'or server_names_hash_bucket_size: 64; ignoring server_names_hash_bucket_size';

const nesting: ConfCase[] = [
  { name: '500 nested locations are read', files: { 'nginx.conf': server(nested(500, 'return 204;')) }, status: 0, lines: succeeded() },
  { name: '5,000 nested locations are read', files: { 'nginx.conf': server(nested(5000, 'return 204;')) }, status: 0, lines: succeeded() },
  {
    name: 'an error 5,000 blocks deep is placed at its line',
    files: { 'nginx.conf': server(nested(5000, 'bogus;')) }, status: 1,
    lines: failed('[emerg] unknown directive "bogus" in PREFIX/nginx.conf:5006'),
  },
  {
    name: '5,000 nested ifs: the second if is not allowed here (if does not nest)',
    files: { 'nginx.conf': server(`${'if ($arg_a) {\n'.repeat(5000)}${'}\n'.repeat(5000)}`) }, status: 1,
    lines: failed('[emerg] "if" directive is not allowed here in PREFIX/nginx.conf:7'),
  },
  {
    name: 'a block left open 5,000 deep: unexpected end of file, expecting "}"',
    files: { 'nginx.conf': server('location /a {\n'.repeat(5000)) }, status: 1,
    lines: failed('[emerg] unexpected end of file, expecting "}" in PREFIX/nginx.conf:5008'),
  },
];

const numbers: ConfCase[] = [
  {
    name: `client_max_body_size ${huge}g: invalid value`,
    files: { 'nginx.conf': http(` client_max_body_size ${huge}g;\n`) }, status: 1,
    lines: failed('[emerg] "client_max_body_size" directive invalid value in PREFIX/nginx.conf:4'),
  },
  {
    name: 'client_max_body_size 8589934591g (the largest offset in g) is read, 8589934592g is not',
    files: { 'nginx.conf': http(' client_max_body_size 8589934591g;\n server { listen 127.0.0.1:8000; client_max_body_size 8589934592g; }\n') },
    status: 1, lines: failed('[emerg] "client_max_body_size" directive invalid value in PREFIX/nginx.conf:5'),
  },
  {
    name: 'client_body_buffer_size 18446744073709551616: invalid value',
    files: { 'nginx.conf': http(' client_body_buffer_size 18446744073709551616;\n') }, status: 1,
    lines: failed('[emerg] "client_body_buffer_size" directive invalid value in PREFIX/nginx.conf:4'),
  },
  {
    name: 'keepalive_requests 18446744073709551616: invalid number (9223372036854775807 is read)',
    files: { 'nginx.conf': http(' keepalive_requests 9223372036854775807;\n server { listen 127.0.0.1:8000; keepalive_requests 18446744073709551616; }\n') },
    status: 1, lines: failed('[emerg] "keepalive_requests" directive invalid number in PREFIX/nginx.conf:5'),
  },
  {
    name: 'send_timeout 106751991167d is read, 106751991168d is an invalid value',
    files: { 'nginx.conf': http(' send_timeout 106751991167d;\n server { listen 127.0.0.1:8000; send_timeout 106751991168d; }\n') },
    status: 1, lines: failed('[emerg] "send_timeout" directive invalid value in PREFIX/nginx.conf:5'),
  },
  {
    name: `worker_connections ${huge}: invalid number`,
    files: { 'nginx.conf': `events { worker_connections ${huge}; }\n` }, status: 1,
    lines: failed(`[emerg] invalid number "${huge}" in PREFIX/nginx.conf:1`),
  },
  {
    name: `open_file_cache max=${huge}: invalid parameter`,
    files: { 'nginx.conf': http(` open_file_cache max=${huge};\n`) }, status: 1,
    lines: failed(`[emerg] invalid "open_file_cache" parameter "max=${huge}" in PREFIX/nginx.conf:4`),
  },
  {
    name: `listen ${huge}: a host name to nginx, not found`,
    files: { 'nginx.conf': http(` server { listen ${huge}; }\n`) }, status: 1,
    lines: failed(`[emerg] host not found in "${huge}" of the "listen" directive in PREFIX/nginx.conf:4`),
  },
  {
    name: `resolver 127.0.0.1:${huge}: invalid port`,
    files: { 'nginx.conf': http(` resolver 127.0.0.1:${huge};\n`) }, status: 1,
    lines: failed(`[emerg] invalid port in resolver "127.0.0.1:${huge}" in PREFIX/nginx.conf:4`),
  },
];

const values: ConfCase[] = [
  {
    name: 'set $ "x": invalid variable name "$"',
    files: { 'nginx.conf': server('  location / { set $ "x"; }\n') }, status: 1,
    lines: failed('[emerg] invalid variable name "$" in PREFIX/nginx.conf:6'),
  },
  {
    name: 'map $uri $ {…}: invalid variable name "$", before its entries are read',
    files: { 'nginx.conf': http(' map $uri $ { default 1; default 2; }\n') }, status: 1,
    lines: failed('[emerg] invalid variable name "$" in PREFIX/nginx.conf:4'),
  },
  {
    name: 'a resolver without addresses: no name servers defined',
    files: { 'nginx.conf': http(' resolver valid=10s;\n') }, status: 1,
    lines: failed('[emerg] no name servers defined in PREFIX/nginx.conf:4'),
  },
  {
    name: 'log_format with "$ " or "${}": invalid parameter, from the $ on',
    files: { 'nginx.conf': http(" log_format a '$remote_addr $ x';\n") }, status: 1,
    lines: failed('[emerg] invalid parameter "$ x" in PREFIX/nginx.conf:4'),
  },
  {
    name: 'log_format with "${name" unclosed: the closing bracket is missing',
    files: { 'nginx.conf': http(" log_format a '${remote_addr';\n") }, status: 1,
    lines: failed('[emerg] the closing bracket in "remote_addr" variable is missing in PREFIX/nginx.conf:4'),
  },
  {
    name: 'resolver 127.0.0. and 127.1 are addresses, ::1 without brackets is an invalid port',
    files: { 'nginx.conf': http(' resolver 127.0.0. 127.1:53;\n server { listen 127.0.0.1:8000; resolver ::1; }\n') }, status: 1,
    lines: failed('[emerg] invalid port in resolver "::1" in PREFIX/nginx.conf:5'),
  },
  {
    name: 'resolver [127.0.0.1]: invalid IPv6 address',
    files: { 'nginx.conf': http(' resolver [127.0.0.1];\n') }, status: 1,
    lines: failed('[emerg] invalid IPv6 address in resolver "[127.0.0.1]" in PREFIX/nginx.conf:4'),
  },
  {
    name: 'types_hash_max_size 0: could not build types_hash, without a place',
    files: { 'nginx.conf': http(' types_hash_max_size 0;\n server { listen 127.0.0.1:8000; }\n') }, status: 1,
    lines: failed('[emerg] could not build types_hash, you should increase types_hash_max_size: 0'),
  },
  {
    name: 'an extension of 47 bytes does not fit types_hash_bucket_size 64 (46 does)',
    files: { 'nginx.conf': http(` types { text/a ${'e'.repeat(46)}; text/b ${'f'.repeat(47)}; }\n server { listen 127.0.0.1:8000; }\n`) },
    status: 1, lines: failed('[emerg] could not build types_hash, you should increase types_hash_bucket_size: 64'),
  },
  {
    name: '1,000 server names on one address: could not build optimal server_names_hash (512 buckets of 64 bytes), without a place',
    files: { 'nginx.conf': http(serverNames(1000, (i) => `s${i}.example.test`)) }, status: 0, lines: succeeded(OPTIMAL_WARNING),
  },
  {
    name: '10,000 server names: the same one warning',
    files: { 'nginx.conf': http(serverNames(10000, (i) => `host-${i}.example.test`)) }, status: 0, lines: succeeded(OPTIMAL_WARNING),
  },
  {
    name: '200 server names fit 512 buckets of 64 bytes',
    files: { 'nginx.conf': http(serverNames(200, (i) => `s${i}.example.test`)) }, status: 0, lines: succeeded(),
  },
  {
    name: '1,000 server names fit server_names_hash_max_size 65536 with server_names_hash_bucket_size 128',
    files: { 'nginx.conf': http(` server_names_hash_bucket_size 128;\n server_names_hash_max_size 65536;\n${serverNames(1000, (i) => `s${i}.test`)}`) },
    status: 0, lines: succeeded(),
  },
  {
    name: 'head and tail wildcards are hashed by label: one warning per hash that does not fit (bucket size 40 is 64)',
    files: { 'nginx.conf': http(` server_names_hash_max_size 16;\n server_names_hash_bucket_size 40;\n${
      serverNames(400, (i) => [`x${i}.test`, `*.w${i}.org`, `.d${i}.net`, `t${i}.*`][i % 4]!)}`) },
    status: 0, lines: succeeded(...Array.from({ length: 4 }, () => OPTIMAL_WARNING.replace('512', '16'))),
  },
  {
    name: 'a server name too long for server_names_hash_bucket_size 64',
    files: { 'nginx.conf': http(serverNames(2, (i) => `${'n'.repeat(50)}${i}.test`)) }, status: 1,
    lines: failed('[emerg] could not build server_names_hash, you should increase server_names_hash_bucket_size: 64'),
  },
  {
    name: 'listen 127.1 and 0x7f000001 are 127.0.0.1 (getaddrinfo\'s inet_aton)',
    files: { 'nginx.conf': http(' server { listen 127.1:8000; }\n server { listen 0x7f000001:8001; }\n') }, status: 0, lines: succeeded(),
  },
  {
    name: 'the pid file is opened by -t: a missing directory fails it, without a place',
    files: { 'nginx.conf': 'pid nodir/nginx.pid;\nevents {}\n' }, status: 1,
    lines: [
      'nginx: the configuration file PREFIX/nginx.conf syntax is ok',
      '[emerg] open() "PREFIX/nodir/nginx.pid" failed (2: No such file or directory)',
      'nginx: configuration file PREFIX/nginx.conf test failed',
    ],
  },
];

const nul: ConfCase[] = [
  {
    name: 'include of a path with a NUL byte opens the path up to it',
    files: { 'nginx.conf': Buffer.from('events {}\ninclude missing.conf\0.x;\n', 'latin1') }, status: 1,
    lines: failed('[emerg] open() "PREFIX/missing.conf" failed (2: No such file or directory) in PREFIX/nginx.conf:2'),
  },
  {
    name: 'load_module of a path with a NUL byte: dlopen() of the path up to it',
    files: { 'nginx.conf': Buffer.from('load_module modules/none.so\0x;\nevents {}\n', 'latin1') }, status: 1,
    lines: failed('[emerg] dlopen() "PREFIX/modules/none.so" failed (PREFIX/modules/none.so: cannot open shared object file: No such file or directory) in PREFIX/nginx.conf:1'),
  },
  {
    name: '"off<NUL>" is off, and "o<NUL>n" is the invalid value "o"',
    files: { 'nginx.conf': Buffer.from(http(' gzip "off\0";\n server { listen 127.0.0.1:8000; gzip "o\0n"; }\n'), 'latin1') }, status: 1,
    lines: failed('[emerg] invalid value "o" in "gzip" directive, it must be "on" or "off" in PREFIX/nginx.conf:5'),
  },
  {
    name: 'an unknown directive with a NUL byte is named up to it',
    files: { 'nginx.conf': Buffer.from('events {}\nfoo\0bar 1;\n', 'latin1') }, status: 1,
    lines: failed('[emerg] unknown directive "foo" in PREFIX/nginx.conf:2'),
  },
];

// `worker_processes ` starts its argument at byte 27: the buffer is refilled at 4096 with the argument's
// start kept, and again at 27 + 4096, right after a 4,095-byte argument and its blank
const includes: ConfCase[] = [
  {
    name: 'a file that includes itself twice stops at the first chain 64 files deep (not 2^64 reads)',
    files: { 'nginx.conf': 'events {}\ninclude self.conf;\n', 'self.conf': 'include self.conf;\ninclude self.conf;\n' }, status: 1,
    lines: failed('[emerg] include nesting deeper than 64 files ("PREFIX/self.conf") in PREFIX/self.conf:1'),
    noReference: 'nginx 1.30 crashes (stack overflow) on a file that includes itself',
  },
];

const buffer: ConfCase[] = [
  {
    name: 'a 4,095-byte word whose blank ends nginx\'s 4096-byte buffer: too long parameter',
    files: { 'nginx.conf': `events {}\nworker_processes ${'y'.repeat(4095)} ;\n${'#'.repeat(100)}\n` }, status: 1,
    lines: failed('[emerg] too long parameter "yyyyyyyyyy..." started in PREFIX/nginx.conf:2'),
  },
  {
    name: 'a 4,094-byte word there is read (and is an invalid value)',
    files: { 'nginx.conf': `events {}\nworker_processes ${'y'.repeat(4094)} ;\n${'#'.repeat(100)}\n` }, status: 1,
    lines: failed('[emerg] "worker_processes" directive invalid value in PREFIX/nginx.conf:2'),
  },
  {
    name: 'a 4,095-byte quoted string whose closing quote ends the buffer: too long parameter "…" started',
    files: { 'nginx.conf': `events {}\nworker_processes "${'y'.repeat(4095)}";\n${'#'.repeat(100)}\n` }, status: 1,
    lines: failed('[emerg] too long parameter "yyyyyyyyyy..." started in PREFIX/nginx.conf:2'),
  },
];

defineConfCases('jinx -t: nesting without a limit', nesting);
defineConfCases('jinx -t: numbers past nginx\'s limits', numbers);
defineConfCases('jinx -t: value checks', values);
defineConfCases('jinx -t: NUL bytes', nul);
defineConfCases('jinx -t: nginx\'s 4096-byte read buffer', buffer);
defineConfCases('jinx -t: a file that includes itself', includes);

describe('a request to a location 5,000 blocks deep', () => {
  after(cleanup);
  it('is served by the innermost location; a sibling by its own', async () => {
    const port = await freePort();
    const conf = `daemon off;\nevents {}\nhttp {\n access_log off;\n server {\n  listen 127.0.0.1:${port};\n`
      + `${nested(5000, 'return 200 "deep\\n";')}  location /b { return 200 "sibling\\n"; }\n }\n}\n`;
    await startJinx(conf, [port]);
    assert.equal((await request(port, '/a/x')).body, 'deep\n');
    assert.equal((await request(port, '/b')).body, 'sibling\n');
    assert.equal((await request(port, '/c')).status, 404);
  });
});
