/**
 * FastCGI against a real php-fpm, differential against nginx: both servers
 * pass the same requests to the same php-fpm pool (started by the test on
 * 127.0.0.1, and one on a unix socket) with Debian's `fastcgi_params`, and
 * each case compares what the client got, what PHP saw (its `$_SERVER`, the
 * body it read), and the error-log lines (`FastCGI sent in stderr: …`,
 * timeouts, refused connections).
 */
import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { SHARED, cleanup, freePort } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf, rawExchange, type Side, type Snap } from '../helpers/differential.js';
import { NO_PHP_FPM, countingRelay, startPhpFpm } from '../helpers/php-fpm.js';
import { unacceptingPort } from '../helpers/upstreams.js';

const DEBIAN = join(SHARED, 'corpus/debian/etc/nginx');

/** The PHP site every case serves (under PREFIX/html), and Debian's parameter files next to nginx.conf. */
const FILES: Record<string, string> = {
  fastcgi_params: readFileSync(join(DEBIAN, 'fastcgi_params'), 'utf8'),
  'fastcgi.conf': readFileSync(join(DEBIAN, 'fastcgi.conf'), 'utf8'),
  // what PHP saw: every parameter but the ones that vary between the two runs, and the body it read
  'html/dump.php': `<?php
$body = file_get_contents('php://input');
$server = $_SERVER;
unset($server['REMOTE_PORT'], $server['REQUEST_TIME'], $server['REQUEST_TIME_FLOAT']);
header('Content-Type: application/json');
echo json_encode(['server' => $server, 'get' => $_GET, 'bodyLength' => strlen($body), 'bodySha1' => sha1($body)]);
`,
  'html/big.php': `<?php for ($i = 0; $i < 65536; $i++) echo sprintf('%015x', $i), "\\n";
`,
  'html/index.php': `<?php echo "index of ", $_SERVER['SCRIPT_NAME'], "\\n";\n`,
  'html/slow.php': `<?php sleep((int) ($_GET['s'] ?? 3)); echo "late\\n";\n`,
  'html/stderr.php': `<?php
if (isset($_GET['utf8'])) for ($i = 0; $i < 3; $i++) error_log(str_repeat('é', 500));
error_log("first line\\nsecond line\\n");
for ($i = 0; $i < (int) ($_GET['n'] ?? 1); $i++) error_log(str_repeat(chr(97 + $i), 1000));
echo "after stderr\\n";
flush();
error_log("once the header was sent");
echo "done\\n";
`,
  'html/warning.php': `<?php echo $undefined ?? 'none', "\\n"; echo intdiv(1, 1) + $missing, "\\n";\n`,
  'html/moved.php': `<?php header('Location: /elsewhere'); echo "moved\\n";\n`,
  'html/status.php': `<?php
if (isset($_GET['permanent'])) header('Location: https://php.test/new', true, 301);
else if (isset($_GET['custom'])) header('Status: 299 Custom Thing');
else http_response_code((int) ($_GET['code'] ?? 201));
header('X-Accel-Expires: 10');
header('X-Extra: extra');
echo "status\\n";
`,
  'html/lengths.php': `<?php
$len = (int) $_GET['declared'];
header("Content-Length: $len");
echo str_repeat('z', (int) $_GET['sent']);
`,
  'html/badheader.php': `<?php header($_GET['h']); echo "body\n";
`,
  'html/empty.php': `<?php http_response_code(204); error_log('no content');
`,
  'html/unbuffered.php': `<?php
header('X-Accel-Buffering: no');
echo "first\n";
flush();
usleep(300000);
error_log('between the parts');
echo "second\n";
`,
  'html/auth.php': `<?php
if (($_COOKIE['user'] ?? '') === 'alice') { header('X-User: alice'); exit; }
error_log('refused ' . $_SERVER['REQUEST_URI']);
header('WWW-Authenticate: Basic realm="php"');
http_response_code(401);
`,
};

/** The location every case uses for PHP, as in Debian's snippets/fastcgi-php.conf. */
/** A server for php.test on `port` with its root under `prefix`, and `body` inside it. */
const phpConf = (port: number, prefix: string, body: string): string =>
  httpConf(`  server { listen 127.0.0.1:${port}; server_name php.test; root ${prefix}/html;${body}\n  }`);

const PHP_LOCATION = (pass: string, extra = ''): string => `location ~ \\.php$ {
      include fastcgi_params;
      fastcgi_param SCRIPT_FILENAME $document_root$fastcgi_script_name;
      fastcgi_pass ${pass};
      ${extra}
    }`;

/** A response as compared: status line, headers and body (JSON bodies parsed). */
const seen = async (s: Side, path: string, opts: Parameters<Side['get']>[1] = {}): Promise<Snap> => s.get(path, opts);

describe('FastCGI against php-fpm (differential)', { skip: NO_PHP_FPM }, () => {
  after(cleanup);

  it('runs a PHP script with the parameters of fastcgi_params: a GET with a query, a POST of 1 MiB read by PHP, a HEAD, 1 MiB of output', async () => {
    const fpm = await startPhpFpm();
    const body = Buffer.alloc(1024 * 1024);
    for (let i = 0; i < body.length; i++) body[i] = (i * 7 + (i >> 10)) & 0xff;
    const run = await differential({
      conf: ({ port, prefix }) => phpConf(port, prefix, `
    client_max_body_size 2m;
    ${PHP_LOCATION(`127.0.0.1:${fpm.port}`)}
    location /big/ { ${PHP_LOCATION(`127.0.0.1:${fpm.port}`, 'fastcgi_max_temp_file_size 0;')} }`),
      files: { ...FILES, 'html/big/big.php': FILES['html/big.php']! },
    }, async (s) => ({
      get: await seen(s, '/dump.php?a=1&b=two%20words&a2[]=x', { headers: { 'X-Custom': 'v', Cookie: 'c=1', 'User-Agent': 'test' } }),
      post: await seen(s, '/dump.php', { method: 'POST', body, headers: { 'Content-Type': 'application/octet-stream' } }),
      head: await seen(s, '/dump.php', { method: 'HEAD' }),
      big: await seen(s, '/big/big.php'),
    }));
    const n = run.nginx.result;
    assert.equal(n.get.status, 200);
    const php = JSON.parse(n.get.body) as { server: Record<string, string>; get: Record<string, unknown> };
    assert.equal(php.server.QUERY_STRING, 'a=1&b=two%20words&a2[]=x');
    assert.deepEqual(php.get, { a: '1', b: 'two words', a2: ['x'] });
    assert.equal(php.server.HTTP_X_CUSTOM, 'v');
    assert.equal(php.server.SCRIPT_FILENAME, `${php.server.DOCUMENT_ROOT}/dump.php`);
    const post = JSON.parse(n.post.body) as { bodyLength: number; bodySha1: string; server: Record<string, string> };
    assert.equal(post.bodyLength, body.length);
    assert.equal(post.server.CONTENT_LENGTH, String(body.length));
    // 1 MiB of output in STDOUT records of up to 64 KiB, php-fpm held back while the client reads (whether nginx writes a
    // temporary file depends on how fast the client reads, so none is allowed)
    assert.equal(n.big.body.length, 1024 * 1024);
    assert.equal(n.big.body.slice(-16), `${(65535).toString(16).padStart(15, '0')}\n`);
    assertSameAsNginx(run);
  });

  it('splits the path with fastcgi_split_path_info into $fastcgi_script_name and PATH_INFO, and appends fastcgi_index to a directory', async () => {
    const fpm = await startPhpFpm();
    const run = await differential({
      conf: ({ port, prefix }) => phpConf(port, prefix, `
    location ~ ^(.+\\.php)(/.*)?$ {
      fastcgi_split_path_info ^(.+\\.php)(/.+)$;
      include fastcgi.conf;
      fastcgi_param PATH_INFO $fastcgi_path_info;
      fastcgi_pass 127.0.0.1:${fpm.port};
    }
    location / {
      fastcgi_index index.php;
      include fastcgi.conf;
      fastcgi_pass 127.0.0.1:${fpm.port};
    }`),
      files: FILES,
    }, async (s) => ({
      pathInfo: await seen(s, '/dump.php/extra/path?x=1'),
      plain: await seen(s, '/dump.php'),
      index: await seen(s, '/'),
    }));
    const info = JSON.parse(run.nginx.result.pathInfo.body) as { server: Record<string, string> };
    assert.equal(info.server.SCRIPT_NAME, '/dump.php');
    assert.equal(info.server.PATH_INFO, '/extra/path');
    assert.equal(run.nginx.result.index.body, 'index of /index.php\n');
    assertSameAsNginx(run);
  });

  it('answers 404 "File not found." for a missing script and logs "Primary script unknown", over TCP and over a unix socket', async () => {
    const fpm = await startPhpFpm();
    const unix = await startPhpFpm({ unix: true });
    const run = await differential({
      conf: ({ port, prefix }) => phpConf(port, prefix, `
    ${PHP_LOCATION(`127.0.0.1:${fpm.port}`)}
    location /unix/ { location ~ \\.php$ { include fastcgi_params; fastcgi_param SCRIPT_FILENAME $document_root/dump.php; fastcgi_pass unix:${unix.socket}; } }
    location /unix-missing/ { ${PHP_LOCATION(`unix:${unix.socket}`)} }`),
      files: FILES,
    }, async (s) => ({
      missing: await seen(s, '/wp-login.php', { headers: { Referer: 'http://php.test/' } }),
      missingPost: await seen(s, '/vendor/phpunit/eval-stdin.php', { method: 'POST', body: '<?php echo 1;' }),
      unix: (await seen(s, '/unix/x.php?via=unix')).status,
      unixMissing: await seen(s, '/unix-missing/nothing.php'),
    }));
    const n = run.nginx.result;
    assert.equal(n.missing.status, 404);
    assert.equal(n.missing.body, 'File not found.\n');
    assert.equal(n.unix, 200);
    assert.ok(run.nginx.errorLog.some((l) => l.startsWith('[error] *CONN FastCGI sent in stderr: "Primary script unknown" while reading response header from upstream')
      && l.includes(`upstream: "fastcgi://127.0.0.1:${fpm.port}"`)));
    assert.ok(run.nginx.errorLog.some((l) => l.includes(`upstream: "fastcgi://unix:${unix.socket}:"`)));
    assertSameAsNginx(run);
  });

  it('logs each stderr record as nginx does: multi-line messages, long ones in buffer-sized parts, and stderr after the header', async () => {
    const fpm = await startPhpFpm();
    const run = await differential({
      conf: ({ port, prefix }) => phpConf(port, prefix, `
    ${PHP_LOCATION(`127.0.0.1:${fpm.port}`)}`),
      files: FILES,
      // where a line is cut at 2048 bytes depends on the digits of the pid in its prefix
    }, async (s) => ({
      short: await seen(s, '/stderr.php'),
      long: await seen(s, '/stderr.php?n=9'),
      utf8: await seen(s, '/stderr.php?utf8'),
      warning: await seen(s, '/warning.php'),
    }));
    const stderr = run.nginx.errorLog.filter((l) => l.startsWith('[error] *CONN FastCGI sent in stderr: "'));
    assert.equal(stderr.length, 9);
    // a message with newlines stays one entry, its lines as PHP wrote them
    assert.ok(stderr[0]!.startsWith('[error] *CONN FastCGI sent in stderr: "PHP message: first line\nsecond line\n; PHP message: aaaa'));
    assert.ok(stderr[1]!.startsWith('[error] *CONN FastCGI sent in stderr: "; PHP message: once the header was sent" while reading upstream,'));
    // nine 1000-byte messages in one 9 KiB record: one line per 4 KiB of fastcgi_buffer_size, each cut at 2048 bytes (marked
    // [CUT] where the widest pid would cut it: see evenCuts in differential.ts)
    assert.match(stderr[2]!, /^\[error\] \*CONN FastCGI sent in stderr: "PHP message: first line\nsecond line\n; PHP message: a{1000}; PHP message: b+\[CUT\]$/);
    assert.match(stderr[3]!, /^\[error\] \*CONN FastCGI sent in stderr: "d{8}; PHP message: e{1000}; PHP message: f+\[CUT\]$/);
    assert.match(stderr[4]!, /^\[error\] \*CONN FastCGI sent in stderr: "i{987}" while reading response header from upstream, /);
    // bytes as PHP sent them (UTF-8 here), the line cut at 2048 bytes counted in bytes (2047 and the newline); the message
    // measured after the prefix ("[DATE] [error] PID#TID: " in a recording), cut where the widest pid#tid would cut it
    const utf8 = run.nginx.file('logs/error.log').find((l) => l.includes('\u00c3\u00a9'.repeat(10)))!;
    const message = utf8.replace(/^.*?\[error\] (?:\d+#\d+|PID#TID): /, '');
    assert.ok(message.endsWith('[CUT]'), message.slice(-40));
    assert.equal(Buffer.byteLength(message, 'latin1') - '[CUT]'.length, 2047 - '2026/01/01 00:00:00 [error] 1234567#1234567: '.length);
    assertSameAsNginx(run);
  });

  it('takes the status from Status:, 302 for a Location without one, hides Status and X-Accel-* (fastcgi_hide_header, fastcgi_pass_header), intercepts errors', async () => {
    const fpm = await startPhpFpm();
    const run = await differential({
      conf: ({ port, prefix }) => phpConf(port, prefix, `
    error_page 404 /404.html;
    location = /404.html { return 200 "own 404 page\\n"; }
    ${PHP_LOCATION(`127.0.0.1:${fpm.port}`)}
    location /hide/ { ${PHP_LOCATION(`127.0.0.1:${fpm.port}`, 'fastcgi_hide_header X-Extra; fastcgi_hide_header X-Powered-By; fastcgi_pass_header X-Accel-Expires;')} }
    location /intercept/ { ${PHP_LOCATION(`127.0.0.1:${fpm.port}`, 'fastcgi_intercept_errors on;')} }`),
      files: { ...FILES, 'html/hide/status.php': FILES['html/status.php']!, 'html/intercept/status.php': FILES['html/status.php']! },
    }, async (s) => ({
      moved: await seen(s, '/moved.php'),
      created: await seen(s, '/status.php'),
      permanent: await seen(s, '/status.php?permanent'),
      custom: await seen(s, '/status.php?custom'),
      hidden: await seen(s, '/hide/status.php'),
      notIntercepted: await seen(s, '/status.php?code=404'),
      intercepted: await seen(s, '/intercept/status.php?code=404'),
      interceptedMissing: await seen(s, '/intercept/none.php'),
    }));
    const n = run.nginx.result;
    assert.equal(n.moved.status, 302);
    assert.equal(n.moved.reason, 'Found');
    assert.equal(n.created.status, 201);
    assert.equal(n.permanent.status, 301);
    assert.equal(n.custom.reason, 'Custom Thing');
    assert.equal(n.intercepted.body, 'own 404 page\n');
    assertSameAsNginx(run);
  });

  it('answers 504 when a script runs past fastcgi_read_timeout or the server never accepts within fastcgi_connect_timeout, and 502 when nothing listens', async () => {
    const fpm = await startPhpFpm();
    const refused = await freePort();
    const never = await unacceptingPort();
    const run = await differential({
      conf: ({ port, prefix }) => phpConf(port, prefix, `
    location /slow/ { ${PHP_LOCATION(`127.0.0.1:${fpm.port}`, 'fastcgi_read_timeout 1s;')} }
    location /refused/ { ${PHP_LOCATION(`127.0.0.1:${refused}`)} }
    location /never/ { ${PHP_LOCATION(`127.0.0.1:${never}`, 'fastcgi_connect_timeout 1s;')} }`),
      files: { ...FILES, 'html/slow/slow.php': FILES['html/slow.php']!, 'html/refused/x.php': '<?php echo 1;\n', 'html/never/x.php': '<?php echo 1;\n' },
    }, async (s) => ({
      slow: (await seen(s, '/slow/slow.php?s=3')).status,
      inTime: await seen(s, '/slow/slow.php?s=0'),
      refused: (await seen(s, '/refused/x.php')).status,
      never: (await seen(s, '/never/x.php')).status,
    }));
    assert.deepEqual([run.nginx.result.slow, run.nginx.result.refused, run.nginx.result.never], [504, 502, 504]);
    assert.ok(run.nginx.errorLog.some((l) => l.startsWith('[error] *CONN upstream timed out (110: Operation timed out) while reading response header from upstream')));
    assert.ok(run.nginx.errorLog.some((l) => l.startsWith('[error] *CONN upstream timed out (110: Operation timed out) while connecting to upstream')));
    assertSameAsNginx(run);
  });

  it('passes a request on to the next server of an upstream group with fastcgi_next_upstream', async () => {
    const fpm = await startPhpFpm();
    const refused = await freePort();
    const run = await differential({
      conf: ({ port, prefix }) => httpConf(`  upstream php { server 127.0.0.1:${refused}; server 127.0.0.1:${fpm.port}; }
  upstream nonext { server 127.0.0.1:${refused}; server 127.0.0.1:${fpm.port}; }
  server { listen 127.0.0.1:${port}; server_name php.test; root ${prefix}/html;
    add_header X-Upstream "$upstream_addr | $upstream_status" always;
    ${PHP_LOCATION('php')}
    location /off/ { ${PHP_LOCATION('nonext', 'fastcgi_next_upstream off;')} }
  }`, { oneWorker: true }),
      files: { ...FILES, 'html/off/index.php': FILES['html/index.php']! },
    }, async (s) => ({
      first: await seen(s, '/index.php'),
      second: await seen(s, '/index.php'),
      off: (await seen(s, '/off/index.php')).status,
      offAgain: (await seen(s, '/off/index.php')).status,
    }));
    const n = run.nginx.result;
    assert.equal(n.first.status, 200);
    assert.equal(n.first.headers['x-upstream'], `127.0.0.1:${refused}, 127.0.0.1:${fpm.port} | 502, 200`);
    assert.equal(n.off, 502);
    assertSameAsNginx(run);
  });

  it('keeps one connection to php-fpm for successive requests with fastcgi_keep_conn on in an upstream block (until keepalive_time), and a connection per request otherwise', async () => {
    const fpm = await startPhpFpm();
    const kept = await countingRelay(fpm.port!);
    const closed = await countingRelay(fpm.port!);
    const direct = await countingRelay(fpm.port!);
    const aged = await countingRelay(fpm.port!);
    const run = await differential({
      conf: ({ port, prefix }) => httpConf(`  upstream kept { server 127.0.0.1:${kept.port}; }
  upstream closed { server 127.0.0.1:${closed.port}; }
  upstream aged { server 127.0.0.1:${aged.port}; keepalive_time 1s; }
  server { listen 127.0.0.1:${port}; server_name php.test; root ${prefix}/html;
    location /kept/ { ${PHP_LOCATION('kept', 'fastcgi_keep_conn on;')} }
    location /closed/ { ${PHP_LOCATION('closed')} }
    location /direct/ { ${PHP_LOCATION(`127.0.0.1:${direct.port}`, 'fastcgi_keep_conn on;')} }
    location /aged/ { ${PHP_LOCATION('aged', 'fastcgi_keep_conn on;')} }
  }`, { oneWorker: true }),
      files: {
        ...FILES, 'html/kept/index.php': FILES['html/index.php']!, 'html/closed/index.php': FILES['html/index.php']!, 'html/direct/index.php': FILES['html/index.php']!,
        'html/aged/index.php': FILES['html/index.php']!,
      },
    }, async (s) => {
      const before = [kept.connections(), closed.connections(), direct.connections()];
      const out: Record<string, Snap> = {};
      for (const where of ['kept', 'closed', 'direct']) for (let i = 0; i < 3; i++) out[`${where} ${i}`] = await seen(s, `/${where}/index.php`);
      const counts = [kept.connections() - before[0]!, closed.connections() - before[1]!, direct.connections() - before[2]!];
      // missing scripts, for error-log lines whose connection numbers count the connections opened in between
      for (const where of ['kept', 'kept', 'closed', 'closed']) out[`missing ${where}`] = await seen(s, `/${where}/none.php`);
      // the request after keepalive_time still uses the old connection, which is then closed
      const agedBefore = aged.connections();
      const agedCounts: number[] = [];
      for (const waitMs of [0, 0, 1500, 0]) {
        await new Promise((res) => setTimeout(res, waitMs));
        await seen(s, '/aged/index.php');
        agedCounts.push(aged.connections() - agedBefore);
      }
      // the connections php-fpm's relays counted, in the result so that a recording keeps nginx's
      return { answers: out, counts, agedCounts };
    });
    assert.deepEqual(run.nginx.result.counts, [1, 3, 3]);
    assert.deepEqual(run.jinx.result.counts, run.nginx.result.counts);
    assert.deepEqual(run.nginx.result.agedCounts, [1, 1, 1, 2]);
    assert.deepEqual(run.jinx.result.agedCounts, run.nginx.result.agedCounts);
    const numbers = (lines: string[]): number[] => {
      const ns = lines.filter((l) => l.includes('Primary script unknown')).map((l) => Number(/\*(\d+) /.exec(l)![1]));
      return ns.map((n) => n - ns[0]!);
    };
    // a kept connection takes no new number: the second kept request's client is next, a closed one's upstream takes one more
    assert.deepEqual(numbers(run.nginx.file('logs/error.log')), [0, 1, 2, 4]);
    assert.deepEqual(numbers(run.jinx.file('logs/error.log')), numbers(run.nginx.file('logs/error.log')));
    assertSameAsNginx(run);
  });

  it('holds the body to the script\'s Content-Length, refuses header lines nginx refuses, ends HEAD and 204 responses at the header (a bare Status: 204 without a type), and names Content-Type as nginx', async () => {
    const fpm = await startPhpFpm();
    const run = await differential({
      conf: ({ port, prefix }) => phpConf(port, prefix, `
    ${PHP_LOCATION(`127.0.0.1:${fpm.port}`)}`),
      files: FILES,
    }, async (s) => {
      const out: Record<string, Snap | undefined> = {};
      out.exact = await seen(s, '/lengths.php?declared=5&sent=5');
      out.longer = await seen(s, '/lengths.php?declared=5&sent=10');
      out.zero = await seen(s, '/lengths.php?declared=0&sent=3');
      out.shorter = await s.raw('GET /lengths.php?declared=100&sent=10 HTTP/1.1\r\nHost: php.test\r\nConnection: close\r\n\r\n');
      for (const h of ['Bad Name: x', 'X-Ok: fine', 'NoColon', 'X-Tab:\tvalue', 'Status: abc', 'Status: 299', 'Status: 204']) {
        out[`header ${h}`] = await seen(s, `/badheader.php?h=${encodeURIComponent(h)}`);
      }
      out.head = await seen(s, '/stderr.php', { method: 'HEAD' });
      out.noContent = await seen(s, '/empty.php');
      // PHP writes "Content-type"; nginx's header filter writes the type under its own name
      const text = await rawExchange(s.port, 'GET /index.php HTTP/1.1\r\nHost: php.test\r\nConnection: close\r\n\r\n');
      return { snaps: out, typeName: /^(content-type):/im.exec(text)?.[1] };
    });
    assert.equal(run.jinx.result.typeName, 'Content-Type');
    assert.equal(run.jinx.result.snaps['header Status: 204']!.headers['content-type'], undefined);
    const n = run.nginx.result.snaps;
    assert.equal(n.longer!.body, 'zzzzz');
    assert.ok(run.nginx.errorLog.some((l) => l.startsWith('[warn] *CONN upstream sent more data than specified in "Content-Length" header while reading upstream')));
    assert.equal(n.noContent!.status, 204);
    // HEAD: the stderr PHP writes after the header is never read
    assert.ok(!run.nginx.errorLog.some((l) => l.includes('once the header was sent') && l.includes('"HEAD ')));
    assertSameAsNginx(run);
  });

  it('streams a response with X-Accel-Buffering: no, inherits fastcgi_param only when a level has none, and passes a variable address', async () => {
    const fpm = await startPhpFpm();
    const run = await differential({
      conf: ({ port, prefix }) => httpConf(`  fastcgi_param FROM_HTTP http;
  server { listen 127.0.0.1:${port}; server_name php.test; root ${prefix}/html;
    include fastcgi_params;
    fastcgi_param FROM_SERVER server;
    fastcgi_param SCRIPT_FILENAME $document_root/dump.php;
    fastcgi_param OPTIONAL $http_x_optional if_not_empty;
    set $php 127.0.0.1:${fpm.port};
    location /inherits/ { fastcgi_pass $php; }
    location /own/ { fastcgi_param REQUEST_METHOD $request_method; fastcgi_param SCRIPT_FILENAME $document_root/dump.php; fastcgi_pass 127.0.0.1:${fpm.port}; }
    location /noheaders/ { fastcgi_pass_request_headers off; fastcgi_pass 127.0.0.1:${fpm.port}; }
    ${PHP_LOCATION(`127.0.0.1:${fpm.port}`)}
  }`),
      files: FILES,
    }, async (s) => ({
      inherits: await seen(s, '/inherits/x', { headers: { 'X-Optional': 'yes', 'X-Other': 'o' } }),
      inheritsEmpty: await seen(s, '/inherits/x'),
      own: await seen(s, '/own/x?q=1', { headers: { 'X-Other': 'o' } }),
      noHeaders: await seen(s, '/noheaders/x', { headers: { 'X-Other': 'o' } }),
      unbuffered: await seen(s, '/unbuffered.php'),
    }));
    const server = (snap: Snap): Record<string, string> => (JSON.parse(snap.body) as { server: Record<string, string> }).server;
    const n = run.nginx.result;
    assert.deepEqual([server(n.inherits).FROM_SERVER, server(n.inherits).FROM_HTTP, server(n.inherits).OPTIONAL], ['server', undefined, 'yes']);
    assert.equal(server(n.inheritsEmpty).OPTIONAL, undefined);
    assert.deepEqual([server(n.own).FROM_SERVER, server(n.own).QUERY_STRING], [undefined, undefined]);
    assert.equal(server(n.noHeaders).HTTP_X_OTHER, undefined);
    assert.equal(n.unbuffered.body, 'first\nsecond\n');
    assert.ok(run.nginx.errorLog.some((l) => l.startsWith('[error] *CONN FastCGI sent in stderr: "PHP message: between the parts" while reading upstream,')));
    assertSameAsNginx(run);
  });

  it('runs an auth_request subrequest through php-fpm: the script\'s 200 lets the request through, its 401 and WWW-Authenticate reach the client, its stderr is logged with the subrequest', async () => {
    const fpm = await startPhpFpm();
    const run = await differential({
      conf: ({ port, prefix }) => phpConf(port, prefix, `
    location = /auth { internal; include fastcgi_params; fastcgi_param SCRIPT_FILENAME $document_root/auth.php; fastcgi_pass 127.0.0.1:${fpm.port}; }
    location /private/ {
      auth_request /auth;
      auth_request_set $user $upstream_http_x_user;
      auth_request_set $auth $upstream_status;
      add_header X-Auth "user=$user status=$auth" always;
      try_files /private.txt =404;
    }`),
      files: { ...FILES, 'html/private.txt': 'private\n' },
    }, async (s) => ({
      allowed: await seen(s, '/private/doc', { headers: { Cookie: 'user=alice' } }),
      refused: await seen(s, '/private/doc?x=1', { headers: { Cookie: 'user=mallory' } }),
    }));
    const n = run.nginx.result;
    assert.deepEqual([n.allowed.status, n.allowed.headers['x-auth']], [200, 'user=alice status=200']);
    assert.equal(n.refused.status, 401);
    assert.equal(n.refused.headers['www-authenticate'], 'Basic realm="php"');
    assert.ok(run.nginx.errorLog.some((l) => l.startsWith('[error] *CONN FastCGI sent in stderr: "PHP message: refused /private/doc?x=1" while reading response header from upstream')
      && l.includes('subrequest: "/auth"')));
    assertSameAsNginx(run);
  });
});
