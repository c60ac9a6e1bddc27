// Certificates on the fast path (docs/design.md): Envoy's Lua filter states a verified client
// certificate's identity itself where its reading is exactly kube-apiserver's (cert-identity-lua.ts),
// so that a kubelet's requests for what every apiserver serves take a fast route too; every other
// certificate, and every request the fast routes do not take, still meets skewgate, which states
// the identity again and removes the filter's marker. Pure: the CA bundle comes in parsed.
import type { Config } from '../config/core/schema.js';
import {
  ENVOY_IDENTITY_HEADER,
  ENVOY_IDENTITY_VALUE,
  REMOTE_GROUP_HEADER,
  REMOTE_USER_HEADER,
} from '../constants.js';
import { CREDENTIAL_ID_EXTRA, type ClientTrust } from '../identity/core/client-identity.js';
import { extraHeaderName } from '../identity/core/front-proxy-headers.js';
import { OID_COMMON_NAME, OID_KUBERNETES_UID, OID_ORGANIZATION } from '../identity/core/x509-subject.js';
import { certificateNames } from '../pki/der.js';
import { certIdentityLua, type IssuerWindow } from './cert-identity-lua.js';
import type { JsonObject } from './json.js';
import { statesIdentity } from './upstreams.js';

export const LUA_FILTER = 'envoy.filters.http.lua';

const EKU_CLIENT_AUTH = '1.3.6.1.5.5.7.3.2';
const EKU_ANY = '2.5.29.37.0';

/**
 * Whether this gateway's Envoy states certificates for the fast path: client certificates are
 * verified, the fast path is on, and the routes are skewgate's to write (envoy.xds), so that the
 * Lua follows the CA bundle skewgate has loaded.
 */
export function envoyStatesCertificates(config: Config): boolean {
  return statesIdentity(config) && config.routing.fastPath && config.envoy.xds !== undefined;
}

/**
 * The bundle's CAs as the Lua checks a leaf's issuer: by subject bytes (as Go chains them), the
 * validity of every CA of that subject intersected, to whole seconds inwards. A subject any of
 * whose CAs does not allow client authentication is left out: its leaves go to skewgate.
 */
export function issuerWindows(trust: ClientTrust): IssuerWindow[] {
  const bySubject = new Map<string, IssuerWindow | null>();
  for (const ca of trust.cas) {
    const subjectHex = Buffer.from(certificateNames(new Uint8Array(ca.raw)).subject).toString('hex');
    const eku = ca.keyUsage;
    const allowed = eku === undefined || eku.length === 0 || eku.includes(EKU_CLIENT_AUTH) || eku.includes(EKU_ANY);
    const before = bySubject.get(subjectHex);
    if (!allowed || before === null) {
      bySubject.set(subjectHex, null);
      continue;
    }
    const notBefore = Math.ceil(Date.parse(ca.validFrom) / 1000);
    const notAfter = Math.floor(Date.parse(ca.validTo) / 1000);
    bySubject.set(
      subjectHex,
      before === undefined
        ? { subjectHex, notBefore, notAfter }
        : { subjectHex, notBefore: Math.max(before.notBefore, notBefore), notAfter: Math.min(before.notAfter, notAfter) },
    );
  }
  return [...bySubject.values()].filter((w): w is IssuerWindow => w !== null && w.notBefore <= w.notAfter);
}

/** The Lua for this bundle (its CAs' subjects and windows are constants of the script). */
export function certIdentityScript(trust: ClientTrust): string {
  return certIdentityLua(
    issuerWindows(trust),
    trust.cas.map((ca) => ca.raw.toString('hex')),
    {
      user: REMOTE_USER_HEADER,
      group: REMOTE_GROUP_HEADER,
      credentialId: extraHeaderName(CREDENTIAL_ID_EXTRA),
      marker: ENVOY_IDENTITY_HEADER,
      markerValue: ENVOY_IDENTITY_VALUE,
    },
    { commonName: OID_COMMON_NAME, organization: OID_ORGANIZATION, kubernetesUid: OID_KUBERNETES_UID },
  );
}

/**
 * The filter in the chain: no script of its own, so it costs a request nothing but where a route
 * gives it one (certIdentityPerRoute: the route a certificate request without an identity selects).
 */
export function certIdentityFilter(): JsonObject {
  return { name: LUA_FILTER, typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua' } };
}

/** The route's typed_per_filter_config entry that runs the script there. */
export function certIdentityPerRoute(script: string): JsonObject {
  return {
    [LUA_FILTER]: {
      '@type': 'type.googleapis.com/envoy.extensions.filters.http.lua.v3.LuaPerRoute',
      source_code: { inline_string: script },
    },
  };
}
