/**
 * Lint rules that need nginx's routing and the meaning of settings, what
 * no other nginx linter checks: shadowed locations, try_files and
 * error_page loops, open auth_request locations, proxy_pass URI surprises,
 * upstreams named like hosts, weak TLS, server-name conflicts, variables
 * defined twice and timeouts that never fire.
 */
import type { LintRule } from '../rule.js';
import { authRequestNotInternal, errorPageLoop, locationShadowed, tryFilesLoop } from './semantic-locations.js';
import { mapRedefined, mapVariableSet, serverNameConflict, timeoutNeverFires, tlsWeakerThanIntermediate } from './semantic-misc.js';
import { grpcPassWithoutHttp2, proxyPassDoubleSlash, proxyPassUriIgnored, proxyPassVariableUri, upstreamHostName } from './semantic-proxy.js';

/** The semantic rules, in the order their findings are listed. */
export const semanticRules: readonly LintRule[] = [
  locationShadowed,
  tryFilesLoop,
  errorPageLoop,
  authRequestNotInternal,
  proxyPassUriIgnored,
  proxyPassVariableUri,
  proxyPassDoubleSlash,
  upstreamHostName,
  grpcPassWithoutHttp2,
  tlsWeakerThanIntermediate,
  serverNameConflict,
  mapRedefined,
  mapVariableSet,
  timeoutNeverFires,
];
