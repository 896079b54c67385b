/**
 * Clients of the stream tests: TCP sessions to a `stream {}` server on
 * 127.0.0.1, driven message by message.
 */
import { connect } from 'node:net';

/** Sends `messages` one by one (each answered before the next), then shuts down; resolves with all that came back. */
export function tcpSession(port: number, messages: readonly string[], answerBytes: readonly number[]): Promise<string> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    let out = '';
    let i = 0;
    let want = 0;
    const next = (): void => {
      if (i === messages.length) {
        s.end();
        return;
      }
      want += answerBytes[i]!;
      s.write(messages[i++]!);
    };
    s.on('connect', next);
    s.on('data', (d) => {
      out += d.toString('latin1');
      if (out.length >= want) next();
    });
    s.on('error', () => undefined);
    s.on('close', () => resolve(out));
  });
}
