/**
 * Every module's directives and variables: the one table the checker uses.
 * Build a registry from it with `new DirectiveRegistry(allDirectives)`.
 */
import type { DirectiveSpec } from '../spec.js';
import type { VariableDef } from '../variables.js';
import { accessDirectives } from './access.js';
import { additionDirectives } from './addition.js';
import { authBasicDirectives } from './auth-basic.js';
import { authRequestDirectives } from './auth-request.js';
import { autoindexDirectives } from './autoindex.js';
import { randomIndexDirectives } from './random-index.js';
import { davDirectives } from './dav.js';
import { memcachedDirectives } from './memcached.js';
import { charsetDirectives } from './charset.js';
import { emptyGifDirectives } from './empty-gif.js';
import { refererDirectives, refererVariables } from './referer.js';
import { secureLinkDirectives, secureLinkVariables } from './secure-link.js';
import { browserDirectives, browserVariables } from './browser.js';
import { stickyDirectives } from './upstream-sticky.js';
import { sliceDirectives, sliceVariables } from './slice.js';
import { flvDirectives } from './flv.js';
import { mp4Directives } from './mp4.js';
import { stubStatusDirectives, stubStatusVariables } from './stub-status.js';
import { coreDirectives } from './core.js';
import { fastcgiDirectives } from './fastcgi.js';
import { gzipDirectives } from './gzip.js';
import { headersDirectives } from './headers.js';
import { http2Directives } from './http2.js';
import { httpCoreDirectives } from './http-core.js';
import { httpVariables } from './http-variables.js';
import { limitConnDirectives, limitConnVariables } from './limit-conn.js';
import { limitReqDirectives } from './limit-req.js';
import { logDirectives } from './log.js';
import { geoDirectives } from './geo.js';
import { mapDirectives } from './map.js';
import { splitClientsDirectives } from './split-clients.js';
import { mirrorDirectives } from './mirror.js';
import { scgiDirectives } from './scgi.js';
import { grpcDirectives } from './grpc.js';
import { uwsgiDirectives } from './uwsgi.js';
import { proxyDirectives } from './proxy.js';
import { realIpDirectives } from './realip.js';
import { rewriteDirectives } from './rewrite.js';
import { ssiDirectives, ssiVariables } from './ssi.js';
import { sslDirectives } from './ssl.js';
import { streamDirectives } from './stream.js';
import { subDirectives } from './sub.js';
import { upstreamDirectives } from './upstream.js';
import { useridDirectives, useridVariables } from './userid.js';

/** All directive specs, grouped by module in nginx's order of modules. */
export const allDirectives: readonly DirectiveSpec[] = [
  ...coreDirectives,
  ...httpCoreDirectives,
  ...rewriteDirectives,
  ...accessDirectives,
  ...authBasicDirectives,
  ...authRequestDirectives,
  ...mirrorDirectives,
  ...realIpDirectives,
  ...limitConnDirectives,
  ...limitReqDirectives,
  ...headersDirectives,
  ...logDirectives,
  ...geoDirectives,
  ...mapDirectives,
  ...splitClientsDirectives,
  ...proxyDirectives,
  ...fastcgiDirectives,
  ...uwsgiDirectives,
  ...scgiDirectives,
  ...grpcDirectives,
  ...memcachedDirectives,
  ...upstreamDirectives,
  ...sslDirectives,
  ...http2Directives,
  ...autoindexDirectives,
  ...randomIndexDirectives,
  ...davDirectives,
  ...gzipDirectives,
  ...ssiDirectives,
  ...charsetDirectives,
  ...subDirectives,
  ...additionDirectives,
  ...useridDirectives,
  ...emptyGifDirectives,
  ...secureLinkDirectives,
  ...browserDirectives,
  ...stickyDirectives,
  ...sliceDirectives,
  ...flvDirectives,
  ...mp4Directives,
  ...refererDirectives,
  ...stubStatusDirectives,
  ...streamDirectives,
];

/** All variables the modules define. */
export const allVariables: readonly VariableDef[] = [...httpVariables, ...ssiVariables, ...secureLinkVariables, ...refererVariables, ...useridVariables, ...browserVariables, ...sliceVariables, ...stubStatusVariables, ...limitConnVariables];
