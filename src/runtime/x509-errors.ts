/**
 * OpenSSL's certificate verification results (`X509_V_ERR_*`, numbers of
 * `include/openssl/x509_vfy.h`, texts of `X509_verify_cert_error_string`,
 * `crypto/x509/x509_txt.c`, OpenSSL 3 spelling) by the code Node.js gives
 * them (`authorizationError.code`): for a client certificate
 * (`$ssl_client_verify`, the 400 of `ssl_verify_client`) and an upstream's.
 */
export const X509_ERRORS: Readonly<Record<string, readonly [number, string]>> = {
  UNSPECIFIED: [1, 'unspecified certificate verification error'],
  UNABLE_TO_GET_ISSUER_CERT: [2, 'unable to get issuer certificate'],
  UNABLE_TO_GET_CRL: [3, 'unable to get certificate CRL'],
  UNABLE_TO_DECRYPT_CERT_SIGNATURE: [4, "unable to decrypt certificate's signature"],
  UNABLE_TO_DECRYPT_CRL_SIGNATURE: [5, "unable to decrypt CRL's signature"],
  UNABLE_TO_DECODE_ISSUER_PUBLIC_KEY: [6, 'unable to decode issuer public key'],
  CERT_SIGNATURE_FAILURE: [7, 'certificate signature failure'],
  CRL_SIGNATURE_FAILURE: [8, 'CRL signature failure'],
  CERT_NOT_YET_VALID: [9, 'certificate is not yet valid'],
  CERT_HAS_EXPIRED: [10, 'certificate has expired'],
  CRL_NOT_YET_VALID: [11, 'CRL is not yet valid'],
  CRL_HAS_EXPIRED: [12, 'CRL has expired'],
  ERROR_IN_CERT_NOT_BEFORE_FIELD: [13, "format error in certificate's notBefore field"],
  ERROR_IN_CERT_NOT_AFTER_FIELD: [14, "format error in certificate's notAfter field"],
  ERROR_IN_CRL_LAST_UPDATE_FIELD: [15, "format error in CRL's lastUpdate field"],
  ERROR_IN_CRL_NEXT_UPDATE_FIELD: [16, "format error in CRL's nextUpdate field"],
  OUT_OF_MEM: [17, 'out of memory'],
  DEPTH_ZERO_SELF_SIGNED_CERT: [18, 'self-signed certificate'],
  SELF_SIGNED_CERT_IN_CHAIN: [19, 'self-signed certificate in certificate chain'],
  UNABLE_TO_GET_ISSUER_CERT_LOCALLY: [20, 'unable to get local issuer certificate'],
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: [21, 'unable to verify the first certificate'],
  CERT_CHAIN_TOO_LONG: [22, 'certificate chain too long'],
  CERT_REVOKED: [23, 'certificate revoked'],
  INVALID_CA: [24, 'invalid CA certificate'],
  PATH_LENGTH_EXCEEDED: [25, 'path length constraint exceeded'],
  INVALID_PURPOSE: [26, 'unsupported certificate purpose'],
  CERT_UNTRUSTED: [27, 'certificate not trusted'],
  CERT_REJECTED: [28, 'certificate rejected'],
  HOSTNAME_MISMATCH: [62, 'hostname mismatch'],
};
