// The DER skewgate reads itself: one element reader (src/identity/core/x509-subject.ts walks a client
// certificate's subject with it), and where a certificate's issuer and subject names are, byte
// for byte. Go's verifier (kubectl, client-go, kubelets) finds a certificate's issuer by comparing
// these bytes with the CA's subject, so an issued certificate is checked against them. Pure.

export class DerError extends Error {}

export interface DerElement {
  readonly tag: number;
  /** Offset of the first byte of the whole element (tag). */
  readonly start: number;
  /** Offset of the first byte of the contents. */
  readonly body: number;
  /** Offset just after the element. */
  readonly end: number;
}

/** One DER element at `at`, which must end by `limit`. Definite lengths only, as DER requires. */
export function readElement(der: Uint8Array, at: number, limit: number): DerElement {
  if (at + 2 > limit) throw new DerError(`truncated element at byte ${at}`);
  const tag = der[at] as number;
  if ((tag & 0x1f) === 0x1f) throw new DerError(`multi-byte tag at byte ${at}`);
  let len = der[at + 1] as number;
  let body = at + 2;
  if (len & 0x80) {
    const n = len & 0x7f;
    if (n === 0 || n > 4) throw new DerError(`bad length at byte ${at}`);
    if (body + n > limit) throw new DerError(`truncated length at byte ${at}`);
    len = 0;
    for (let i = 0; i < n; i++) len = len * 256 + (der[body + i] as number);
    body += n;
  }
  const end = body + len;
  if (end > limit) throw new DerError(`element at byte ${at} runs past its container`);
  return { tag, start: at, body, end };
}

/** The elements inside a constructed one. */
export function elementsIn(der: Uint8Array, parent: DerElement): DerElement[] {
  const out: DerElement[] = [];
  for (let at = parent.body; at < parent.end;) {
    const c = readElement(der, at, parent.end);
    out.push(c);
    at = c.end;
  }
  return out;
}

const SEQUENCE = 0x30;
const VERSION_TAG = 0xa0;

/** The DER bytes of a certificate's issuer and subject Names. Throws DerError when it is not a certificate. */
export function certificateNames(der: Uint8Array): { readonly issuer: Uint8Array; readonly subject: Uint8Array } {
  const cert = readElement(der, 0, der.length);
  if (cert.tag !== SEQUENCE) throw new DerError('not a SEQUENCE');
  const tbs = elementsIn(der, cert)[0];
  if (tbs?.tag !== SEQUENCE) throw new DerError('no TBSCertificate');
  const fields = elementsIn(der, tbs);
  const rest = fields[0]?.tag === VERSION_TAG ? fields.slice(1) : fields;
  // serialNumber, signature, issuer, validity, subject
  const [, , issuer, , subject] = rest;
  if (issuer?.tag !== SEQUENCE || subject?.tag !== SEQUENCE) throw new DerError('no issuer or subject Name');
  return { issuer: der.subarray(issuer.start, issuer.end), subject: der.subarray(subject.start, subject.end) };
}
