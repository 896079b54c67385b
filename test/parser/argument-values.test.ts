/**
 * Argument values as the tokenizer hands them to directives, seen in
 * responses: `return` bodies and `add_header` values after unquoting and
 * unescaping (`\"` `\'` `\\` `\t` `\r` `\n`; any other `\x` kept as is),
 * words holding `#`, `}` and `${…}`, newlines inside quotes, and bytes that
 * are not UTF-8. The same configuration is served by jinx and by the
 * reference nginx (or its recorded answers); the expected bodies are nginx 1.30's.
 */
import { strict as assert } from 'node:assert';
import { after, before, describe, it } from 'node:test';
import { HTTP_TEMP_PATHS, makePrefix } from '../helpers/conf-test.js';
import { cleanup, freePort, JINX, referenceNginx, request, startServer, type ServerProcess } from '../helpers/harness.js';
import { answer, nextKey } from '../helpers/recorded.js';

/** The configuration, as latin1 text (so `\xe9` is the byte 0xE9). */
function config(prefix: string, port: number): Buffer {
  const text = `daemon off;
pid ${prefix}/nginx.pid;
error_log ${prefix}/logs/error.log warn;
events {}
http {
  ${HTTP_TEMP_PATHS}
  access_log off;
  default_type text/plain;
  server {
    listen 127.0.0.1:${port};
    location = /dq { return 200 "a\\"b\\\\c\\td\\x\\n"; }
    location = /sq { return 200 'it\\'s "x"'; }
    location = /nl { return 200 "one
two"; }
    location = /word { return 200 a#b}c\\;d; }
    location = /var { set $v V; return 200 \${v}x$v; }
    location = /latin1 { return 200 "caf\xe9"; }
    location = /utf8 { return 200 "caf\xc3\xa9"; }
    location = /header { add_header X-T "q\\"u o\\\\te" always; return 204; }
    location = /paren { if ($uri = "/paren") { return 200 paren; } return 404; }
  }
}
`;
  return Buffer.from(text, 'latin1');
}

/** path → body bytes (as latin1) that nginx 1.30 sends. */
const BODIES: ReadonlyArray<readonly [string, string, string]> = [
  ['/dq', '"a\\"b\\\\c\\td\\x\\n" unescapes \\" \\\\ \\t \\n and keeps \\x', 'a"b\\c\td\\x\n'],
  ['/sq', "'it\\'s \"x\"' unescapes \\' and keeps double quotes", 'it\'s "x"'],
  ['/nl', 'a newline inside quotes is part of the value', 'one\ntwo'],
  ['/word', 'a bare word keeps #, } and \\;', 'a#b}c\\;d'],
  ['/var', '${v} in a bare word is one word and interpolates', 'VxV'],
  ['/latin1', 'a latin1 byte (0xE9) is sent unchanged', 'caf\xe9'],
  ['/utf8', 'UTF-8 bytes are sent unchanged', 'caf\xc3\xa9'],
  ['/paren', 'a ) right after a closing quote ends an if condition', 'paren'],
];

/** What a test reads of a response: the status, the body and `X-T`. */
interface Served {
  readonly status: number;
  readonly body: string;
  readonly xT: string | undefined;
}

/**
 * The responses of `binary` (jinx or the reference nginx) to each path; the
 * reference's are checked against the recording, or read from it when no
 * reference nginx is installed (recorded.ts).
 */
function defineServed(title: string, kind: 'jinx' | 'nginx'): void {
  describe(title, () => {
    let server: ServerProcess | undefined;
    let port = 0;
    const binary = kind === 'jinx' ? JINX : referenceNginx();
    before(async () => {
      if (binary === undefined) return;
      port = await freePort();
      const prefix = makePrefix({});
      const { writeFileSync } = await import('node:fs');
      writeFileSync(`${prefix}/nginx.conf`, config(prefix, port));
      server = await startServer(binary, prefix, `${prefix}/nginx.conf`, [port]);
    });
    after(async () => {
      if (server) await server.stop();
      await cleanup();
    });
    const served = async (path: string): Promise<Served> => {
      const live = binary === undefined ? undefined : async (): Promise<Served> => {
        const res = await request(port, path);
        return { status: res.status, body: res.body, xT: res.headers['x-t'] as string | undefined };
      };
      return kind === 'jinx' ? live!() : answer(nextKey(), live);
    };
    for (const [path, what, body] of BODIES) {
      it(`${path}: ${what}`, async () => {
        const res = await served(path);
        assert.equal(res.status, 200);
        assert.equal(res.body, body);
      });
    }
    it('/header: add_header "q\\"u o\\\\te" sends q"u o\\te', async () => {
      const res = await served('/header');
      assert.equal(res.status, 204);
      assert.equal(res.xT, 'q"u o\\te');
    });
  });
}

defineServed('argument values served by jinx', 'jinx');
defineServed('argument values served by the reference nginx', 'nginx');
