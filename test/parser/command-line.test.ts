/**
 * Configuration given on the command line: `-g` directives (parsed before the
 * file, placed `in command line` without a line number, no blocks) and the
 * file names that `-p` and `-c` give to messages (nginx joins them as
 * written: a relative prefix stays relative, `./` and `..` are kept).
 * Expected output is nginx 1.30's.
 */
import { basename, dirname } from 'node:path';
import { defineConfCases, failed, succeeded, type ConfCase } from '../helpers/conf-test.js';

const EVENTS = { 'nginx.conf': 'events {}\n' };
const withG = (g: string) => ({ extra: ['-g', g] });

const globals: ConfCase[] = [
  {
    name: '-g "daemon off;" is accepted',
    files: EVENTS, opts: withG('daemon off;'), status: 0,
    lines: succeeded(),
  },
  {
    name: '-g with a block: block directives are not supported in -g option',
    files: EVENTS, opts: withG('events {}'), status: 1,
    lines: failed('[emerg] block directives are not supported in -g option in command line'),
  },
  {
    name: '-g without the final ;: unexpected end of parameter, expecting ";"',
    files: EVENTS, opts: withG('daemon off'), status: 1,
    lines: failed('[emerg] unexpected end of parameter, expecting ";" in command line'),
  },
  {
    name: '-g with an open quote: unexpected end of parameter, expecting ";"',
    files: EVENTS, opts: withG('daemon "off'), status: 1,
    lines: failed('[emerg] unexpected end of parameter, expecting ";" in command line'),
  },
  {
    name: '-g with an unknown directive: unknown directive "foo" in command line, without a line',
    files: EVENTS, opts: withG('daemon off;\nfoo;'), status: 1,
    lines: failed('[emerg] unknown directive "foo" in command line'),
  },
  {
    name: '-g setting a directive twice: "worker_processes" directive is duplicate in command line',
    files: EVENTS, opts: withG('worker_processes 1; worker_processes 2;'), status: 1,
    lines: failed('[emerg] "worker_processes" directive is duplicate in command line'),
  },
  {
    name: '-g with a }: unexpected "}" in command line',
    files: EVENTS, opts: withG('daemon off; }'), status: 1,
    lines: failed('[emerg] unexpected "}" in command line'),
  },
  {
    name: '-g and the file setting the same directive: duplicate at the file\'s line',
    files: { 'nginx.conf': 'events {}\ndaemon off;\n' }, opts: withG('daemon off;'), status: 1,
    lines: failed('[emerg] "daemon" directive is duplicate in PREFIX/nginx.conf:2'),
  },
];

/** The lines of a failed test of CONF where line 2 of it is an unknown directive "foo". */
const fooIn = (conf: string): string[] => [
  `[emerg] unknown directive "foo" in ${conf}:2`,
  `nginx: configuration file ${conf} test failed`,
];
const FOO = { 'conf/nginx.conf': 'events {}\nfoo;\n' };

const paths: ConfCase[] = [
  {
    name: 'a relative -p stays relative in messages: in REL/conf/nginx.conf',
    files: FOO,
    opts: (prefix) => ({
      args: ['-t', '-p', `${basename(prefix)}/`, '-c', 'conf/nginx.conf'], cwd: dirname(prefix), replace: { [basename(prefix)]: 'REL' },
    }),
    status: 1, lines: fooIn('REL/conf/nginx.conf'),
  },
  {
    name: '-p without a trailing slash gets one',
    files: FOO, opts: (prefix) => ({ args: ['-t', '-p', prefix, '-c', 'conf/nginx.conf'] }),
    status: 1, lines: fooIn('PREFIX/conf/nginx.conf'),
  },
  {
    name: '-c ./conf/nginx.conf is named as written: PREFIX/./conf/nginx.conf',
    files: FOO, opts: (prefix) => ({ args: ['-t', '-p', `${prefix}/`, '-c', './conf/nginx.conf'] }),
    status: 1, lines: fooIn('PREFIX/./conf/nginx.conf'),
  },
  {
    name: '-c with .. is named as written: PREFIX/conf/../conf/nginx.conf',
    files: FOO, opts: (prefix) => ({ args: ['-t', '-p', `${prefix}/`, '-c', `${prefix}/conf/../conf/nginx.conf`] }),
    status: 1, lines: fooIn('PREFIX/conf/../conf/nginx.conf'),
  },
  {
    name: 'a missing -c file: open() failed (2: No such file or directory), without a place',
    files: {}, status: 1,
    lines: failed('[emerg] open() "PREFIX/nginx.conf" failed (2: No such file or directory)'),
  },
  {
    name: 'a -c that is a directory: [crit] pread() failed (21: Is a directory)',
    files: { 'conf/nginx.conf': 'events {}\n' }, opts: (prefix) => ({ args: ['-t', '-p', `${prefix}/`, '-c', `${prefix}/conf`] }),
    status: 1,
    lines: ['[crit] pread() "PREFIX/conf" failed (21: Is a directory)', 'nginx: configuration file PREFIX/conf test failed'],
  },
];

defineConfCases('-g directives', globals);
defineConfCases('file names from -p and -c', paths);
