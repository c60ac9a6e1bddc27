// kube-apiserver's identity: the name of its identity Lease in kube-system, derived from its
// hostname (k8s.io/apiserver pkg/server/config.go). The peer-aggregated merge visits servers in
// the order of these names. Pure.
import { createHash } from 'node:crypto';

const BASE32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

function base32NoPadding(bytes: Uint8Array): string {
  let out = '';
  let acc = 0;
  let bits = 0;
  for (const b of bytes) {
    acc = (acc << 8) | b;
    bits += 8;
    while (bits >= 5) {
      out += BASE32[(acc >>> (bits - 5)) & 31];
      bits -= 5;
    }
    acc &= (1 << bits) - 1;
  }
  if (bits > 0) out += BASE32[(acc << (5 - bits)) & 31];
  return out;
}

/** A uint16 big-endian length, then the bytes (cryptobyte's AddUint16LengthPrefixed). */
function lengthPrefixed(s: string): Buffer {
  const bytes = Buffer.from(s, 'utf8');
  if (bytes.length > 0xffff) throw new RangeError('hostname too long for an apiserver identity');
  const len = Buffer.alloc(2);
  len.writeUInt16BE(bytes.length);
  return Buffer.concat([len, bytes]);
}

/**
 * "apiserver-" + lower-case unpadded base32 of the first 16 bytes of SHA-256 over the
 * length-prefixed hostname and the length-prefixed string "kube-apiserver".
 */
export function apiserverIdentity(hostname: string): string {
  const hash = createHash('sha256')
    .update(Buffer.concat([lengthPrefixed(hostname), lengthPrefixed('kube-apiserver')]))
    .digest();
  return `apiserver-${base32NoPadding(hash.subarray(0, 16)).toLowerCase()}`;
}
