// Could Envoy state a client certificate's identity itself, so that certificate clients (every
// kubelet) take the fast path too (issue 28, item 2)? Envoy's own reading of a subject — the Lua
// filter's parsedSubjectPeerCertificate(), its commonName() and organizationName() — set against
// kube-apiserver's (the Go-oracle fixtures, test/fixtures/x509-identity/expected.json): a REAL
// Envoy, certificates of the fixtures' subjects made by the fixtures' own recipe
// (oracle/make-certs.sh, keys kept), each presented over TLS. What this pins is why skewgate's Lua
// does not use that reading (docs/design.md, "Certificates on the fast path"): it misses the UID
// attribute and reads string types Go refuses, so the Lua reads the certificate's DER itself
// (src/envoy/cert-identity-lua.ts; test/e2e/cert-fast-path.test.ts).
import t from 'tap';
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { goSubject, subjectAttributes } from '../../src/identity/core/x509-subject.js';
import { join } from 'node:path';
import { startEnvoy } from '../../src/envoy-runtime/process.js';
import { scratchDir, send, sharedPki } from '../helpers/envoy-fixtures.js';
import { fixtureCertFile, makeFixtureCerts, oracleVerdicts } from '../helpers/x509-fixtures.js';

const pki = await sharedPki();
const scratch = scratchDir();
t.teardown(() => scratch.cleanup());
const certs = join(scratch.dir, 'certs');
await makeFixtureCerts(certs);
const expected = oracleVerdicts();

/** Answers every request with Envoy's reading of the client certificate: the subject, CN, then each O, a line each. */
const LUA = `
function envoy_on_request(h)
  local ssl = h:streamInfo():downstreamSslConnection()
  local lines = { ssl:subjectPeerCertificate() }
  local p = ssl:parsedSubjectPeerCertificate()
  if p then
    table.insert(lines, p:commonName())
    for _, o in ipairs(p:organizationName()) do table.insert(lines, o) end
  end
  h:respond({ [":status"] = "200" }, table.concat(lines, "\\n"))
end
`;

const bootstrap = {
  static_resources: {
    listeners: [
      {
        name: 'subject-probe',
        address: { socket_address: { address: '127.0.0.1', port_value: 0 } },
        filter_chains: [
          {
            transport_socket: {
              name: 'envoy.transport_sockets.tls',
              typed_config: {
                '@type': 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext',
                require_client_certificate: true,
                common_tls_context: {
                  tls_certificates: [
                    { certificate_chain: { filename: pki.gatewayCertFile }, private_key: { filename: pki.gatewayKeyFile } },
                  ],
                  validation_context: { trusted_ca: { filename: join(certs, 'client-ca.crt') } },
                },
              },
            },
            filters: [
              {
                name: 'envoy.filters.network.http_connection_manager',
                typed_config: {
                  '@type': 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
                  stat_prefix: 'probe',
                  route_config: {
                    virtual_hosts: [
                      { name: 'all', domains: ['*'], routes: [{ match: { prefix: '/' }, direct_response: { status: 404 } }] },
                    ],
                  },
                  http_filters: [
                    {
                      name: 'envoy.filters.http.lua',
                      typed_config: {
                        '@type': 'type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua',
                        default_source_code: { inline_string: LUA },
                      },
                    },
                    {
                      name: 'envoy.filters.http.router',
                      typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router' },
                    },
                  ],
                },
              },
            ],
          },
        ],
      },
    ],
  },
  admin: { address: { socket_address: { address: '127.0.0.1', port_value: 0 } } },
};
const envoy = await startEnvoy({ bootstrap });
t.teardown(() => envoy.stop());

/** Envoy's reading of one fixture's subject, or the TLS failure. */
async function envoyReads(name: string): Promise<{ subject: string; cn: string; orgs: string[] } | { failed: string }> {
  const certFile = fixtureCertFile(certs, name);
  try {
    const reply = await send(envoy.listenPort as number, pki, 'GET', '/', {}, { certFile, keyFile: join(certs, `${name}.key`) });
    const [subject = '', cn = '', ...orgs] = reply.body.split('\n');
    return { subject, cn, orgs };
  } catch (err) {
    return { failed: (err as NodeJS.ErrnoException).code ?? String(err) };
  }
}

const readings = new Map<string, Awaited<ReturnType<typeof envoyReads>>>();
for (const name of Object.keys(expected).sort()) readings.set(name, await envoyReads(name));
const universal = await envoyReads('universal');

t.test('what Envoy reads of each subject, against kube-apiserver', async (t) => {
  const agree: string[] = [];
  const differ: string[] = [];
  for (const [name, want] of Object.entries(expected).sort()) {
    const got = readings.get(name);
    if (got === undefined) continue;
    if ('failed' in got) {
      (want.authenticated ? differ : agree).push(name);
      t.comment(`${name}: TLS refused by Envoy (${got.failed}); kube-apiserver: ${want.authenticated ? 'accepts' : 'refuses'}`);
      continue;
    }
    const user = want.user;
    // A nil group list (Go) and an empty one are the same: no X-Remote-Group line.
    const same =
      user !== undefined &&
      want.authenticated &&
      got.cn === user.name &&
      JSON.stringify(got.orgs) === JSON.stringify(user.groups ?? []) &&
      user.uid === '';
    (same || (!want.authenticated && got.cn === '') ? agree : differ).push(name);
    t.comment(
      `${name}: Envoy subject ${JSON.stringify(got.subject)} → CN ${JSON.stringify(got.cn)}, O ${JSON.stringify(got.orgs)}; kube-apiserver → ${
        want.authenticated
          ? `user ${JSON.stringify(user?.name)}, uid ${JSON.stringify(user?.uid)}, groups ${JSON.stringify(user?.groups)}`
          : 'refused'
      }`,
    );
  }
  t.comment(`agree: ${agree.join(', ')}`);
  t.comment(`differ: ${differ.join(', ')}`);
  t.equal(agree.length + differ.length, Object.keys(expected).length, 'every fixture read');
  // The finding: Envoy's CN (the last, as Go's), its O values (escapes undone, UTF-8, multi-valued
  // RDNs) and its TLS refusals (an unknown CA, a serverAuth-only certificate) match kube-apiserver
  // on every fixture but those with Kubernetes' UID attribute (1.3.6.1.4.1.57683.2), which Envoy's
  // parsed subject does not read: kube-apiserver states it as the user's UID, and refuses two.
  t.same(differ, ['two-uids', 'uid'], 'on the fixtures, they part only where the subject carries a Kubernetes UID');
  const uid = readings.get('uid');
  t.match(
    uid && 'subject' in uid ? uid.subject : '',
    /(^|,)1\.3\.6\.1\.4\.1\.57683\.2=#/,
    "the UID shows in Envoy's subject string only as its OID and hex DER",
  );
});

t.test('a string type Go refuses: Envoy reads it as text', async (t) => {
  const der = new Uint8Array(new X509Certificate(readFileSync(join(certs, 'universal.crt'))).raw);
  t.throws(
    () => goSubject(subjectAttributes(der)),
    /unsupported string type/,
    "skewgate's Go-exact reader refuses the subject, as Go's x509 does",
  );
  t.match(universal, { cn: 'jane', orgs: ['dev-viewers', 'team-b'] }, 'Envoy completes the handshake and its parsed subject names jane');
});
