/**
 * `-t` on the stream module's `pass` (`ngx_stream_pass`): the addresses it
 * takes, and nginx's `[emerg]` for the ones it refuses (a name, which it does
 * not resolve; no port; a bad port or host; a unix socket without a path;
 * a duplicate), each checked against the reference nginx.
 */
import { defineConfCases, failed, succeeded, type ConfCase } from '../helpers/conf-test.js';
import { streamModulePath } from '../helpers/corpus-trees.js';

/** A config whose one stream server holds `body` (its first line is the file's 3rd). */
const inServer = (body: string): Record<string, string> => ({
  'nginx.conf': `load_module ${streamModulePath()};\nevents {}\nstream { server { listen 127.0.0.1:1;\n${body}\n} }\n`,
});

const ok = (name: string, body: string): ConfCase => ({ name, files: inServer(body), status: 0, lines: succeeded() });
const bad = (name: string, body: string, message: string): ConfCase => ({
  name, files: inServer(body), status: 1, lines: failed(`[emerg] ${message} in PREFIX/nginx.conf:4`),
});

const pass: ConfCase[] = [
  ok('pass takes an IPv4 address with a port', 'pass 127.0.0.1:80;'),
  ok('pass takes an IPv6 address', 'pass [::1]:80;'),
  ok('pass takes the wildcard address', 'pass 0.0.0.0:80;'),
  ok('pass takes a unix socket', 'pass unix:/tmp/jinx-pass.sock;'),
  ok('pass takes variables (parsed for each session)', 'pass $server_addr:$server_port;'),
  bad('pass does not resolve names', 'pass localhost:80;', '"pass" directive has no addresses'),
  bad('pass of a port alone names no address', 'pass 8080;', '"pass" directive has no addresses'),
  bad('pass needs a port', 'pass 127.0.0.1;', '"pass" directive has no port'),
  bad('pass with a port out of range', 'pass 127.0.0.1:99999;', 'invalid port in "127.0.0.1:99999" of the "pass" directive'),
  bad('pass with a path', 'pass 127.0.0.1:80/x;', 'invalid host in "127.0.0.1:80/x" of the "pass" directive'),
  bad('pass with an unclosed IPv6 address', 'pass [::1;', 'invalid host in "[::1" of the "pass" directive'),
  bad('pass of a unix socket without a path', 'pass unix:;', 'no path in the unix domain socket in "unix:" of the "pass" directive'),
  // nginx finds unknown variables once the configuration is read: the line has no place
  { name: 'pass with an unknown variable', files: inServer('pass $nothing;'), status: 1, lines: failed('[emerg] unknown "nothing" variable') },
  bad('pass twice is a duplicate', 'pass 127.0.0.1:80; pass 127.0.0.1:81;', '"pass" directive is duplicate'),
];

defineConfCases('stream pass', pass);
