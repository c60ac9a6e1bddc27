// A stated client identity as kube-apiserver's requestheader authenticator reads it. Pure.
import {
  CLIENT_CERT_HEADER,
  ENVOY_IDENTITY_HEADER,
  REMOTE_EXTRA_HEADER_PREFIX,
  REMOTE_GROUP_HEADER,
  REMOTE_UID_HEADER,
  REMOTE_USER_HEADER,
} from '../../constants.js';
import type { ClientIdentity } from './client-identity.js';

export interface FrontProxyHeader {
  readonly name: string;
  readonly value: string;
  /** Add another line rather than replace: each group is its own X-Remote-Group line. */
  readonly append: boolean;
}

/**
 * Extra keys go in the header name, %-escaped as client-go's front-proxy transport does: the
 * apiserver lower-cases the name and path-unescapes it ("%2f" becomes "/").
 */
export function extraHeaderName(key: string): string {
  const escaped = [...Buffer.from(key, 'utf8')]
    .map((b) =>
      /[A-Za-z0-9!#$&'*+.^_`|~-]/.test(String.fromCharCode(b)) && b < 0x80
        ? String.fromCharCode(b)
        : `%${b.toString(16).toUpperCase().padStart(2, '0')}`,
    )
    .join('');
  return `${REMOTE_EXTRA_HEADER_PREFIX}${escaped}`;
}

/**
 * X-Remote-User, X-Remote-Uid (when the certificate has one), one X-Remote-Group line per group
 * (the apiserver does not split on commas; "a,b" is one group) and X-Remote-Extra-<key>.
 */
export function frontProxyHeaders(identity: ClientIdentity): FrontProxyHeader[] {
  const out: FrontProxyHeader[] = [{ name: REMOTE_USER_HEADER, value: identity.user, append: false }];
  if (identity.uid !== null) out.push({ name: REMOTE_UID_HEADER, value: identity.uid, append: false });
  identity.groups.forEach((g, i) => out.push({ name: REMOTE_GROUP_HEADER, value: g, append: i > 0 }));
  for (const [key, values] of identity.extra) {
    const name = extraHeaderName(key);
    values.forEach((v, i) => out.push({ name, value: v, append: i > 0 }));
  }
  return out;
}

const REMOVED = Object.freeze([CLIENT_CERT_HEADER, ENVOY_IDENTITY_HEADER]);
const REMOVED_NO_GROUPS = Object.freeze([...REMOVED, REMOTE_GROUP_HEADER]);

/**
 * What goes with the headers above: Envoy's XFCC is for skewgate alone, Envoy's marker says its
 * Lua stated the identity (skewgate has now), and the X-Remote-Group lines the Lua may have set go
 * when the identity has no group (frontProxyHeaders sets, so replaces, them otherwise; it never
 * removes a header it sets). The Lua sets no UID (it leaves such certificates to skewgate).
 */
export function frontProxyRemovals(identity: ClientIdentity): readonly string[] {
  return identity.groups.length === 0 ? REMOVED_NO_GROUPS : REMOVED;
}
