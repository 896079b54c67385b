/**
 * Reading `ssl_certificate` / `ssl_certificate_key` pairs when the
 * configuration is loaded, with the messages nginx prints through OpenSSL
 * (`ngx_ssl_certificate` in `src/event/ngx_event_openssl.c`): a missing or
 * unreadable file, a file that is not PEM, a key that does not match.
 */
import { X509Certificate, createPrivateKey } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { ConfigError } from '../errors.js';

/** A certificate chain and its key, as PEM bytes. */
export interface CertificatePair {
  readonly certPath: string;
  readonly keyPath: string;
  readonly cert: Buffer;
  readonly key: Buffer;
}

/** OpenSSL 3's error text for a failed fopen(), as nginx prints it. */
function fopenFailure(path: string, err: NodeJS.ErrnoException): string {
  if (err.code === 'ENOENT') {
    return `BIO_new_file() failed (SSL: error:80000002:system library::No such file or directory:calling fopen(${path}, r) error:10000080:BIO routines::no such file)`;
  }
  if (err.code === 'EACCES') {
    return `BIO_new_file() failed (SSL: error:8000000D:system library::Permission denied:calling fopen(${path}, r) error:10080002:BIO routines::system lib)`;
  }
  return `BIO_new_file() failed (SSL: ${err.message})`;
}

/**
 * Reads and checks a pair.
 * @throws ConfigError `cannot load certificate "PATH": …`,
 *   `cannot load certificate key "PATH": …`, `SSL_CTX_use_PrivateKey("PATH") failed (…key values mismatch)`
 */
export function loadCertificatePair(certPath: string, keyPath: string): CertificatePair {
  let cert: Buffer;
  try {
    cert = readFileSync(certPath);
  } catch (err) {
    throw new ConfigError('file', `cannot load certificate "${certPath}": ${fopenFailure(certPath, err as NodeJS.ErrnoException)}`);
  }
  let x509: X509Certificate;
  try {
    x509 = new X509Certificate(cert);
  } catch {
    throw new ConfigError('file', `cannot load certificate "${certPath}": PEM_read_bio_X509_AUX() failed (SSL: error:0480006C:PEM routines::no start line:Expecting: TRUSTED CERTIFICATE)`);
  }
  let key: Buffer;
  try {
    key = readFileSync(keyPath);
  } catch (err) {
    throw new ConfigError('file', `cannot load certificate key "${keyPath}": ${fopenFailure(keyPath, err as NodeJS.ErrnoException)}`);
  }
  let privateKey;
  try {
    privateKey = createPrivateKey(key);
  } catch {
    throw new ConfigError('file', `cannot load certificate key "${keyPath}": PEM_read_bio_PrivateKey() failed (SSL: error:1E08010C:DECODER routines::unsupported:No supported data to decode. Input type: PEM)`);
  }
  if (!x509.checkPrivateKey(privateKey)) {
    throw new ConfigError('file', `SSL_CTX_use_PrivateKey("${keyPath}") failed (SSL: error:05800074:x509 certificate routines::key values mismatch)`);
  }
  return { certPath, keyPath, cert, key };
}

/**
 * Reads `ssl_dhparam` as `ngx_ssl_dhparam` does when a server's TLS context
 * is made: `BIO_new_file("PATH") failed (…)` when the file cannot be
 * opened, `PEM_read_bio_DHparams("PATH") failed (…)` when it holds no DH
 * parameters.
 * @throws ConfigError
 */
export function checkDhparam(path: string): void {
  let text: string;
  try {
    text = readFileSync(path, 'latin1');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EISDIR') {
      throw new ConfigError('file', fopenFailure(path, err as NodeJS.ErrnoException).replace('BIO_new_file()', `BIO_new_file("${path}")`));
    }
    text = '';
  }
  if (!text.includes('-----BEGIN DH PARAMETERS-----')) {
    throw new ConfigError('file', `PEM_read_bio_DHparams("${path}") failed (SSL: error:0480006C:PEM routines::no start line:Expecting: DH PARAMETERS)`);
  }
}
