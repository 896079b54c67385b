/**
 * Throw-away certificates for TLS tests, made with the `openssl` command
 * line in a temp directory (removed at cleanup): two unrelated root CAs,
 * intermediates, server certificates for `backend.test` (with an IP SAN
 * 127.0.0.1 too) issued directly by the root or through one or two
 * intermediates, a self-signed one, a client certificate, and a second
 * client certificate the root's CRL (`root.crl`) revokes.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { hasCommand, tempDir } from './harness.js';

/** The certificates and keys made, by name: `root`, `other-root`, `leaf`, `chain1`, `chain2`, `self`, `client`, `revoked-client`; and `root.crl`. */
export interface Pki {
  readonly dir: string;
  /** PEM text of `NAME.pem` or `NAME.key`. */
  text(file: string): string;
}

function openssl(dir: string, args: readonly string[]): void {
  const r = spawnSync('openssl', args, { cwd: dir, encoding: 'utf8', timeout: 30_000 });
  if (r.status !== 0) throw new Error(`openssl ${args.join(' ')} failed: ${r.stderr}`);
}

/** Makes the test PKI, or returns undefined without the `openssl` command. */
export function makePki(): Pki | undefined {
  if (!hasCommand('openssl')) return undefined;
  const dir = tempDir('jinx-pki-');
  const key = (name: string): void => openssl(dir, ['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-out', `${name}.key`]);
  writeFileSync(join(dir, 'ca.ext'), 'basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n');
  writeFileSync(join(dir, 'server.ext'), 'subjectAltName=DNS:backend.test,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n');
  writeFileSync(join(dir, 'client.ext'), 'extendedKeyUsage=clientAuth\n');
  const root = (name: string, cn: string): void => {
    key(name);
    openssl(dir, ['req', '-x509', '-new', '-key', `${name}.key`, '-days', '30', '-subj', `/CN=${cn}`, '-out', `${name}.pem`,
      '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
  };
  const issue = (name: string, cn: string, issuer: string, ext: string, keyName = name): void => {
    if (keyName === name) key(name);
    openssl(dir, ['req', '-new', '-key', `${keyName}.key`, '-subj', `/CN=${cn}`, '-out', `${name}.csr`]);
    openssl(dir, ['x509', '-req', '-in', `${name}.csr`, '-CA', `${issuer}.pem`, '-CAkey', `${issuer}.key`, '-CAcreateserial',
      '-days', '30', '-extfile', ext, '-out', `${name}.pem`]);
  };
  root('root', 'Test Root');
  root('other-root', 'Other Root');
  issue('inter1', 'Test Intermediate 1', 'root', 'ca.ext');
  issue('inter2', 'Test Intermediate 2', 'inter1', 'ca.ext');
  issue('leaf', 'backend.test', 'root', 'server.ext');
  issue('leaf1', 'backend.test', 'inter1', 'server.ext', 'leaf');
  issue('leaf2', 'backend.test', 'inter2', 'server.ext', 'leaf');
  issue('client', 'jinx-client', 'root', 'client.ext');
  issue('revoked-client', 'revoked-client', 'root', 'client.ext');
  writeFileSync(join(dir, 'crl.cnf'), '[ca]\ndefault_ca=root\n[root]\ndatabase=index.txt\ncrlnumber=crlnumber\ndefault_md=sha256\ndefault_crl_days=30\n');
  writeFileSync(join(dir, 'index.txt'), '');
  writeFileSync(join(dir, 'crlnumber'), '01\n');
  openssl(dir, ['ca', '-config', 'crl.cnf', '-cert', 'root.pem', '-keyfile', 'root.key', '-revoke', 'revoked-client.pem']);
  openssl(dir, ['ca', '-config', 'crl.cnf', '-cert', 'root.pem', '-keyfile', 'root.key', '-gencrl', '-out', 'root.crl']);
  openssl(dir, ['req', '-x509', '-new', '-key', 'leaf.key', '-days', '30', '-subj', '/CN=backend.test',
    '-addext', 'subjectAltName=DNS:backend.test', '-out', 'self.pem']);
  const read = (f: string): string => readFileSync(join(dir, f), 'latin1');
  // the chains a server sends: the certificate, then its intermediates
  writeFileSync(join(dir, 'chain1.pem'), read('leaf1.pem') + read('inter1.pem'));
  writeFileSync(join(dir, 'chain2.pem'), read('leaf2.pem') + read('inter2.pem') + read('inter1.pem'));
  for (const k of ['chain1', 'chain2', 'self']) writeFileSync(join(dir, `${k}.key`), read('leaf.key'));
  return { dir, text: read };
}

/**
 * A self-signed certificate for `name` (SAN `DNS:name`) with an `rsa` or
 * `ec` key, made in a temp directory: the PEM texts of the certificate and key.
 * @throws Error when openssl fails
 */
export function selfSigned(name: string, kind: 'rsa' | 'ec' = 'ec'): { cert: string; key: string } {
  const dir = tempDir('jinx-cert-');
  const keyArgs = kind === 'rsa' ? ['-newkey', 'rsa:2048'] : ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1'];
  openssl(dir, ['req', '-x509', ...keyArgs, '-nodes', '-days', '2', '-subj', `/CN=${name}`, '-addext', `subjectAltName=DNS:${name}`,
    '-keyout', 'cert.key', '-out', 'cert.pem']);
  return { cert: readFileSync(join(dir, 'cert.pem'), 'utf8'), key: readFileSync(join(dir, 'cert.key'), 'utf8') };
}

/**
 * A client certificate `NAME.pem` (key `NAME.key`) issued by the PKI's root,
 * with a subject in openssl's `-subj` form (`subj`: read as UTF-8, with
 * multi-valued RDNs, `/OU=a+OU=b`; `\+` and `\/` for those characters in a
 * value) or made by an openssl `req` configuration (`config`, written to
 * `NAME.cnf`), and optionally the serial number given (`-set_serial`).
 * @throws Error when openssl fails
 */
export function issueClientCertificate(pki: Pki, name: string, subject: { subj: string } | { config: string }, serial?: string): void {
  openssl(pki.dir, ['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-out', `${name}.key`]);
  let request: string[];
  if ('subj' in subject) request = ['-utf8', '-multivalue-rdn', '-subj', subject.subj];
  else {
    writeFileSync(join(pki.dir, `${name}.cnf`), subject.config);
    request = ['-config', `${name}.cnf`];
  }
  openssl(pki.dir, ['req', '-new', ...request, '-key', `${name}.key`, '-out', `${name}.csr`]);
  openssl(pki.dir, ['x509', '-req', '-in', `${name}.csr`, '-CA', 'root.pem', '-CAkey', 'root.key',
    ...(serial === undefined ? ['-CAcreateserial'] : ['-set_serial', serial]), '-days', '30', '-extfile', 'client.ext', '-out', `${name}.pem`]);
}
