/**
 * Server-side includes, differential against nginx: the commands (`echo`
 * with its encodings and defaults, `set`, `config`, `if`/`elif`/`else`
 * with strings, regexes and captures, `block`), every parse and command
 * error with nginx's log line and `errmsg` text, `ssi_silent_errors`,
 * `ssi_value_length`, `ssi_types`, `ssi_last_modified` and the headers the
 * filter changes (GET and HEAD); `include` of static files, pages that are
 * themselves SSI, `file=` relative to the page, a proxied upstream whose
 * body arrives in small pieces (commands cut between them), `set=`
 * capturing a body, `wait=`, `stub=` for an error, the page's order kept
 * while a slow include runs, `subrequest_output_buffer_size`; `$date_gmt`
 * and `$date_local` in a `timefmt` and outside SSI. (A stub for an empty response is not compared: nginx
 * 1.30 sends it twice and breaks the chunked framing after it.)
 */
import { strict as assert } from 'node:assert';
import { after, describe, it } from 'node:test';
import { cleanup, startUpstream } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf, type Snap } from '../helpers/differential.js';

/** A page with every command, and the errors nginx logs for each kind of mistake. */
const COMMANDS_PAGE = `<!-- a plain comment --><<!--#echo var="uri" --><!-x<!--y<!--#echo var="args" -->
[<!--#echo var="nosuch" -->][<!--#echo var="nosuch" default="dflt" -->][<!--#echo var="arg_e" default="" -->]
[<!--#set var="q" value="<&>\\"$uri" --><!--#echo var="q" -->|<!--#echo var="q" encoding="url" -->|<!--#echo var="q" encoding="none" -->|<!--#echo var="q" -->]
[<!--#echo var="arg_x" encoding="entity" -->][<!--#echo var="arg_x" encoding="bogus" -->][<!--# echo var = "uri" -->][<!--#echo var='uri' -->]
[<!--#set var="v" value="\${uri}-$arg_x-\\$x-\\y" --><!--#echo var="v" encoding="none" -->][<!--#set var="http_host" value="mine" --><!--#echo var="HTTP_HOST" -->]
[<!--#if expr="$arg_x" -->X<!--#elif expr="$uri != /nomatch" -->ELIF<!--#else -->ELSE<!--#endif -->]
[<!--#if expr="$arg_y = yes" -->Y<!--#else -->notY<!--#endif -->][<!--#if expr="$ARG_Y!=yes" -->notY<!--#endif -->]
[<!--#if expr="$uri = /(c)\\.(?<ext>h)tml$/" -->$1=<!--#echo var="1" -->,<!--#echo var="ext" --><!--#endif -->][<!--#if expr="$arg_x = \\/x" -->slash<!--#endif -->]
[<!--#block name="b" -->in block <!--#echo var="uri" --><!--#endblock -->][<!--#bogus -->][<!--#echo -->][<!--#echo var="a" x="1" -->]
[<!--#echo var=uri -->][<!--#echo var="uri"-- >][<!--#include file="/f.txt" virtual="/x" -->][<!--#include -->][<!--#set var="a" -->]
[<!--#echo var="uri" var="args" -->][<!--#else -->][<!--#endif -->][<!--#if expr="$args" -->A<!--#if expr="1" -->B<!--#endif -->]
[<!--#if expr="$uri = /c.html" -->bad<!--#endif -->][<!--#if expr="$arg_x = /[/" -->R<!--#endif -->][<!--#if expr="$ARG_X <> 1" -->E<!--#endif -->]
[<!--#commandthatiswaytoolongforthessiparserlimit -->][<!--#echo varnamethatiswaytoolongforthessiparse="1" -->][<!--#echo va-r="1" -->]
[<!--#echo var="\${bad" -->][<!--#set var="z" value="\${uri" -->][<!--#set var="z" value="$" -->][<!--#set var="z" value="a\${}" -->]
[<!--#include virtual="/../x" -->][<!--#include virtual="/f.txt" wait="maybe" -->][<!--#include virtual="/f.txt" stub="nope" -->][<!--#include file="f.txt" wait="yes" -->]
[<!--#include virtual="/f.txt" set="s" stub="b" -->][<!--#config errmsg="ERR" --><!--#bogus -->][<!--#config errmsg="\"E\"" --><!--#bogus -->]
end<`;

/** Responses compared whole: status, headers (but Date, Server, and the validators of files written at run time), body. */
async function take(s: { get(path: string, opts?: { method?: string; headers?: Record<string, string> }): Promise<Snap> }, paths: readonly string[], method = 'GET'): Promise<Record<string, Snap>> {
  const out: Record<string, Snap> = {};
  for (const p of paths) out[`${method} ${p}`] = await s.get(p, { method, headers: { Host: 'ssi.test' } });
  return out;
}

describe('ssi (differential)', () => {
  after(cleanup);

  it('carries out echo, set, config, if and block, and logs and marks errors, as nginx', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`  types { text/html html; text/plain txt; }
  server { listen 127.0.0.1:${port}; server_name ssi.test; root html; ssi on;
    location /lm/ { alias html/; ssi_last_modified on; }
    location /silent/ { alias html/; ssi_silent_errors on; }
    location /short/ { alias html/; ssi_value_length 8; }
    location /plain/ { alias html/; ssi_types text/plain; }
    location /any/ { alias html/; ssi_types *; }
    location /off/ { alias html/; ssi off; }
    location = /ret { return 200 "R<!--#echo var='uri' -->"; }
    location = /ret-html { default_type text/html; return 200 "R<!--#echo var='uri' -->"; }
    location = /empty { default_type text/html; return 200 ""; }
    location = /gone { return 404; }
  }`),
      files: { 'html/c.html': COMMANDS_PAGE, 'html/f.txt': 'file\n', 'html/t.txt': 'T<!--#echo var="uri" -->' },
    }, async (s) => ({
      ...await take(s, ['/c.html?x=%3Ca%20b%3E&y=yes', '/c.html', '/lm/c.html', '/silent/c.html', '/short/c.html', '/off/c.html',
        '/plain/t.txt', '/any/t.txt', '/t.txt', '/ret', '/ret-html', '/empty', '/gone']),
      ...await take(s, ['/c.html', '/lm/c.html', '/plain/t.txt', '/gone'], 'HEAD'),
    }));
    const n = run.nginx.result;
    assert.match(n['GET /c.html']!.body, /\[an error occurred while processing the directive\]/);
    assert.equal(n['GET /c.html']!.headers['transfer-encoding'], 'chunked');
    assert.match(n['GET /lm/c.html']!.headers.etag ?? '', /^W\//);
    assertSameAsNginx(run);
  });

  it('includes files, SSI pages and proxied responses in order, with set=, wait= and stub=, as nginx', async () => {
    const up = await startUpstream((req, res) => {
      const path = req.url ?? '/';
      if (path.startsWith('/slow')) {
        setTimeout(() => res.end('SLOW'), 300);
        return;
      }
      if (path.startsWith('/pieces')) {
        // an SSI page cut into 3-byte pieces, sent apart: commands span the upstream's reads
        const body = 'P[<!--#echo var="uri" -->|<!--#include virtual="/f.txt" -->|<!--#set var="k" value="kept" --><!--#echo var="k" -->]';
        res.writeHead(200, { 'Content-Type': 'text/html' });
        let at = 0;
        const next = (): void => {
          if (at >= body.length) {
            res.end();
            return;
          }
          res.write(body.slice(at, at + 3));
          at += 3;
          setTimeout(next, 2);
        };
        next();
        return;
      }
      if (path.startsWith('/notfound')) {
        res.writeHead(404, { 'Content-Type': 'text/plain' });
        res.end('upstream 404');
        return;
      }
      res.writeHead(200, { 'Content-Type': 'text/plain', 'X-Up': 'yes' });
      res.end(`UP ${path} ${req.headers['x-client'] ?? '-'}`);
    });
    const run = await differential({
      conf: ({ port }) => httpConf(`  types { text/html html; text/plain txt; }
  server { listen 127.0.0.1:${port}; server_name ssi.test; root html; ssi on;
    location /up/ { proxy_pass http://127.0.0.1:${up.port}/; }
    location /dir/ { }
    location = /ret { return 200 "returned"; }
    location = /gone { return 404; }
  }`),
      files: {
        'html/f.txt': 'file\n',
        'html/inner.html': 'I[<!--#echo var="uri" -->?<!--#echo var="args" -->|<!--#echo var="k" -->]',
        'html/dir/rel.html': 'REL',
        'html/dir/page.html': '[<!--#include file="rel.html" -->][<!--#include virtual="rel.html?a=1" -->][<!--#include virtual="../f.txt" -->]',
        'html/inc.html': [
          '[<!--#include virtual="/f.txt" -->][<!--#include file="f.txt" -->][<!--#set var="k" value="K" --><!--#include virtual="/inner.html?a=$arg_a" -->]',
          '[<!--#include virtual="/up/plain?q=1" -->][<!--#include virtual="/up/pieces" -->][<!--#include virtual="/up/notfound" -->]',
          '[<!--#include virtual="/missing.html" -->][<!--#include virtual="/gone" -->][<!--#include virtual="/ret" -->]',
          '[<!--#include virtual="/f.txt" set="sf" -->=<!--#echo var="sf" -->][<!--#include virtual="/up/plain" set="su" -->=<!--#echo var="su" -->]',
          '[<!--#include virtual="/ret" set="sr" -->=<!--#echo var="sr" -->][<!--#include virtual="/missing.html" set="sm" -->=<!--#echo var="sm" default="unset" -->]',
          '[<!--#block name="fb" -->fallback <!--#echo var="uri" --><!--#endblock -->]',
          '[<!--#include virtual="/missing2.html" stub="fb" -->]',
          '[<!--#include virtual="/f.txt" stub="fb" -->][<!--#include virtual="/gone" stub="fb" -->]',
          '[<!--#include virtual="/up/slow" -->][<!--#include virtual="/f.txt" -->][<!--#include virtual="/up/slow" wait="yes" -->]',
          '[<!--#include virtual="/dir/page.html" -->]',
        ].join('\n'),
      },
    }, async (s) => take(s, ['/inc.html?a=A', '/dir/page.html']));
    const n = run.nginx.result;
    assert.match(n['GET /inc.html?a=A']!.body, /SLOW\]\[file\n\]\[SLOW\]/);
    assertSameAsNginx(run);
  });

  it('gives up the page when an include … set= is bigger than subrequest_output_buffer_size, as nginx', async () => {
    const up = await startUpstream((_req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/plain' });
      res.write('x'.repeat(100));
      setTimeout(() => res.end('y'.repeat(100)), 20);
    });
    const run = await differential({
      conf: ({ port }) => httpConf(`  types { text/html html; text/plain txt; }
  server { listen 127.0.0.1:${port}; server_name ssi.test; root html; ssi on; subrequest_output_buffer_size 150;
    location /up/ { proxy_pass http://127.0.0.1:${up.port}/; }
    location /big/ { alias html/; subrequest_output_buffer_size 1k; }
  }`),
      files: {
        'html/b.txt': 'b'.repeat(500),
        'html/file.html': '<!--#include virtual="/b.txt" set="v" -->x',
        'html/fits.html': '<!--#include virtual="/big/b.txt" set="v" --><!--#echo var="v" -->',
        'html/chunked.html': '<!--#include virtual="/up/c" set="v" -->x',
      },
    }, async (s) => {
      const out: Record<string, Snap | string> = {};
      for (const p of ['/file.html', '/fits.html', '/chunked.html']) {
        out[p] = await s.get(p, { headers: { Host: 'ssi.test' } }).catch((err: NodeJS.ErrnoException) => `failed: ${err.code ?? err.message}`);
      }
      return out;
    });
    assert.match(String(run.nginx.result['/file.html']), /^failed/);
    assertSameAsNginx(run);
  });

  it('gives $date_gmt and $date_local in the page\'s timefmt, and nginx\'s default outside SSI, as nginx', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`  types { text/html html; }
  server { listen 127.0.0.1:${port}; server_name ssi.test; root html; ssi on;
    add_header X-Date $date_gmt;
    location = /plain { ssi off; return 200 "x"; }
  }`),
      files: {
        'html/d.html': '<!--#echo var="date_gmt" -->|<!--#config timefmt="%Y-%m-%d %a %b %j %u %w %y %C %e %D %F %Z %%" --><!--#echo var="date_gmt" -->|<!--#echo var="date_local" -->',
      },
    }, async (s) => {
      const d = await s.get('/d.html');
      const p = await s.get('/plain');
      // the time of day may change between the two servers' runs: only the day and the forms are compared
      const form = (v: string | undefined): string => (v ?? '').replace(/\d\d:\d\d:\d\d/g, 'HH:MM:SS');
      return { body: form(d.body), header: form(d.headers['x-date']), plain: form(p.headers['x-date']) };
    });
    assert.match(run.nginx.result.body, /^[A-Z][a-z]+day, \d\d-[A-Z][a-z]{2}-\d{4} HH:MM:SS GMT\|\d{4}-/);
    assertSameAsNginx(run);
  });
});
