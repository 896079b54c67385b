/**
 * Reading `ssl_certificate` / `ssl_certificate_key` pairs (and
 * `proxy_ssl_certificate` / `…_key`) when the configuration is loaded, with
 * the messages nginx prints through OpenSSL (`ngx_ssl_certificate` in
 * `src/event/ngx_event_openssl.c`): a missing or unreadable file, a file that
 * is not PEM, a key that does not match; trusted CA certificates
 * (`ngx_ssl_trusted_certificate`) and cipher lists (`ngx_ssl_ciphers`).
 */
import { X509Certificate, createPrivateKey, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createSecureContext } from 'node:tls';
import { ConfigError } from '../errors.js';
import { systemErrorText } from '../os-errors.js';

/** A certificate chain and its key, as PEM bytes. */
export interface CertificatePair {
  readonly certPath: string;
  readonly keyPath: string;
  readonly cert: Buffer;
  readonly key: Buffer;
}

/** OpenSSL 3's error text for a failed fopen(), as nginx prints it. */
export function fopenFailure(path: string, err: NodeJS.ErrnoException): string {
  if (err.code === 'ENOENT') {
    return `BIO_new_file() failed (SSL: error:80000002:system library::No such file or directory:calling fopen(${path}, r) error:10000080:BIO routines::no such file)`;
  }
  if (err.code === 'EACCES') {
    return `BIO_new_file() failed (SSL: error:8000000D:system library::Permission denied:calling fopen(${path}, r) error:10080002:BIO routines::system lib)`;
  }
  return `BIO_new_file() failed (SSL: ${err.message})`;
}

/** Reads a file as OpenSSL's BIO does: a directory opens, and reads as nothing. */
function readPem(path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EISDIR') return Buffer.alloc(0);
    throw err;
  }
}

/**
 * Reads and checks a pair. `perConnection`: loaded for one connection
 * (`proxy_ssl_certificate` with variables, `ngx_ssl_connection_certificate`),
 * where OpenSSL's call is `SSL_use_PrivateKey` rather than `SSL_CTX_use_PrivateKey`.
 * An encrypted key is decrypted with the first of `passwords`
 * (`ssl_password_file`) that opens it.
 * @throws ConfigError `cannot load certificate "PATH": …`,
 *   `cannot load certificate key "PATH": …`, `SSL_CTX_use_PrivateKey("PATH") failed (…key values mismatch)`
 */
export function loadCertificatePair(certPath: string, keyPath: string, perConnection = false, passwords?: readonly string[]): CertificatePair {
  let cert: Buffer;
  try {
    cert = readPem(certPath);
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
    key = readPem(keyPath);
  } catch (err) {
    throw new ConfigError('file', `cannot load certificate key "${keyPath}": ${fopenFailure(keyPath, err as NodeJS.ErrnoException)}`);
  }
  let privateKey;
  try {
    privateKey = createPrivateKey(key);
  } catch {
    if (!ENCRYPTED_KEY.test(key.toString('latin1'))) {
      throw new ConfigError('file', `cannot load certificate key "${keyPath}": PEM_read_bio_PrivateKey() failed (SSL: error:1E08010C:DECODER routines::unsupported:No supported data to decode. Input type: PEM)`);
    }
    privateKey = decryptKey(key, keyPath, passwords);
    // the TLS context gets the key decrypted, as OpenSSL holds it after ngx_ssl_password_callback
    key = Buffer.from(privateKey.export({ type: 'pkcs8', format: 'pem' }) as string, 'latin1');
  }
  if (!x509.checkPrivateKey(privateKey)) {
    const call = perConnection ? 'SSL_use_PrivateKey' : 'SSL_CTX_use_PrivateKey';
    throw new ConfigError('file', `${call}("${keyPath}") failed (SSL: error:05800074:x509 certificate routines::key values mismatch)`);
  }
  return { certPath, keyPath, cert, key };
}

/** A PEM private key that needs a passphrase (PKCS#8 or OpenSSL's legacy `Proc-Type: 4,ENCRYPTED`). */
const ENCRYPTED_KEY = /-----BEGIN ENCRYPTED PRIVATE KEY-----|Proc-Type: 4,ENCRYPTED/;

/**
 * `ngx_ssl_password_callback`: each passphrase in turn; with none, OpenSSL
 * cannot ask for one (nginx runs without a terminal to prompt on).
 * @throws ConfigError with OpenSSL 3's error queue as nginx prints it
 */
function decryptKey(key: Buffer, keyPath: string, passwords: readonly string[] | undefined): KeyObject {
  for (const passphrase of passwords ?? []) {
    try {
      return createPrivateKey({ key, passphrase });
    } catch {
      // the next passphrase
    }
  }
  const badDecrypt = 'error:1C800064:Provider routines::bad decrypt error:11800074:PKCS12 routines::pkcs12 cipherfinal error:maybe wrong password';
  const queue = passwords
    ? `${badDecrypt} ${badDecrypt}`
    : 'error:1400006B:UI routines::processing error:while reading strings error:0480006D:PEM routines::problems getting password '
      + 'error:07880109:common libcrypto routines::interrupted or cancelled error:07880109:common libcrypto routines::interrupted or cancelled '
      + 'error:1C80009F:Provider routines::unable to get passphrase error:1400006B:UI routines::processing error:while reading strings '
      + 'error:0480006D:PEM routines::problems getting password error:07880109:common libcrypto routines::interrupted or cancelled '
      + 'error:04800068:PEM routines::bad password read';
  throw new ConfigError('file', `cannot load certificate key "${keyPath}": PEM_read_bio_PrivateKey() failed (SSL: ${queue})`);
}

/**
 * Reads `ssl_dhparam` as `ngx_ssl_dhparam` does when a server's TLS context
 * is made, returning its PEM: `BIO_new_file("PATH") failed (…)` when the file cannot be
 * opened, `PEM_read_bio_DHparams("PATH") failed (…)` when it holds no DH
 * parameters.
 * @throws ConfigError
 */
export function loadDhparam(path: string): Buffer {
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
  return Buffer.from(text, 'latin1');
}

/**
 * Reads an `ssl_session_ticket_key` file as `ngx_ssl_session_ticket_keys`
 * does: 48 bytes (a key name, an AES-128 key and an HMAC-SHA256 key of 16
 * bytes each) or 80 (a name, a 32-byte HMAC key, an AES-256 key).
 * @throws ConfigError `open() "PATH" failed (…)`, `"PATH" must be 48 or 80 bytes`
 */
export function loadTicketKey(path: string): Buffer {
  let data: Buffer;
  try {
    data = readFileSync(path);
  } catch (err) {
    throw new ConfigError('file', `open() "${path}" failed (${systemErrorText(err as NodeJS.ErrnoException)})`);
  }
  if (data.length !== 48 && data.length !== 80) throw new ConfigError('file', `"${path}" must be 48 or 80 bytes`);
  return data;
}

/**
 * Reads `ssl_crl` as `ngx_ssl_crl` does (`X509_load_crl_file` through nginx
 * 1.30's cache): every PEM CRL of the file.
 * @throws ConfigError `cannot load CRL "PATH": BIO_new_file() failed (…)`,
 *   `cannot load CRL "PATH": PEM_read_bio_X509_CRL() failed (…no start line…)`
 */
export function loadCrl(path: string): Buffer {
  let text: string;
  try {
    text = readFileSync(path, 'latin1');
  } catch (err) {
    throw new ConfigError('file', `cannot load CRL "${path}": ${fopenFailure(path, err as NodeJS.ErrnoException)}`);
  }
  const crl = Buffer.from(text, 'latin1');
  let valid = text.includes('-----BEGIN X509 CRL-----');
  try {
    if (valid) createSecureContext({ crl });
  } catch {
    valid = false;
  }
  if (!valid) {
    throw new ConfigError('file', `cannot load CRL "${path}": PEM_read_bio_X509_CRL() failed (SSL: error:0480006C:PEM routines::no start line:Expecting: X509 CRL)`);
  }
  return crl;
}

/**
 * Checks `ssl_ecdh_curve` as `ngx_ssl_ecdh_curve` sets it (`auto` is
 * OpenSSL's default list).
 * @throws ConfigError `SSL_CTX_set1_curves_list("LIST") failed`
 */
export function checkEcdhCurve(curves: string): void {
  try {
    createSecureContext({ ecdhCurve: curves });
  } catch {
    throw new ConfigError('file', `SSL_CTX_set1_curves_list("${curves}") failed`);
  }
}

/** A PEM block holding a certificate (`CERTIFICATE`, `TRUSTED CERTIFICATE`, `X509 CERTIFICATE`). */
const PEM_CERTIFICATE = /-----BEGIN ((?:TRUSTED |X509 )?CERTIFICATE)-----[\s\S]*?-----END \1-----/g;

/**
 * Reads a file of trusted CA certificates (`proxy_ssl_trusted_certificate`),
 * as `ngx_ssl_trusted_certificate` loads it (`src/event/ngx_event_openssl.c`,
 * through nginx 1.30's certificate cache): every PEM certificate of the file.
 * @throws ConfigError `cannot load certificate "PATH": BIO_new_file() failed (…)`
 *   when the file cannot be read, `… PEM_read_bio_X509_AUX() failed (…no start line…)` when it holds no certificate.
 */
export function loadTrustedCertificates(path: string): Buffer {
  let text: string;
  try {
    text = readFileSync(path, 'latin1');
  } catch (err) {
    throw new ConfigError('file', `cannot load certificate "${path}": ${fopenFailure(path, err as NodeJS.ErrnoException)}`);
  }
  const blocks = text.match(PEM_CERTIFICATE) ?? [];
  const valid = blocks.every((b) => {
    try {
      return new X509Certificate(b.replace(/(TRUSTED|X509) CERTIFICATE/g, 'CERTIFICATE')) !== undefined;
    } catch {
      return false;
    }
  });
  if (blocks.length === 0 || !valid) {
    throw new ConfigError('file', `cannot load certificate "${path}": PEM_read_bio_X509_AUX() failed (SSL: error:0480006C:PEM routines::no start line:Expecting: TRUSTED CERTIFICATE)`);
  }
  // a certificate given twice is taken once (the CA names a server sends, as OpenSSL's SSL_load_client_CA_file)
  return Buffer.from([...new Set(blocks)].join('\n'), 'latin1');
}

/**
 * Checks a cipher list as `ngx_ssl_ciphers` sets it (`SSL_CTX_set_cipher_list`).
 * @throws ConfigError `SSL_CTX_set_cipher_list("LIST") failed (SSL: …)` with OpenSSL's reason:
 * `error:0A0000B9:SSL routines::no cipher match`, or `…::invalid command` for a byte no cipher name has
 */
export function checkCiphers(ciphers: string): void {
  try {
    createSecureContext({ ciphers });
  } catch (e) {
    const reason = e instanceof Error && e.message.startsWith('error:') ? e.message : 'error:0A0000B9:SSL routines::no cipher match';
    throw new ConfigError('file', `SSL_CTX_set_cipher_list("${ciphers}") failed (SSL: ${reason})`);
  }
}
