// A certificate's subject, read from its DER the way Go's crypto/x509 reads it, because
// kube-apiserver's x509 authenticator takes the user from Go's parse: the last CN is the user,
// every O (in order) a group, and attribute values decode by their ASN.1 string type. Reading the
// DER, not a printed DN, leaves no escaping to get wrong (a CN of "a,O=system:masters" stays one
// CN). Pure: bytes in, attributes out.
import type { ErrorCode } from '../../errors/catalog.js';
import { DerError, elementsIn, readElement, type DerElement } from '../../pki/der.js';

/** One AttributeTypeAndValue of the subject, in certificate order. */
export interface SubjectAttribute {
  /** Dotted OID, e.g. "2.5.4.3" (CN). */
  readonly oid: string;
  readonly value: string;
}

export const OID_COMMON_NAME = '2.5.4.3';
export const OID_ORGANIZATION = '2.5.4.10';
/** kube-apiserver's user UID attribute (AllowParsingUserUIDFromCertAuth, beta and on since 1.33). */
export const OID_KUBERNETES_UID = '1.3.6.1.4.1.57683.2';

export class SubjectParseError extends Error {
  readonly code = 'SKEWGATE_ERR_CERT_SUBJECT' satisfies ErrorCode;
  constructor(message: string) {
    super(message);
    this.name = 'SubjectParseError';
  }
}

const TAG_INTEGER = 0x02;
const TAG_OID = 0x06;
const TAG_SEQUENCE = 0x30;
const TAG_SET = 0x31;
const TAG_VERSION = 0xa0; // [0] EXPLICIT
const TAG_UTF8 = 0x0c;
const TAG_NUMERIC = 0x12;
const TAG_PRINTABLE = 0x13;
const TAG_T61 = 0x14;
const TAG_IA5 = 0x16;
const TAG_BMP = 0x1e;

interface Tlv {
  readonly tag: number;
  /** The first byte of the contents. */
  readonly start: number;
  readonly end: number;
}

/** src/pki/der.ts's reader, its problems as SubjectParseError. */
function der<T>(read: () => T): T {
  try {
    return read();
  } catch (err) {
    if (err instanceof DerError) throw new SubjectParseError(`DER: ${err.message}`);
    throw err;
  }
}

const contents = (e: DerElement): Tlv => ({ tag: e.tag, start: e.body, end: e.end });

function readTlv(bytes: Uint8Array, at: number, limit: number): Tlv {
  return contents(der(() => readElement(bytes, at, limit)));
}

function childrenOf(bytes: Uint8Array, parent: Tlv): Tlv[] {
  return der(() => elementsIn(bytes, { tag: parent.tag, start: parent.start, body: parent.start, end: parent.end })).map(contents);
}

function expect(t: Tlv | undefined, tag: number, what: string): Tlv {
  if (t === undefined || t.tag !== tag) throw new SubjectParseError(`${what} is missing or malformed`);
  return t;
}

function decodeOid(b: Uint8Array): string {
  if (b.length === 0) throw new SubjectParseError('empty OID');
  const arcs: number[] = [];
  let v = 0;
  for (let i = 0; i < b.length; i++) {
    const byte = b[i] as number;
    if (v === 0 && byte === 0x80) throw new SubjectParseError('non-minimal OID encoding');
    v = v * 128 + (byte & 0x7f);
    if (v > Number.MAX_SAFE_INTEGER / 128) throw new SubjectParseError('OID arc too large');
    if ((byte & 0x80) === 0) {
      if (arcs.length === 0) arcs.push(v < 40 ? 0 : v < 80 ? 1 : 2, v < 80 ? v % 40 : v - 80);
      else arcs.push(v);
      v = 0;
    }
  }
  if ((b[b.length - 1] as number) & 0x80) throw new SubjectParseError('truncated OID');
  return arcs.join('.');
}

/** Go's PrintableString set, with the '*' and '&' it also accepts. */
function isPrintable(c: number): boolean {
  return (
    (c >= 0x61 && c <= 0x7a) ||
    (c >= 0x41 && c <= 0x5a) ||
    (c >= 0x30 && c <= 0x39) ||
    (c >= 0x27 && c <= 0x29) ||
    (c >= 0x2b && c <= 0x2f) ||
    c === 0x20 ||
    c === 0x3a ||
    c === 0x3d ||
    c === 0x3f ||
    c === 0x2a ||
    c === 0x26
  );
}

function latin1(b: Uint8Array): string {
  return Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('latin1');
}

/** Big-endian UTF-16 with lone surrogates replaced by U+FFFD, as Go's utf16.Decode does. */
function ucs2(b: Uint8Array): string {
  let s = '';
  for (let i = 0; i < b.length; i += 2) {
    const u = ((b[i] as number) << 8) | (b[i + 1] as number);
    const next = i + 3 < b.length ? ((b[i + 2] as number) << 8) | (b[i + 3] as number) : -1;
    if (u >= 0xd800 && u < 0xdc00 && next >= 0xdc00 && next < 0xe000) {
      s += String.fromCharCode(u, next);
      i += 2;
    } else {
      s += u >= 0xd800 && u < 0xe000 ? '\ufffd' : String.fromCharCode(u);
    }
  }
  return s;
}

const utf8Strict = new TextDecoder('utf-8', { fatal: true });

/** The string types Go's x509 accepts in a name, decoded as Go decodes them; any other fails the parse. */
function decodeString(tag: number, b: Uint8Array): string {
  switch (tag) {
    case TAG_UTF8:
      try {
        return utf8Strict.decode(b);
      } catch {
        throw new SubjectParseError('invalid UTF8String');
      }
    case TAG_PRINTABLE:
      if (!b.every(isPrintable)) throw new SubjectParseError('invalid PrintableString');
      return latin1(b);
    case TAG_IA5:
      if (!b.every((c) => c < 0x80)) throw new SubjectParseError('invalid IA5String');
      return latin1(b);
    case TAG_NUMERIC:
      if (!b.every((c) => (c >= 0x30 && c <= 0x39) || c === 0x20)) throw new SubjectParseError('invalid NumericString');
      return latin1(b);
    case TAG_T61:
      // Go reads T.61 as Latin-1.
      return latin1(b);
    case TAG_BMP: {
      if (b.length % 2 !== 0) throw new SubjectParseError('invalid BMPString');
      let n = b.length;
      if (n >= 2 && b[n - 1] === 0 && b[n - 2] === 0) n -= 2; // Go strips one NUL terminator
      return ucs2(b.subarray(0, n));
    }
    default:
      throw new SubjectParseError(`unsupported string type (tag 0x${tag.toString(16)}) in the subject`);
  }
}

/** Every subject attribute of a DER certificate, in order; throws SubjectParseError. */
export function subjectAttributes(der: Uint8Array): SubjectAttribute[] {
  const cert = expect(readTlv(der, 0, der.length), TAG_SEQUENCE, 'Certificate');
  const tbs = expect(childrenOf(der, cert)[0], TAG_SEQUENCE, 'TBSCertificate');
  const fields = childrenOf(der, tbs);
  const first = fields[0]?.tag === TAG_VERSION ? 1 : 0;
  expect(fields[first], TAG_INTEGER, 'serialNumber');
  expect(fields[first + 1], TAG_SEQUENCE, 'signature algorithm');
  expect(fields[first + 2], TAG_SEQUENCE, 'issuer');
  expect(fields[first + 3], TAG_SEQUENCE, 'validity');
  const subject = expect(fields[first + 4], TAG_SEQUENCE, 'subject');
  const out: SubjectAttribute[] = [];
  for (const rdn of childrenOf(der, subject)) {
    expect(rdn, TAG_SET, 'RelativeDistinguishedName');
    for (const atv of childrenOf(der, rdn)) {
      const [type, value, ...rest] = childrenOf(der, expect(atv, TAG_SEQUENCE, 'AttributeTypeAndValue'));
      if (value === undefined || rest.length > 0) throw new SubjectParseError('AttributeTypeAndValue must hold a type and one value');
      const oid = decodeOid(der.subarray(expect(type, TAG_OID, 'attribute type').start, (type as Tlv).end));
      out.push({ oid, value: decodeString(value.tag, der.subarray(value.start, value.end)) });
    }
  }
  return out;
}

/** The subject as Go's pkix.Name fills it: the last CN wins, every O is kept in order. */
export interface GoSubject {
  readonly commonName: string;
  readonly organization: readonly string[];
  readonly attributes: readonly SubjectAttribute[];
}

export function goSubject(attributes: readonly SubjectAttribute[]): GoSubject {
  let commonName = '';
  const organization: string[] = [];
  for (const a of attributes) {
    if (a.oid === OID_COMMON_NAME) commonName = a.value;
    else if (a.oid === OID_ORGANIZATION) organization.push(a.value);
  }
  return { commonName, organization, attributes };
}
