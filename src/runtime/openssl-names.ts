/**
 * Names OpenSSL gives to what a TLS client offers, as nginx 1.30 prints them
 * with its OpenSSL (3.6): cipher suites (`SSL_CIPHER_find` and
 * `SSL_CIPHER_get_name`, for `$ssl_ciphers`), groups (`OBJ_nid2sn` of the
 * group's NID, else `SSL_group_to_name`, for `$ssl_curve(s)`), and the short
 * names of distinguished-name attributes (`OBJ_nid2sn`, for
 * `$ssl_client_s_dn` and the like).
 *
 * The tables were listed from OpenSSL 3.6's libssl and libcrypto: every
 * cipher id `SSL_CIPHER_find` knows, every group id a ClientHello's
 * `supported_groups` can name that `SSL_get1_curves` maps to a NID or
 * `SSL_group_to_name` names, and the attribute types of X.520, PKCS #9,
 * RFC 4519 (pilot), RFC 3739 and the CA/B Forum's jurisdiction fields.
 * Each table is parsed once, when first used.
 */

/** `id:NAME` pairs, ids in hex. */
const CIPHERS = `
0001:NULL-MD5 0002:NULL-SHA 0007:IDEA-CBC-SHA 002c:PSK-NULL-SHA
002d:DHE-PSK-NULL-SHA 002e:RSA-PSK-NULL-SHA 002f:AES128-SHA 0032:DHE-DSS-AES128-SHA
0033:DHE-RSA-AES128-SHA 0034:ADH-AES128-SHA 0035:AES256-SHA 0038:DHE-DSS-AES256-SHA
0039:DHE-RSA-AES256-SHA 003a:ADH-AES256-SHA 003b:NULL-SHA256 003c:AES128-SHA256
003d:AES256-SHA256 0040:DHE-DSS-AES128-SHA256 0041:CAMELLIA128-SHA 0044:DHE-DSS-CAMELLIA128-SHA
0045:DHE-RSA-CAMELLIA128-SHA 0046:ADH-CAMELLIA128-SHA 0067:DHE-RSA-AES128-SHA256 006a:DHE-DSS-AES256-SHA256
006b:DHE-RSA-AES256-SHA256 006c:ADH-AES128-SHA256 006d:ADH-AES256-SHA256 0081:GOST2001-GOST89-GOST89
0083:GOST2001-NULL-GOST94 0084:CAMELLIA256-SHA 0087:DHE-DSS-CAMELLIA256-SHA 0088:DHE-RSA-CAMELLIA256-SHA
0089:ADH-CAMELLIA256-SHA 008c:PSK-AES128-CBC-SHA 008d:PSK-AES256-CBC-SHA 0090:DHE-PSK-AES128-CBC-SHA
0091:DHE-PSK-AES256-CBC-SHA 0094:RSA-PSK-AES128-CBC-SHA 0095:RSA-PSK-AES256-CBC-SHA 0096:SEED-SHA
0099:DHE-DSS-SEED-SHA 009a:DHE-RSA-SEED-SHA 009b:ADH-SEED-SHA 009c:AES128-GCM-SHA256
009d:AES256-GCM-SHA384 009e:DHE-RSA-AES128-GCM-SHA256 009f:DHE-RSA-AES256-GCM-SHA384 00a2:DHE-DSS-AES128-GCM-SHA256
00a3:DHE-DSS-AES256-GCM-SHA384 00a6:ADH-AES128-GCM-SHA256 00a7:ADH-AES256-GCM-SHA384 00a8:PSK-AES128-GCM-SHA256
00a9:PSK-AES256-GCM-SHA384 00aa:DHE-PSK-AES128-GCM-SHA256 00ab:DHE-PSK-AES256-GCM-SHA384 00ac:RSA-PSK-AES128-GCM-SHA256
00ad:RSA-PSK-AES256-GCM-SHA384 00ae:PSK-AES128-CBC-SHA256 00af:PSK-AES256-CBC-SHA384 00b0:PSK-NULL-SHA256
00b1:PSK-NULL-SHA384 00b2:DHE-PSK-AES128-CBC-SHA256 00b3:DHE-PSK-AES256-CBC-SHA384 00b4:DHE-PSK-NULL-SHA256
00b5:DHE-PSK-NULL-SHA384 00b6:RSA-PSK-AES128-CBC-SHA256 00b7:RSA-PSK-AES256-CBC-SHA384 00b8:RSA-PSK-NULL-SHA256
00b9:RSA-PSK-NULL-SHA384 00ba:CAMELLIA128-SHA256 00bd:DHE-DSS-CAMELLIA128-SHA256 00be:DHE-RSA-CAMELLIA128-SHA256
00bf:ADH-CAMELLIA128-SHA256 00c0:CAMELLIA256-SHA256 00c3:DHE-DSS-CAMELLIA256-SHA256 00c4:DHE-RSA-CAMELLIA256-SHA256
00c5:ADH-CAMELLIA256-SHA256 00ff:TLS_EMPTY_RENEGOTIATION_INFO_SCSV 1301:TLS_AES_128_GCM_SHA256 1302:TLS_AES_256_GCM_SHA384
1303:TLS_CHACHA20_POLY1305_SHA256 1304:TLS_AES_128_CCM_SHA256 1305:TLS_AES_128_CCM_8_SHA256 5600:TLS_FALLBACK_SCSV
c006:ECDHE-ECDSA-NULL-SHA c009:ECDHE-ECDSA-AES128-SHA c00a:ECDHE-ECDSA-AES256-SHA c010:ECDHE-RSA-NULL-SHA
c013:ECDHE-RSA-AES128-SHA c014:ECDHE-RSA-AES256-SHA c015:AECDH-NULL-SHA c018:AECDH-AES128-SHA
c019:AECDH-AES256-SHA c01d:SRP-AES-128-CBC-SHA c01e:SRP-RSA-AES-128-CBC-SHA c01f:SRP-DSS-AES-128-CBC-SHA
c020:SRP-AES-256-CBC-SHA c021:SRP-RSA-AES-256-CBC-SHA c022:SRP-DSS-AES-256-CBC-SHA c023:ECDHE-ECDSA-AES128-SHA256
c024:ECDHE-ECDSA-AES256-SHA384 c027:ECDHE-RSA-AES128-SHA256 c028:ECDHE-RSA-AES256-SHA384 c02b:ECDHE-ECDSA-AES128-GCM-SHA256
c02c:ECDHE-ECDSA-AES256-GCM-SHA384 c02f:ECDHE-RSA-AES128-GCM-SHA256 c030:ECDHE-RSA-AES256-GCM-SHA384 c035:ECDHE-PSK-AES128-CBC-SHA
c036:ECDHE-PSK-AES256-CBC-SHA c037:ECDHE-PSK-AES128-CBC-SHA256 c038:ECDHE-PSK-AES256-CBC-SHA384 c039:ECDHE-PSK-NULL-SHA
c03a:ECDHE-PSK-NULL-SHA256 c03b:ECDHE-PSK-NULL-SHA384 c050:ARIA128-GCM-SHA256 c051:ARIA256-GCM-SHA384
c052:DHE-RSA-ARIA128-GCM-SHA256 c053:DHE-RSA-ARIA256-GCM-SHA384 c056:DHE-DSS-ARIA128-GCM-SHA256 c057:DHE-DSS-ARIA256-GCM-SHA384
c05c:ECDHE-ECDSA-ARIA128-GCM-SHA256 c05d:ECDHE-ECDSA-ARIA256-GCM-SHA384 c060:ECDHE-ARIA128-GCM-SHA256 c061:ECDHE-ARIA256-GCM-SHA384
c06a:PSK-ARIA128-GCM-SHA256 c06b:PSK-ARIA256-GCM-SHA384 c06c:DHE-PSK-ARIA128-GCM-SHA256 c06d:DHE-PSK-ARIA256-GCM-SHA384
c06e:RSA-PSK-ARIA128-GCM-SHA256 c06f:RSA-PSK-ARIA256-GCM-SHA384 c072:ECDHE-ECDSA-CAMELLIA128-SHA256 c073:ECDHE-ECDSA-CAMELLIA256-SHA384
c076:ECDHE-RSA-CAMELLIA128-SHA256 c077:ECDHE-RSA-CAMELLIA256-SHA384 c094:PSK-CAMELLIA128-SHA256 c095:PSK-CAMELLIA256-SHA384
c096:DHE-PSK-CAMELLIA128-SHA256 c097:DHE-PSK-CAMELLIA256-SHA384 c098:RSA-PSK-CAMELLIA128-SHA256 c099:RSA-PSK-CAMELLIA256-SHA384
c09a:ECDHE-PSK-CAMELLIA128-SHA256 c09b:ECDHE-PSK-CAMELLIA256-SHA384 c09c:AES128-CCM c09d:AES256-CCM
c09e:DHE-RSA-AES128-CCM c09f:DHE-RSA-AES256-CCM c0a0:AES128-CCM8 c0a1:AES256-CCM8
c0a2:DHE-RSA-AES128-CCM8 c0a3:DHE-RSA-AES256-CCM8 c0a4:PSK-AES128-CCM c0a5:PSK-AES256-CCM
c0a6:DHE-PSK-AES128-CCM c0a7:DHE-PSK-AES256-CCM c0a8:PSK-AES128-CCM8 c0a9:PSK-AES256-CCM8
c0aa:DHE-PSK-AES128-CCM8 c0ab:DHE-PSK-AES256-CCM8 c0ac:ECDHE-ECDSA-AES128-CCM c0ad:ECDHE-ECDSA-AES256-CCM
c0ae:ECDHE-ECDSA-AES128-CCM8 c0af:ECDHE-ECDSA-AES256-CCM8 c0b4:TLS_SHA256_SHA256 c0b5:TLS_SHA384_SHA384
c100:GOST2012-KUZNYECHIK-KUZNYECHIKOMAC c101:GOST2012-MAGMA-MAGMAOMAC c102:IANA-GOST2012-GOST8912-GOST8912 cca8:ECDHE-RSA-CHACHA20-POLY1305
cca9:ECDHE-ECDSA-CHACHA20-POLY1305 ccaa:DHE-RSA-CHACHA20-POLY1305 ccab:PSK-CHACHA20-POLY1305 ccac:ECDHE-PSK-CHACHA20-POLY1305
ccad:DHE-PSK-CHACHA20-POLY1305 ccae:RSA-PSK-CHACHA20-POLY1305 ff85:LEGACY-GOST2012-GOST8912-GOST8912 ff87:GOST2012-NULL-GOST12`;

/** `id:NAME` pairs, ids in hex. */
const GROUPS = `
0001:sect163k1 0002:sect163r1 0003:sect163r2 0004:sect193r1 0005:sect193r2 0006:sect233k1
0007:sect233r1 0008:sect239k1 0009:sect283k1 000a:sect283r1 000b:sect409k1 000c:sect409r1
000d:sect571k1 000e:sect571r1 000f:secp160k1 0010:secp160r1 0011:secp160r2 0012:secp192k1
0013:prime192v1 0014:secp224k1 0015:secp224r1 0016:secp256k1 0017:prime256v1 0018:secp384r1
0019:secp521r1 001a:brainpoolP256r1 001b:brainpoolP384r1 001c:brainpoolP512r1 001d:X25519 001e:X448
001f:brainpoolP256r1tls13 0020:brainpoolP384r1tls13 0021:brainpoolP512r1tls13 0100:ffdhe2048 0101:ffdhe3072 0102:ffdhe4096
0103:ffdhe6144 0104:ffdhe8192 0200:MLKEM512 0201:MLKEM768 0202:MLKEM1024 11eb:SecP256r1MLKEM768
11ec:X25519MLKEM768 11ed:SecP384r1MLKEM1024`;

/** OID prefixes and the `ARC=SHORTNAME` pairs under them. */
const DN_ATTRIBUTES: readonly (readonly [string, string])[] = [
  ['0.9.2342.19200300.100.1.', `1=UID 2=textEncodedORAddress 3=mail 4=info 5=favouriteDrink 6=roomNumber 7=photo 8=userClass 9=host
    10=manager 11=documentIdentifier 12=documentTitle 13=documentVersion 14=documentAuthor
    15=documentLocation 20=homeTelephoneNumber 21=secretary 22=otherMailbox 23=lastModifiedTime
    24=lastModifiedBy 25=DC 26=aRecord 27=pilotAttributeType27 28=mXRecord 29=nSRecord 30=sOARecord
    31=cNAMERecord 37=associatedDomain 38=associatedName 39=homePostalAddress 40=personalTitle
    41=mobileTelephoneNumber 42=pagerTelephoneNumber 43=friendlyCountryName 44=uid
    45=organizationalStatus 46=janetMailbox 47=mailPreferenceOption 48=buildingName 49=dSAQuality
    50=singleLevelQuality 51=subtreeMinimumQuality 52=subtreeMaximumQuality 53=personalSignature
    54=dITRedirect 55=audio 56=documentPublisher`],
  ['1.2.643.3.131.1.', `1=INN`],
  ['1.2.643.100.', `1=OGRN 3=SNILS 5=OGRNIP`],
  ['1.2.840.113549.1.9.', `1=emailAddress 2=unstructuredName 3=contentType 4=messageDigest 5=signingTime 6=countersignature
    7=challengePassword 8=unstructuredAddress 9=extendedCertificateAttributes 14=extReq 15=SMIME-CAPS
    16=SMIME 20=friendlyName 21=localKeyID 52=id-aa-CMSAlgorithmProtection`],
  ['1.3.6.1.4.1.311.60.2.1.', `1=jurisdictionL 2=jurisdictionST 3=jurisdictionC`],
  ['1.3.6.1.5.5.7.9.', `1=id-pda-dateOfBirth 2=id-pda-placeOfBirth 3=id-pda-gender 4=id-pda-countryOfCitizenship
    5=id-pda-countryOfResidence`],
  ['2.5.4.', `3=CN 4=SN 5=serialNumber 6=C 7=L 8=ST 9=street 10=O 11=OU 12=title 13=description 14=searchGuide
    15=businessCategory 16=postalAddress 17=postalCode 18=postOfficeBox 19=physicalDeliveryOfficeName
    20=telephoneNumber 21=telexNumber 22=teletexTerminalIdentifier 23=facsimileTelephoneNumber
    24=x121Address 25=internationaliSDNNumber 26=registeredAddress 27=destinationIndicator
    28=preferredDeliveryMethod 29=presentationAddress 30=supportedApplicationContext 31=member 32=owner
    33=roleOccupant 34=seeAlso 35=userPassword 36=userCertificate 37=cACertificate
    38=authorityRevocationList 39=certificateRevocationList 40=crossCertificatePair 41=name 42=GN
    43=initials 44=generationQualifier 45=x500UniqueIdentifier 46=dnQualifier 47=enhancedSearchGuide
    48=protocolInformation 49=distinguishedName 50=uniqueMember 51=houseIdentifier
    52=supportedAlgorithms 53=deltaRevocationList 54=dmdName 65=pseudonym 72=role
    97=organizationIdentifier 98=c3 99=n3 100=dnsName`],
];

function hexTable(text: string): Map<number, string> {
  const out = new Map<number, string>();
  for (const pair of text.split(/\s+/)) {
    const colon = pair.indexOf(':');
    if (colon > 0) out.set(parseInt(pair.slice(0, colon), 16), pair.slice(colon + 1));
  }
  return out;
}

let cipherNames: Map<number, string> | undefined;
let groupNames: Map<number, string> | undefined;
let attributeNames: Map<string, string> | undefined;

/** OpenSSL's name of a cipher suite (`ECDHE-RSA-AES128-GCM-SHA256`, `TLS_AES_128_GCM_SHA256`), or undefined. */
export function cipherName(id: number): string | undefined {
  cipherNames ??= hexTable(CIPHERS);
  return cipherNames.get(id);
}

/** The name nginx prints for a group (`X25519`, `prime256v1`, `X25519MLKEM768`), or undefined. */
export function groupName(id: number): string | undefined {
  groupNames ??= hexTable(GROUPS);
  return groupNames.get(id);
}

/** OpenSSL's other names for the NIST curves, as `SSL_CTX_set1_curves_list` takes them. */
const GROUP_ALIASES: Readonly<Record<string, number>> = { 'p-256': 0x17, secp256r1: 0x17, 'p-384': 0x18, 'p-521': 0x19 };

/** The id of a group named in a curve list (`ssl_ecdh_curve`; any case, NIST aliases), or undefined. */
export function groupId(name: string): number | undefined {
  groupNames ??= hexTable(GROUPS);
  const lower = name.toLowerCase();
  for (const [id, n] of groupNames) if (n.toLowerCase() === lower) return id;
  return GROUP_ALIASES[lower];
}

/** OpenSSL's short name of a distinguished-name attribute type (`2.5.4.3` → `CN`), or undefined. */
export function attributeName(oid: string): string | undefined {
  if (!attributeNames) {
    attributeNames = new Map();
    for (const [prefix, pairs] of DN_ATTRIBUTES) {
      for (const pair of pairs.split(/\s+/)) {
        const eq = pair.indexOf('=');
        if (eq > 0) attributeNames.set(prefix + pair.slice(0, eq), pair.slice(eq + 1));
      }
    }
  }
  return attributeNames.get(oid);
}
