/**
 * Where messages go before the configuration's `error_log` is open: stderr,
 * or the `-e` file (created at once, as nginx does). When the log is a file,
 * messages at `warn` and above are also shown on stderr as
 * `nginx: [level] message` (nginx's `ngx_use_stderr`). Lines are byte strings
 * and are written as such (latin1).
 */
import { appendFileSync, closeSync, openSync } from 'node:fs';
import { formatErrorLine } from '../log/error-line.js';
import { severity, type LogLevel } from '../log/levels.js';
import { systemErrorText } from '../os-errors.js';

/** Receives log lines that have no request context. */
export interface MessageSink {
  write(level: LogLevel, message: string): void;
}

export class StartupLog implements MessageSink {
  private constructor(private readonly target: string) {}

  /**
   * A log to `path` (`stderr` or a file). A file that cannot be opened is
   * reported as nginx does (`[alert] could not open error log file: …`) and
   * stderr is used instead.
   */
  static open(path: string): StartupLog {
    if (path === 'stderr') return new StartupLog('stderr');
    try {
      closeSync(openSync(path, 'a'));
      return new StartupLog(path);
    } catch (err) {
      process.stderr.write(`nginx: [alert] could not open error log file: open() "${path}" failed (${systemErrorText(err)})\n`);
      return new StartupLog('stderr');
    }
  }

  /** Whether messages already reach stderr. */
  get isStderr(): boolean {
    return this.target === 'stderr';
  }

  write(level: LogLevel, message: string): void {
    const line = Buffer.from(formatErrorLine(level, message, undefined) + '\n', 'latin1');
    if (this.target === 'stderr') {
      process.stderr.write(line);
      return;
    }
    try {
      appendFileSync(this.target, line);
    } catch {
      // the file became unusable: stderr below still carries the message
    }
    if (severity(level) <= severity('warn')) process.stderr.write(Buffer.from(`nginx: [${level}] ${message}\n`, 'latin1'));
  }
}
