/**
 * The WebDAV module, differential against nginx: PUT (a new file 201 with
 * Location, a file replaced 204, its permissions `dav_access`, its time the
 * request's Date, `create_full_put_path`, a collection 409, a range 501, a
 * directory in the way 409, no body), DELETE (a file, a tree, a directory
 * without its slash, Depth, `min_delete_depth`, a missing file), MKCOL
 * (201, an existing one 405, without the slash 409, with a body 415), COPY
 * and MOVE (files and trees, Overwrite, Destination as a path or a URL of
 * the same host, another host, unsafe), and the files each leaves behind;
 * and a COPY or MOVE onto itself or into itself, which jinx refuses as
 * nginx does since 1.31 (nginx 1.30 truncates the file, or copies the tree
 * into itself until its path is too long).
 */
import { strict as assert } from 'node:assert';
import { lstatSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { cleanup, freePort, request, startJinx, writeFiles } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf, type Snap } from '../helpers/differential.js';

/** The tree under `dir`: each path with its kind, permissions and a file's contents (and time, when `times`). */
function tree(dir: string, times: ReadonlySet<string>, at = ''): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of readdirSync(join(dir, at)).sort()) {
    const rel = `${at}/${name}`;
    const st = lstatSync(join(dir, rel));
    const mode = (st.mode & 0o777).toString(8);
    if (st.isDirectory()) {
      out[`${rel}/`] = mode;
      Object.assign(out, tree(dir, times, rel));
    } else {
      out[rel] = `${mode} ${readFileSync(join(dir, rel), 'latin1')}${times.has(rel) ? ` @${Math.floor(st.mtimeMs / 1000)}` : ''}`;
    }
  }
  return out;
}

const FILES = {
  'www/a.txt': 'file a\n', 'www/dir/b.txt': 'file b\n', 'www/dir/sub/c.txt': 'file c\n', 'www/tree/x.txt': 'x\n', 'www/tree/deep/y.txt': 'y\n',
  'www/moving/m.txt': 'm\n', 'www/keep.txt': 'keep\n', 'www/shallow.txt': 'shallow\n', 'www/aliased/f.txt': 'aliased\n',
};

describe('WebDAV (differential)', () => {
  after(cleanup);

  it('creates, replaces, deletes, copies and moves files and trees as nginx does, with its statuses and error lines', async () => {
    const run = await differential({
      conf: ({ port, prefix }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name dav.test; root ${prefix}/www;
    client_body_temp_path ${prefix}/www_tmp;
    location / { dav_methods PUT DELETE MKCOL COPY MOVE; dav_access user:rw group:rw all:r; }
    location /full/ { dav_methods put; create_full_put_path on; dav_access group:rw; }
    location /partial/ { dav_methods put; }
    location = /shallow.txt { dav_methods delete; min_delete_depth 2; }
    location /aliased/ { alias ${prefix}/www/aliased/; dav_methods copy move; }
    location /off/ { dav_methods off; }
  }`),
    }, async (s) => {
      // each server changes the files: each starts from the same ones
      rmSync(join(s.prefix, 'www'), { recursive: true, force: true });
      writeFiles(s.prefix, FILES);
      const out: Record<string, Snap> = {};
      const req = async (label: string, method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<void> => {
        out[label] = await s.get(path, { method, headers, body });
      };
      await req('PUT new', 'PUT', '/new%20file.txt', {}, 'new body\n');
      await req('PUT replace', 'PUT', '/a.txt', { Date: 'Sun, 06 Nov 1994 08:49:37 GMT' }, 'replaced a\n');
      await req('PUT to a collection', 'PUT', '/dir/', {}, 'x');
      await req('PUT with a range', 'PUT', '/r.txt', { 'Content-Range': 'bytes 0-0/1' }, 'x');
      await req('PUT onto a directory', 'PUT', '/dir', {}, 'x');
      await req('PUT without a body', 'PUT', '/empty.txt', { 'Content-Length': '0' });
      await req('PUT into a missing directory', 'PUT', '/partial/missing/f.txt', {}, 'x');
      await req('PUT with create_full_put_path', 'PUT', '/full/one/two/f.txt', {}, 'full path\n');
      await req('PUT where off', 'PUT', '/off/f.txt', {}, 'x');
      await req('MKCOL', 'MKCOL', '/made/');
      await req('MKCOL again', 'MKCOL', '/made/');
      await req('MKCOL without a slash', 'MKCOL', '/made2');
      await req('MKCOL in a missing directory', 'MKCOL', '/none/made/');
      await req('MKCOL with a body', 'MKCOL', '/bodied/', {}, 'x');
      await req('COPY a file', 'COPY', '/keep.txt', { Destination: '/made/kept.txt' });
      await req('COPY a file by URL', 'COPY', '/keep.txt', { Destination: 'http://dav.test/made/url.txt' });
      await req('COPY without overwrite', 'COPY', '/keep.txt', { Destination: '/made/kept.txt', Overwrite: 'F' });
      await req('COPY with a bad Overwrite', 'COPY', '/keep.txt', { Destination: '/made/k2.txt', Overwrite: 'maybe' });
      await req('COPY to another host', 'COPY', '/keep.txt', { Destination: 'http://other.test/k.txt' });
      await req('COPY to an unsafe URI', 'COPY', '/keep.txt', { Destination: '/dir/../../etc/passwd' });
      await req('COPY without Destination', 'COPY', '/keep.txt');
      await req('COPY a file to a collection', 'COPY', '/keep.txt', { Destination: '/made/' });
      await req('COPY a tree', 'COPY', '/tree/', { Destination: '/tree-copy/' });
      await req('COPY with Depth 1', 'COPY', '/tree/', { Destination: '/tree-2/', Depth: '1' });
      await req('MOVE a file', 'MOVE', '/moving/m.txt', { Destination: '/moved/deeper/m.txt' });
      await req('MOVE a tree', 'MOVE', '/moving/', { Destination: '/moved-dir/' });
      await req('MOVE with Depth 0', 'MOVE', '/dir/', { Destination: '/dir2/', Depth: '0' });
      await req('MOVE out of the alias', 'MOVE', '/aliased/f.txt', { Destination: '/elsewhere.txt' });
      await req('MOVE within the alias', 'MOVE', '/aliased/f.txt', { Destination: '/aliased/g.txt' });
      await req('DELETE a file', 'DELETE', '/new%20file.txt');
      await req('DELETE a missing file', 'DELETE', '/gone.txt');
      await req('DELETE a directory without its slash', 'DELETE', '/dir');
      await req('DELETE with a bad Depth', 'DELETE', '/dir/', { Depth: '1' });
      await req('DELETE a file as a directory', 'DELETE', '/keep.txt/');
      await req('DELETE a tree', 'DELETE', '/dir/');
      await req('DELETE too shallow', 'DELETE', '/shallow.txt');
      await req('DELETE with a body', 'DELETE', '/keep.txt', {}, 'x');
      return { responses: out, files: tree(join(s.prefix, 'www'), new Set(['/a.txt'])) };
    });
    const n = run.nginx.result;
    assert.equal(n.responses['PUT new']!.status, 201);
    assert.equal(n.responses['PUT replace']!.status, 204);
    assert.equal(n.responses['COPY a tree']!.status, 201);
    assert.equal(n.responses['DELETE a tree']!.status, 204);
    assert.equal(n.files['/a.txt'], '664 replaced a\n @784111777');
    assertSameAsNginx(run);
  });

  it('refuses a COPY or MOVE onto itself or into its own tree with 403, the files untouched', async () => {
    const port = await freePort();
    const jinx = await startJinx(`daemon off;\nuser root;\npid logs/nginx.pid;\nerror_log logs/error.log info;\nevents {}\nhttp { access_log off;
  server { listen 127.0.0.1:${port}; root www; location / { dav_methods copy move; } } }`, [port], FILES);
    const statuses = [
      await request(port, '/keep.txt', { method: 'COPY', headers: { Destination: '/keep.txt' } }),
      await request(port, '/tree/', { method: 'COPY', headers: { Destination: '/tree/inner/' } }),
      await request(port, '/tree/deep/', { method: 'MOVE', headers: { Destination: '/tree/' } }),
    ].map((r) => r.status);
    assert.deepEqual(statuses, [403, 403, 403]);
    const files = Object.entries(tree(join(jinx.prefix, 'www'), new Set())).filter(([path]) => !path.endsWith('/'));
    assert.deepEqual(files.map(([path, what]) => [path, what.slice(4)]), Object.entries(FILES).map(([path, text]) => [path.slice(3), text]).sort());
    const log = jinx.errorLog();
    assert.match(log, /\[error\] .*both URI "\/keep.txt" and "Destination" URI "\/keep.txt" point to the same location/);
    assert.match(log, /\[error\] .*"\/tree\/" could not be COPYed to collection "\/tree\/inner\/"/);
    assert.match(log, /\[error\] .*"\/tree\/deep\/" could not be MOVEed to collection "\/tree\/"/);
  });
});
