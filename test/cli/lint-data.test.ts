/**
 * The data the lint engine reads: every directive jinx does not act on is
 * classified (tuning, switch values, always a note), the list of nginx's
 * directives is what `scripts/nginx-directives.mjs` generates, and no name
 * jinx implements is taken for "not implemented".
 */
import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { allDirectives } from '../../src/config/modules/index.js';
import { NGINX_DIRECTIVES } from '../../src/config/lint/nginx-directives.js';
import { NO_EFFECT_KINDS, noEffectDiffers } from '../../src/config/lint/no-effect.js';
import type { Directive } from '../../src/parser/ast.js';
import { ROOT } from '../helpers/harness.js';

const directive = (name: string, ...args: string[]): Directive => ({
  kind: 'directive', name, args, quoted: args.map(() => false), loc: { file: 'x', line: 1 }, nameLine: 1, block: null, closeLine: undefined,
});

describe('lint data', () => {
  it('every effect: none directive is classified in no-effect.ts, and nothing else is', () => {
    const none = new Set(allDirectives.filter((s) => s.effect === 'none').map((s) => s.name));
    assert.deepEqual([...none].filter((n) => !NO_EFFECT_KINDS.has(n)), []);
    assert.deepEqual([...NO_EFFECT_KINDS.keys()].filter((n) => !none.has(n)), []);
  });

  it('a note only where the value asks for what jinx does not do', () => {
    assert.equal(noEffectDiffers(directive('sendfile', 'on')), false);
    assert.equal(noEffectDiffers(directive('proxy_store', 'off')), false);
    assert.equal(noEffectDiffers(directive('proxy_store', 'on')), true);
    assert.equal(noEffectDiffers(directive('proxy_store', '/data/$uri')), true);
    assert.equal(noEffectDiffers(directive('auth_delay', '0s')), false);
    assert.equal(noEffectDiffers(directive('auth_delay', '1s')), true);
    assert.equal(noEffectDiffers(directive('ssl_conf_command', 'Options', 'PrioritizeChaCha')), true);
    // env: only a time zone set for the workers is something jinx does not do
    assert.equal(noEffectDiffers(directive('env', 'PERL5LIB')), false);
    assert.equal(noEffectDiffers(directive('env', 'MALLOC_OPTIONS=J')), false);
    assert.equal(noEffectDiffers(directive('env', 'TZ=Europe/Paris')), true);
  });

  it('nginx-directives.ts is what scripts/nginx-directives.mjs generates; it knows perl_set, geoip_country and js_content', () => {
    const r = spawnSync(process.execPath, [join(ROOT, 'scripts/nginx-directives.mjs'), '--check'], { encoding: 'utf8', cwd: ROOT });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(NGINX_DIRECTIVES.get('perl_set'), 'ngx_http_perl_module');
    assert.ok(NGINX_DIRECTIVES.has('geoip_country') && NGINX_DIRECTIVES.has('js_content'));
    assert.equal(NGINX_DIRECTIVES.has('bogus_directive'), false);
  });
});
