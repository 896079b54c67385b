/**
 * Syntax errors and the generic directive checks of `ngx_conf_handler`, as
 * `-t` reports them: the message, the file:line, and which error wins when a
 * file has several (nginx checks each directive as soon as its `;` or `{` is
 * read, so a bad directive before a syntax error is reported first).
 * Expected output is nginx 1.30's.
 */
import { defineConfCases, failed, HTTP_TEMP_PATHS, succeeded, type ConfCase } from '../helpers/conf-test.js';

const conf = (text: string): { 'nginx.conf': string } => ({ 'nginx.conf': text });

/** nginx prints this once the files are read, before the checks that follow reading (events, logs, paths). */
const SYNTAX_OK = 'nginx: the configuration file PREFIX/nginx.conf syntax is ok';

const syntax: ConfCase[] = [
  {
    name: 'a character right after a closing quote: unexpected "b"',
    files: conf('events {}\nfoo "a"b;\n'), status: 1,
    lines: failed('[emerg] unexpected "b" in PREFIX/nginx.conf:2'),
  },
  {
    name: 'a second quoted argument glued to a word: unexpected "c"',
    files: conf('events {}\nfoo "a" "b"c;\n'), status: 1,
    lines: failed('[emerg] unexpected "c" in PREFIX/nginx.conf:2'),
  },
  {
    name: 'a } right after a closing quote: unexpected "}"',
    files: conf('events {}\nfoo "a"}\n'), status: 1,
    lines: failed('[emerg] unexpected "}" in PREFIX/nginx.conf:2'),
  },
  {
    name: 'a # right after a closing quote: unexpected "#"',
    files: conf('events {}\nfoo "a"#x\n;'), status: 1,
    lines: failed('[emerg] unexpected "#" in PREFIX/nginx.conf:2'),
  },
  {
    name: 'a ; after a block: unexpected ";"',
    files: conf('events {};\n'), status: 1,
    lines: failed('[emerg] unexpected ";" in PREFIX/nginx.conf:1'),
  },
  {
    name: 'a ; with no directive: unexpected ";"',
    files: conf(';\n'), status: 1,
    lines: failed('[emerg] unexpected ";" in PREFIX/nginx.conf:1'),
  },
  {
    name: 'a { with no directive: unexpected "{"',
    files: conf('events {}\n\n{\n'), status: 1,
    lines: failed('[emerg] unexpected "{" in PREFIX/nginx.conf:3'),
  },
  {
    name: 'a missing ; before }: unexpected "}" at the brace',
    files: conf('events {}\nhttp {\n server {\n  listen 80\n }\n}\n'), status: 1,
    lines: failed('[emerg] unexpected "}" in PREFIX/nginx.conf:5'),
  },
  {
    name: 'a missing ; before } on one line: unexpected "}"',
    files: conf('events { worker_connections 10 }\n'), status: 1,
    lines: failed('[emerg] unexpected "}" in PREFIX/nginx.conf:1'),
  },
  {
    name: 'an extra } at the top level: unexpected "}"',
    files: conf('events {}\n}\n'), status: 1,
    lines: failed('[emerg] unexpected "}" in PREFIX/nginx.conf:2'),
  },
  {
    name: 'a } glued to a word is part of it, so the file ends inside the directive',
    files: conf('events {}\nfoo bar}\n'), status: 1,
    lines: failed('[emerg] unexpected end of file, expecting ";" or "}" in PREFIX/nginx.conf:3'),
  },
  {
    name: 'an unclosed block: unexpected end of file, expecting "}" at the last line',
    files: conf('events {\n'), status: 1,
    lines: failed('[emerg] unexpected end of file, expecting "}" in PREFIX/nginx.conf:2'),
  },
  {
    name: 'an unclosed block without a final newline: line 1',
    files: conf('events {'), status: 1,
    lines: failed('[emerg] unexpected end of file, expecting "}" in PREFIX/nginx.conf:1'),
  },
  {
    name: 'a directive without ; at the end of the file: expecting ";" or "}"',
    files: conf('events {}\nfoo "a"'), status: 1,
    lines: failed('[emerg] unexpected end of file, expecting ";" or "}" in PREFIX/nginx.conf:2'),
  },
  {
    name: 'an unterminated double quote: unexpected end of file at the last line',
    files: conf('events {}\nfoo "abc\n\n'), status: 1,
    lines: failed('[emerg] unexpected end of file, expecting ";" or "}" in PREFIX/nginx.conf:4'),
  },
  {
    name: 'an unterminated single quote: unexpected end of file',
    files: conf("events {}\nfoo 'abc\n"), status: 1,
    lines: failed('[emerg] unexpected end of file, expecting ";" or "}" in PREFIX/nginx.conf:3'),
  },
  {
    name: 'an escaped closing quote leaves the quote open',
    files: conf('events {}\nfoo "a\\"\n'), status: 1,
    lines: failed('[emerg] unexpected end of file, expecting ";" or "}" in PREFIX/nginx.conf:3'),
  },
  {
    name: 'a backslash as the last byte of the file',
    files: conf('events {}\nfoo\\'), status: 1,
    lines: failed('[emerg] unexpected end of file, expecting ";" or "}" in PREFIX/nginx.conf:2'),
  },
  {
    name: 'an empty file: syntax is ok, then no "events" section in configuration',
    files: conf(''), status: 1,
    lines: failed(SYNTAX_OK, '[emerg] no "events" section in configuration'),
  },
  {
    name: 'a file of comments only: syntax is ok, then no "events" section in configuration',
    files: conf('# only a comment'), status: 1,
    lines: failed(SYNTAX_OK, '[emerg] no "events" section in configuration'),
  },
];

const order: ConfCase[] = [
  {
    name: 'an unknown directive before a syntax error is reported, not the syntax error',
    files: conf('events {}\nfoo;\nbar "a"b;\n'), status: 1,
    lines: failed('[emerg] unknown directive "foo" in PREFIX/nginx.conf:2'),
  },
  {
    name: 'a syntax error before an unknown directive is reported, not the directive',
    files: conf('events {}\nbar "a"b;\nfoo;\n'), status: 1,
    lines: failed('[emerg] unexpected "b" in PREFIX/nginx.conf:2'),
  },
  {
    name: 'an unknown block directive is reported at its { before the unclosed block',
    files: conf('events {}\nfoo {\n'), status: 1,
    lines: failed('[emerg] unknown directive "foo" in PREFIX/nginx.conf:2'),
  },
  {
    name: 'a bad directive inside an unclosed block is reported before the end of file',
    files: conf('events {}\nhttp {\n  foo;\n  server {\n'), status: 1,
    lines: failed('[emerg] unknown directive "foo" in PREFIX/nginx.conf:3'),
  },
  {
    name: 'a misplaced block directive is reported before a syntax error inside it',
    files: conf('events {}\nserver {\n  listen "80"x;\n}\n'), status: 1,
    lines: failed('[emerg] "server" directive is not allowed here in PREFIX/nginx.conf:2'),
  },
  {
    name: 'a syntax error inside the arguments wins over the arity of the same directive',
    files: conf('events {}\nworker_processes 1 2 "x"y;\n'), status: 1,
    lines: failed('[emerg] unexpected "y" in PREFIX/nginx.conf:2'),
  },
];

const checks: ConfCase[] = [
  {
    name: 'a directive in the wrong context: "server" directive is not allowed here',
    files: conf('events {}\nserver {}\n'), status: 1,
    lines: failed('[emerg] "server" directive is not allowed here in PREFIX/nginx.conf:2'),
  },
  {
    name: 'an http directive in events: "listen" directive is not allowed here',
    files: conf('events {\n  listen 80;\n}\n'), status: 1,
    lines: failed('[emerg] "listen" directive is not allowed here in PREFIX/nginx.conf:2'),
  },
  {
    name: 'a simple directive with a block: directive "worker_processes" is not terminated by ";"',
    files: conf('events {}\nworker_processes 1 {\n}\n'), status: 1,
    lines: failed('[emerg] directive "worker_processes" is not terminated by ";" in PREFIX/nginx.conf:2'),
  },
  {
    name: 'a block directive with ;: directive "events" has no opening "{"',
    files: conf('events;\n'), status: 1,
    lines: failed('[emerg] directive "events" has no opening "{" in PREFIX/nginx.conf:1'),
  },
  {
    name: 'too few arguments: invalid number of arguments in "worker_processes" directive',
    files: conf('events {}\nworker_processes;\n'), status: 1,
    lines: failed('[emerg] invalid number of arguments in "worker_processes" directive in PREFIX/nginx.conf:2'),
  },
  {
    name: 'a block directive with an argument too many: invalid number of arguments in "events" directive',
    files: conf('events x {}\n'), status: 1,
    lines: failed('[emerg] invalid number of arguments in "events" directive in PREFIX/nginx.conf:1'),
  },
  {
    name: 'a directive set twice: "worker_processes" directive is duplicate, at the second',
    files: conf('worker_processes 1;\nevents {}\n\nworker_processes 2;\n'), status: 1,
    lines: failed('[emerg] "worker_processes" directive is duplicate in PREFIX/nginx.conf:4'),
  },
  {
    name: 'a second events block: "events" directive is duplicate',
    files: conf('events {}\nevents {}\n'), status: 1,
    lines: failed('[emerg] "events" directive is duplicate in PREFIX/nginx.conf:2'),
  },
  {
    name: 'quoted directive names and block names work like bare ones',
    files: conf(`"events" {}\n'http' {\n  ${HTTP_TEMP_PATHS}\n  "server" { "listen" '127.0.0.1:1'; }\n}\n`), status: 0,
    lines: succeeded(),
  },
];

/** An http block with temp paths under the prefix, `body` inside it. */
const http = (body: string): { 'nginx.conf': string } => conf(`events {}\nhttp {\n${HTTP_TEMP_PATHS}\n${body}}\n`);

const rawBlocks: ConfCase[] = [
  {
    name: 'a duplicate extension in types warns at the line of the entry',
    files: http(' types {\n  text/html html;\n  text/plain html;\n }\n'), status: 0,
    lines: succeeded('[warn] duplicate extension "html", content type: "text/plain", previous content type: "text/html" in PREFIX/nginx.conf:6'),
  },
  {
    name: 'a block inside types: unexpected "{" at the line of the {',
    files: http(' types {\n  text/html html;\n  a { }\n }\n'), status: 1,
    lines: failed('[emerg] unexpected "{" in PREFIX/nginx.conf:6'),
  },
  {
    name: 'a key given twice in map: conflicting parameter at the line of the second',
    files: http(' map $uri $x {\n  default 0;\n  /a 1;\n  /a 2;\n }\n'), status: 1,
    lines: failed('[emerg] conflicting parameter "/a" in PREFIX/nginx.conf:7'),
  },
  {
    name: 'a block inside map: unexpected "{" at the line of the {',
    files: http(' map $uri $x {\n  default 0;\n  /a {\n  }\n }\n'), status: 1,
    lines: failed('[emerg] unexpected "{" in PREFIX/nginx.conf:6'),
  },
  {
    name: 'a map entry with three values: invalid number of the map parameters at its line',
    files: http(' map $uri $x {\n  default 0;\n  /a 1 2 3;\n }\n'), status: 1,
    lines: failed('[emerg] invalid number of the map parameters in PREFIX/nginx.conf:6'),
  },
  {
    name: 'a second default in map: duplicate default map parameter at its line',
    files: http(' map $uri $x {\n  default 0;\n  default 1;\n }\n'), status: 1,
    lines: failed('[emerg] duplicate default map parameter in PREFIX/nginx.conf:6'),
  },
];

const afterReading: ConfCase[] = [
  {
    name: 'an access_log in a missing directory: syntax is ok, then open() failed',
    files: http(' access_log /nonexistent/dir/a.log;\n'), status: 1,
    lines: failed(SYNTAX_OK, '[emerg] open() "/nonexistent/dir/a.log" failed (2: No such file or directory)'),
  },
  {
    name: 'an error_log in a missing directory: syntax is ok, then open() failed',
    files: conf('events {}\nerror_log /nonexistent/dir/e.log;\n'), status: 1,
    lines: failed(SYNTAX_OK, '[emerg] open() "/nonexistent/dir/e.log" failed (2: No such file or directory)'),
  },
  {
    name: 'a temp path whose parent is missing: syntax is ok, then mkdir() failed',
    files: conf('events {}\nhttp {\n client_body_temp_path no/such/dir;\n}\n'), status: 1,
    lines: failed(SYNTAX_OK, '[emerg] mkdir() "PREFIX/no/such/dir" failed (2: No such file or directory)'),
  },
];

defineConfCases('syntax errors', syntax);
defineConfCases('what -t checks after the syntax is ok', afterReading);
defineConfCases('which error is reported first', order);
defineConfCases('directive checks', checks);
defineConfCases('errors inside types and map blocks', rawBlocks);
