/**
 * Versions jinx reports: its own, and the nginx release whose behaviour it
 * follows (printed by `-v`/`-V`, `$nginx_version` and `server_tokens`).
 */
import { readFileSync } from 'node:fs';

/** jinx's version, from package.json. */
export const JINX_VERSION: string = (
  JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
).version;

/** The nginx release jinx follows: its messages, defaults and status codes. */
export const NGINX_VERSION = '1.30.6';
