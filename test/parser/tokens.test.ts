/**
 * How the configuration text is cut into words, as nginx's tokenizer
 * (`ngx_conf_read_token`) does it, seen through `-t`: an unknown directive's
 * message quotes its name after unescaping, and every message carries the
 * line nginx counts (LF only). Expected output is nginx 1.30's.
 */
import { defineConfCases, failed, utf8Bytes, type ConfCase } from '../helpers/conf-test.js';

/** `events {}` then `text` on line 2: the first directive of `text` is the one reported. */
const afterEvents = (text: string | Buffer): { 'nginx.conf': string | Buffer } => ({
  'nginx.conf': typeof text === 'string' ? `events {}\n${text}` : Buffer.concat([Buffer.from('events {}\n'), text]),
});

const words: ConfCase[] = [
  {
    name: 'a double-quoted name keeps its blank: unknown directive "a b"',
    files: afterEvents('"a b" x;\n'), status: 1,
    lines: failed('[emerg] unknown directive "a b" in PREFIX/nginx.conf:2'),
  },
  {
    name: 'a single-quoted name is unquoted: unknown directive "foo"',
    files: afterEvents("'foo';\n"), status: 1,
    lines: failed('[emerg] unknown directive "foo" in PREFIX/nginx.conf:2'),
  },
  {
    name: 'an empty quoted name: unknown directive ""',
    files: afterEvents('"" x;\n'), status: 1,
    lines: failed('[emerg] unknown directive "" in PREFIX/nginx.conf:2'),
  },
  {
    name: 'directive names are case-sensitive: unknown directive "Events"',
    files: { 'nginx.conf': 'Events {}\n' }, status: 1,
    lines: failed('[emerg] unknown directive "Events" in PREFIX/nginx.conf:1'),
  },
  {
    name: '\\" in a bare word becomes "',
    files: afterEvents('foo\\"bar x;\n'), status: 1,
    lines: failed('[emerg] unknown directive "foo"bar" in PREFIX/nginx.conf:2'),
  },
  {
    name: '\\\\ and \\t in quotes become a backslash and a tab',
    files: afterEvents('"a\\\\b\\tc" x;\n'), status: 1,
    lines: failed('[emerg] unknown directive "a\\b\tc" in PREFIX/nginx.conf:2'),
  },
  {
    name: '\\; keeps its backslash and does not end the word',
    files: afterEvents('foo\\;bar;\n'), status: 1,
    lines: failed('[emerg] unknown directive "foo\\;bar" in PREFIX/nginx.conf:2'),
  },
  {
    name: 'a backslash before a newline keeps both and the word goes on to the next line',
    files: afterEvents('foo\\\nbar;\n'), status: 1,
    // the name holds a newline, so the message spans two stderr lines
    lines: failed('[emerg] unknown directive "foo\\', 'bar" in PREFIX/nginx.conf:3'),
  },
  {
    name: '# inside a word belongs to the word',
    files: afterEvents('a#b x;\n'), status: 1,
    lines: failed('[emerg] unknown directive "a#b" in PREFIX/nginx.conf:2'),
  },
  {
    name: 'a quote inside a word belongs to the word',
    files: afterEvents('foo"x";\n'), status: 1,
    lines: failed('[emerg] unknown directive "foo"x"" in PREFIX/nginx.conf:2'),
  },
  {
    name: '${ does not end a word, a { after $name does',
    files: afterEvents('foo${a}{b};\n'), status: 1,
    lines: failed('[emerg] unknown directive "foo${a}" in PREFIX/nginx.conf:2'),
  },
  {
    name: 'a { right after a variable name ends the word',
    files: afterEvents('foo$a{b};\n'), status: 1,
    lines: failed('[emerg] unknown directive "foo$a" in PREFIX/nginx.conf:2'),
  },
  {
    name: 'an unquoted regex with {2} is cut at the brace: unknown directive "2}$"',
    files: {
      'nginx.conf': 'events {}\nhttp {\n  server {\n    location ~ ^/a{2}$ {\n      return 200;\n    }\n  }\n}\n',
    },
    status: 1,
    lines: failed('[emerg] unknown directive "2}$" in PREFIX/nginx.conf:4'),
  },
  {
    name: 'a ) right after a closing quote starts the next word',
    files: afterEvents('foo "a")b;\n'), status: 1,
    lines: failed('[emerg] unknown directive "foo" in PREFIX/nginx.conf:2'),
  },
  {
    name: 'a UTF-8 byte order mark is part of the first word',
    files: { 'nginx.conf': '\ufeffevents {}\n' }, status: 1,
    lines: failed(utf8Bytes('[emerg] unknown directive "\ufeffevents" in PREFIX/nginx.conf:1')),
  },
  {
    name: 'a byte that is not UTF-8 is quoted back unchanged: unknown directive "f\\xe9e"',
    files: afterEvents(Buffer.from([0x66, 0xe9, 0x65, 0x20, 0x78, 0x3b, 0x0a])), status: 1,
    lines: failed('[emerg] unknown directive "f\xe9e" in PREFIX/nginx.conf:2'),
  },
];

const comments: ConfCase[] = [
  {
    name: 'a comment with quotes and braces is skipped to the end of its line',
    files: afterEvents('# it\'s "quoted" {\nfoo;\n'), status: 1,
    lines: failed('[emerg] unknown directive "foo" in PREFIX/nginx.conf:3'),
  },
  {
    name: 'a comment after a block on the same line is skipped',
    files: { 'nginx.conf': 'events {} # comment { } ;\nfoo;' }, status: 1,
    lines: failed('[emerg] unknown directive "foo" in PREFIX/nginx.conf:2'),
  },
];

const lines: ConfCase[] = [
  {
    name: 'a directive spread over lines is reported at the line of its ";"',
    files: { 'nginx.conf': 'worker_processes\n 1\n 2;\nevents {}\n' }, status: 1,
    lines: failed('[emerg] invalid number of arguments in "worker_processes" directive in PREFIX/nginx.conf:3'),
  },
  {
    name: 'newlines inside a quoted argument count as lines',
    files: afterEvents('foo\r\n"x\n\ny"\n;\n'), status: 1,
    lines: failed('[emerg] unknown directive "foo" in PREFIX/nginx.conf:6'),
  },
  {
    name: 'CRLF line ends count one line each',
    files: { 'nginx.conf': 'events {}\r\n\r\nfoo;\r\n' }, status: 1,
    lines: failed('[emerg] unknown directive "foo" in PREFIX/nginx.conf:3'),
  },
  {
    name: 'a CR alone is a blank, not a line end: CR-only files report line 1',
    files: { 'nginx.conf': 'events {}\rfoo;\r' }, status: 1,
    lines: failed('[emerg] unknown directive "foo" in PREFIX/nginx.conf:1'),
  },
  {
    name: 'CR CR LF line ends count one line each',
    files: { 'nginx.conf': 'events {}\r\r\nfoo;\r\r\n' }, status: 1,
    lines: failed('[emerg] unknown directive "foo" in PREFIX/nginx.conf:2'),
  },
  {
    name: 'CRs inside a quoted argument do not count as lines',
    files: afterEvents('foo "a\rb\rc";\nbar;'), status: 1,
    lines: failed('[emerg] unknown directive "foo" in PREFIX/nginx.conf:2'),
  },
  {
    name: 'a tab separates words',
    files: afterEvents('foo\tbar;\n'), status: 1,
    lines: failed('[emerg] unknown directive "foo" in PREFIX/nginx.conf:2'),
  },
  {
    name: 'a form feed is not a blank: it starts a word, then the file ends',
    files: { 'nginx.conf': 'events {}\f\n' }, status: 1,
    lines: failed('[emerg] unexpected end of file, expecting ";" or "}" in PREFIX/nginx.conf:2'),
  },
];

/** Padding that makes a file longer than nginx's 4096-byte read buffer. */
const PAD = '# padding comment line to make the file longer than one read buffer\n'.repeat(80);

const longTokens: ConfCase[] = [
  {
    name: 'a quoted argument of 4000 bytes is read whole',
    files: afterEvents(`foo "${'a'.repeat(4000)}";\n${PAD}`), status: 1,
    lines: failed('[emerg] unknown directive "foo" in PREFIX/nginx.conf:2'),
  },
  {
    name: 'a quoted argument of 5000 bytes: too long parameter, probably missing terminating """ character',
    files: {
      'nginx.conf': `events {}\nhttp {\n  server {\n    add_header Content-Security-Policy "${'a'.repeat(5000)}";\n  }\n}\n${PAD}`,
    },
    status: 1,
    lines: failed('[emerg] too long parameter, probably missing terminating """ character in PREFIX/nginx.conf:4'),
  },
  {
    name: 'an unterminated quote in a long file: too long parameter at the line of the quote',
    files: afterEvents(`foo "abc;\n${PAD}bar;\n`), status: 1,
    lines: failed('[emerg] too long parameter, probably missing terminating """ character in PREFIX/nginx.conf:2'),
  },
  {
    name: 'a bare word of 5000 bytes: too long parameter "bbbbbbbbbb..." started',
    files: afterEvents(`foo ${'b'.repeat(5000)};\n${PAD}`), status: 1,
    lines: failed('[emerg] too long parameter "bbbbbbbbbb..." started in PREFIX/nginx.conf:2'),
  },
  {
    name: 'a comment line of 9000 bytes: too long parameter "#ccccccccc..." started',
    files: afterEvents(`#${'c'.repeat(9000)}\nfoo;\n`), status: 1,
    lines: failed('[emerg] too long parameter "#ccccccccc..." started in PREFIX/nginx.conf:2'),
  },
  {
    name: 'an error after 3000 lines of comments is placed at its line',
    files: afterEvents(`${'# pad\n'.repeat(3000)}foo;\n`), status: 1,
    lines: failed('[emerg] unknown directive "foo" in PREFIX/nginx.conf:3002'),
  },
];

defineConfCases('words and quotes', words);
defineConfCases('comments', comments);
defineConfCases('line numbers', lines);
defineConfCases('nginx\'s 4096-byte token limit', longTokens);
