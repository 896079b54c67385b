/**
 * How the uwsgi and SCGI response reader (src/runtime/upstream/cgi-response.ts,
 * `StreamResponseReader`) takes a response whose status line and header
 * come over several reads while other responses are read in between: the
 * header is read into the worker's shared header buffer, and what a read
 * brought of an unfinished header is kept by the reader itself.
 */
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { StreamResponseReader, type StatusLine } from '../../src/runtime/upstream/cgi-response.js';

/** What a reader handed on: its status line and header lines, then its body. */
interface Seen {
  status: string | undefined;
  lines: [string, string][];
  body: string;
}

/** A reader of `fastcgi_buffer_size`-like 4096 bytes recording what it hands on into `seen`. */
function reader(seen: Seen): StreamResponseReader {
  return new StreamResponseReader(4096, {
    stderr: () => undefined,
    log: () => undefined,
    header: (lines: [string, string][], _room: number, line: StatusLine | undefined) => {
      seen.status = line?.text;
      seen.lines = lines.map(([n, v]) => [n, v]);
      return { contentLength: -1, buffered: true };
    },
    body: (data) => {
      seen.body += data.toString('latin1');
    },
    end: () => undefined,
  });
}

const fresh = (): Seen => ({ status: undefined, lines: [], body: '' });

/** What a reader hands on of `text` read at once. */
function readWhole(text: string): Seen {
  const seen = fresh();
  reader(seen).push(Buffer.from(text, 'latin1'));
  return seen;
}

describe('uwsgi and SCGI responses as jinx reads them', () => {
  it('keeps what came of a status line and header cut by reads\' ends while other responses are read in between', () => {
    const text = 'HTTP/1.1 201 Made Here\r\nContent-Type: text/plain\r\nX-A: 1\r\n\r\ncut body';
    const seen = fresh();
    const cut = reader(seen);
    // an SCGI-style answer without a status line, whose bytes differ from the first ones of the cut response's
    const other = 'Status: 404 Not Found\r\nContent-Type: text/html\r\n\r\nother';
    for (const [from, to] of [[0, 4], [4, 30], [30, text.length]] as const) {
      cut.push(Buffer.from(text.slice(from, to), 'latin1'));
      assert.deepEqual(readWhole(other), { status: undefined, lines: [['Status', '404 Not Found'], ['Content-Type', 'text/html']], body: 'other' });
    }
    assert.deepEqual(seen, readWhole(text));
    assert.equal(seen.status, '201 Made Here');
  });
});
