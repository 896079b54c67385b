/**
 * nginx's log levels for the runtime and the CLI, which reach them through
 * log/. They live in `src/log-levels.ts`, below every layer, because
 * configuration reads them too (`error_log`, `*_log_level` directives).
 */
export { severity, type LogLevel } from '../log-levels.js';
