// Certificates on the fast path, in a REAL Envoy (docs/design.md, "Certificates on the fast path";
// issue 28, item 2): skewgate's parts in this process, two fake apiservers serving the same APIs,
// Envoy verifying client certificates against the Go-oracle fixtures' client CA. Each fixture
// certificate (test/fixtures/x509-identity) is presented for a list every apiserver serves, and
// what the apiserver was told is set against kube-apiserver's own reading (expected.json): where
// Envoy's Lua stated the identity (the request took a `fast-path-x509-` route, no ext_proc stream)
// it is exactly Go's, and it stated the plain fixtures while leaving every other to skewgate. A
// Lua-stated request no fast route takes (GET /version) is stated again by skewgate, not refused;
// a client that would resume its TLS session gets a full handshake, so the Lua states it. Then
// 160 certificates of random subjects (string types, white space, control characters, bad UTF-8,
// UIDs, multi-valued RDNs): every one the Lua stated, skewgate's verifier states the same. Last, a
// CA dropped from the bundle: the Lua states none of its certificates once skewgate reloads it.
import t from 'tap';
import { createHash } from 'node:crypto';
import https from 'node:https';
import type { TLSSocket } from 'node:tls';
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FakeApiServer, FakeCluster, BUILTINS_OLD } from '../../harness/fake/index.js';
import { parseConfig } from '../../src/config/load.js';
import { runningRoutesVersion } from '../../src/envoy-runtime/admin-routes.js';
import { FAST_PATH_ROUTE_PREFIX, FAST_PATH_X509 } from '../../src/envoy/fast-routes.js';
import { RDS_FILE } from '../../src/envoy/xds.js';
import { ClientIdentityVerifier, parsePemCertificates } from '../../src/identity/core/client-identity.js';
import { formatXfcc } from '../../src/identity/core/xfcc.js';
import { certificateNames } from '../../src/pki/der.js';
import { send, sharedPki } from '../helpers/envoy-fixtures.js';
import { xdsGateway } from '../helpers/xds-gateway.js';
import { waitMs } from '../helpers/waits.js';
import { fixtureCertFile, makeFixtureCerts, nameOf, oracleVerdicts, rawAttribute, resignedJane } from '../helpers/x509-fixtures.js';
import { seededRng } from '../load/run.js';

const X509_READ = `${FAST_PATH_ROUTE_PREFIX}${FAST_PATH_X509}read`;
const CREDENTIAL_HEADER = 'x-remote-extra-authentication.kubernetes.io%2fcredential-id';
const DEPLOYMENTS = '/apis/apps/v1/namespaces/default/deployments';
/** Discovery rounds (300 ms, 2 s timeout), Envoy's health checks (500 ms) and the CA bundle's check (5 s) bound what is awaited. */
const WAIT_MS = waitMs(300, 2000, 500) + 5000;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function until(what: string, check: () => Promise<boolean> | boolean, timeoutMs = WAIT_MS): Promise<void> {
  for (const deadline = Date.now() + timeoutMs; Date.now() < deadline; await sleep(50)) if (await check()) return;
  throw new Error(`timed out waiting for ${what}`);
}

const pki = await sharedPki();
const dir = mkdtempSync(join(tmpdir(), 'sg-cert-fast-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const certs = join(dir, 'certs');
await makeFixtureCerts(certs);
const expected = oracleVerdicts();
// The bundle skewgate and Envoy trust, a copy: the last test takes a CA out of it.
const bundle = join(dir, 'client-ca-bundle.crt');
copyFileSync(join(certs, 'client-ca.crt'), bundle);

const cluster = new FakeCluster();
const fakes = await Promise.all(
  ['kas-a', 'kas-b'].map(async (name) => {
    const s = new FakeApiServer({ name, pki, cluster, builtins: BUILTINS_OLD, host: '127.0.0.1' });
    await s.start();
    t.teardown(() => s.close());
    return s;
  }),
);
const xdsDir = join(dir, 'xds');
const envoyLog = join(dir, 'envoy.log');
const config = parseConfig(
  {
    apiservers: fakes.map((f) => ({ name: f.name, url: f.url, caFile: pki.caFile, credentials: { tokenFile: pki.tokenFile } })),
    discovery: { interval: '300ms', timeout: '2s', staleAfter: '3s' },
    extproc: { listen: `unix:${join(dir, 'extproc.sock')}`, messageTimeout: '1s' },
    envoy: {
      listen: { address: '127.0.0.1', port: 0 },
      admin: { address: '127.0.0.1', port: 0 },
      tls: { certFile: pki.gatewayCertFile, keyFile: pki.gatewayKeyFile, clientCaFile: bundle },
      upstreamClientCert: { certFile: pki.frontProxyClientCertFile, keyFile: pki.frontProxyClientKeyFile },
      xds: { directory: xdsDir },
      healthCheck: { interval: '500ms', timeout: '1s' },
    },
    log: { level: 'warn' },
  },
  join(dir, 'skewgate.yaml'),
  dir,
);
const { envoy, skewgate } = await xdsGateway(t, config, { logFile: envoyLog });
await skewgate.start();
const port = envoy.listenPort as number;

await until('certificate fast-path routes, and the Lua, running in Envoy', async () => {
  const text = readFileSync(join(xdsDir, RDS_FILE), 'utf8');
  const version = (JSON.parse(text) as { version_info: string }).version_info;
  return (
    text.includes(X509_READ) &&
    text.includes('LuaPerRoute') &&
    (await runningRoutesVersion(envoy.adminUrl, AbortSignal.timeout(1000))) === version
  );
});
await until('skewgate healthy in Envoy', async () =>
  /skewgate-extproc::[^\n]*::health_flags::healthy/.test(await (await fetch(`${envoy.adminUrl}/clusters`)).text()),
);

/** What the apiserver was told of one request, and the route Envoy took. */
interface Seen {
  readonly status: number | string;
  readonly route: string | undefined;
  readonly user: string | null;
  readonly groups: readonly string[];
  readonly uid: string | null;
  readonly credentialId: string | null;
}

let seq = 0;
/** Presents a certificate for a list every apiserver serves; the request is told apart by its label selector. */
async function present(certFile: string, keyFile: string, base = `${DEPLOYMENTS}?labelSelector=`): Promise<Seen> {
  const path = `${base}probe-${++seq}`;
  let status: number | string;
  try {
    status = (await send(port, pki, 'GET', path, {}, { certFile, keyFile })).status;
  } catch (err) {
    status = `tls: ${(err as NodeJS.ErrnoException).code ?? String(err)}`;
  }
  const req = fakes.flatMap((f) => f.requests).find((r) => r.path === path);
  // Node reads header bytes as Latin-1: the UTF-8 the apiserver gets, decoded.
  const lines = (name: string): string[] =>
    (req?.rawHeaders ?? []).filter(([k]) => k.toLowerCase() === name).map(([, v]) => Buffer.from(v, 'latin1').toString('utf8'));
  let route: string | undefined;
  if (typeof status === 'number')
    await until(`the access-log line of ${path}`, () => {
      route = accessLog().get(path);
      return route !== undefined;
    });
  return {
    status,
    route,
    user: lines('x-remote-user')[0] ?? null,
    groups: lines('x-remote-group'),
    uid: lines('x-remote-uid')[0] ?? null,
    credentialId: lines(CREDENTIAL_HEADER)[0] ?? null,
  };
}

function accessLog(): Map<string, string> {
  const routes = new Map<string, string>();
  for (const line of readFileSync(envoyLog, 'utf8').split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      const o = JSON.parse(line) as { path?: string; route?: string };
      if (o.path !== undefined) routes.set(o.path, o.route ?? '');
    } catch {
      // a line being written
    }
  }
  return routes;
}

/** A certificate file's DER, read without OpenSSL (which refuses some of the random subjects). */
const derOf = (certFile: string): Buffer => Buffer.from(readFileSync(certFile, 'utf8').replace(/-----[^-]+-----|\s/g, ''), 'base64');
const sha256 = (der: Buffer): string => createHash('sha256').update(der).digest('hex');
const fingerprint = (certFile: string): string => `X509SHA256=${sha256(derOf(certFile))}`;

await t.test(
  'the Go-oracle fixtures: Envoy states the plain ones, exactly as kube-apiserver reads them; the rest meets skewgate',
  async (t) => {
    const stated: string[] = [];
    for (const name of [...Object.keys(expected), 'universal'].sort()) {
      const certFile = fixtureCertFile(certs, name);
      const seen = await present(certFile, join(certs, `${name}.key`));
      const go = expected[name];
      t.comment(
        `${name}: ${String(seen.status)} via ${seen.route ?? '-'}; apiserver told ${JSON.stringify([seen.user, seen.groups, seen.uid])}`,
      );
      if (seen.route !== X509_READ) {
        t.notOk(
          seen.route?.startsWith(FAST_PATH_ROUTE_PREFIX) ?? false,
          `${name}: a certificate takes no fast route but the one for Envoy-stated ones`,
        );
        continue;
      }
      stated.push(name);
      t.same(
        [seen.status, seen.user, seen.groups, seen.uid, seen.credentialId],
        [200, go?.user?.name, go?.user?.groups ?? [], null, fingerprint(certFile)],
        `${name}: Envoy's Lua told the apiserver what kube-apiserver reads (${JSON.stringify(go?.user)})`,
      );
      t.equal(go?.user?.uid, '', `${name}: and kube-apiserver reads no UID`);
    }
    // Declined: no CN, a UID (one or two), a group with a leading space (no header keeps it), a
    // string type Go refuses, a chain through an intermediate. Refused in the handshake: a
    // serverAuth-only certificate, another CA's.
    t.same(stated, ['admin', 'jane', 'multivalued', 'no-eku', 'no-groups', 'tricky', 'two-cns', 'utf8'], 'the fixtures Envoy states');
  },
);

await t.test('a certificate the Lua stated that no fast route takes: skewgate states it again, from the header Envoy wrote', async (t) => {
  const certFile = fixtureCertFile(certs, 'jane');
  // Not a resource (no fast route is one): skewgate passes it on, as the certificate's user.
  const seen = await present(certFile, join(certs, 'jane.key'), '/version?probe=');
  t.equal(seen.status, 200, 'answered, not refused by the backstop for what nobody judged');
  t.notOk(seen.route?.startsWith(FAST_PATH_ROUTE_PREFIX) ?? true, `no fast route (${String(seen.route)})`);
  t.same(
    [seen.user, seen.credentialId],
    ['jane', fingerprint(certFile)],
    "the apiserver is told the certificate's user, as skewgate states it",
  );
});

await t.test(
  'a client that would resume its TLS session gets a full handshake on each connection: the Lua states it on every one',
  async (t) => {
    const certFile = fixtureCertFile(certs, 'jane');
    const agent = new https.Agent({
      keepAlive: false,
      maxCachedSessions: 10,
      ca: readFileSync(pki.caFile),
      cert: readFileSync(certFile),
      key: readFileSync(join(certs, 'jane.key')),
    });
    const reused: boolean[] = [];
    const routes: (string | undefined)[] = [];
    for (let i = 0; i < 3; i++) {
      const path = `${DEPLOYMENTS}?labelSelector=resume-${i}`;
      const status = await new Promise<number>((resolve, reject) => {
        const req = https.request(
          { host: '127.0.0.1', port, path, agent, servername: 'localhost', headers: { accept: 'application/json' } },
          (res) => {
            reused.push((res.socket as TLSSocket).isSessionReused());
            res.resume();
            res.on('end', () => resolve(res.statusCode ?? 0));
          },
        );
        req.on('error', reject);
        req.end();
      });
      t.equal(status, 200, `request ${i + 1}: answered`);
      let route: string | undefined;
      await until(`the access-log line of ${path}`, () => {
        route = accessLog().get(path);
        return route !== undefined;
      });
      routes.push(route);
    }
    agent.destroy();
    t.same(reused, [false, false, false], 'no connection resumed a session');
    t.same(routes, [X509_READ, X509_READ, X509_READ], 'so each request took the route for certificates Envoy stated');
  },
);

/**
 * A random subject: 1–4 RDNs of 1–2 attributes. Most values are plain (so that the Lua has much to
 * state); about one in four is of the kinds where readers part: another string type, white space
 * or a control character at an end or inside, bad UTF-8, a character PrintableString lacks.
 */
function randomSubject(rng: () => number): ReturnType<typeof nameOf> {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rng() * xs.length)] as T;
  // CN, O, OU, serialNumber; now and then Kubernetes' UID.
  const oid = (): string =>
    rng() < 0.04
      ? '1.3.6.1.4.1.57683.2'
      : pick(['2.5.4.3', '2.5.4.3', '2.5.4.3', '2.5.4.10', '2.5.4.10', '2.5.4.10', '2.5.4.11', '2.5.4.5']);
  const plain = ['a', 'jane', 'system:masters', 'x y', 'team-b', 'é', 'a,b', 'O=x+y'];
  const odd = [' ', '\t', '\u00a0', '\u2028', '\u3000', '*', '&', '"', '\u0000', '\u007f', '\ufeff', '\u0085', 'ü'];
  const badUtf8 = [
    [0xc0, 0x80],
    [0xed, 0xa0, 0x80],
    [0xf4, 0x90, 0x80, 0x80],
    [0xe0, 0x80],
  ];
  const value = (): Uint8Array => {
    const hostile = rng() < 0.25;
    const parts = Array.from({ length: 1 + Math.floor(rng() * 2) }, () => pick(plain));
    if (hostile) parts.splice(Math.floor(rng() * (parts.length + 1)), 0, pick(odd));
    const text = parts.join('');
    const tag = hostile
      ? pick([0x13, 0x0c, 0x16, 0x14, 0x1e, 0x02])
      : /^[A-Za-z0-9 '()+,\-./:=?]*$/.test(text) && rng() < 0.5
        ? 0x13
        : 0x0c;
    let body: Buffer =
      tag === 0x1e ? Buffer.from(text, 'utf16le').swap16() : tag === 0x0c ? Buffer.from(text, 'utf8') : Buffer.from(text, 'latin1');
    if (hostile && tag === 0x0c && rng() < 0.3) body = Buffer.concat([body, Buffer.from(pick(badUtf8))]);
    if (tag === 0x02) body = Buffer.from([1]);
    return new Uint8Array([tag, body.length, ...body]);
  };
  return nameOf(
    Array.from({ length: 1 + Math.floor(rng() * 4) }, () =>
      Array.from({ length: 1 + Math.floor(rng() * 2) }, () => rawAttribute(oid(), value())),
    ),
  );
}

await t.test('random subjects: every certificate Envoy states, skewgate states alike', async (t) => {
  const rng = seededRng(28);
  const verifier = new ClientIdentityVerifier({ cas: parsePemCertificates(readFileSync(bundle, 'utf8')), source: bundle });
  let stated = 0;
  const wrong: string[] = [];
  const tally = new Map<string, number>();
  const N = 160;
  for (let i = 0; i < N; i++) {
    const name = `random-${i}`;
    resignedJane(certs, name, () => randomSubject(rng));
    const certFile = join(certs, `${name}.crt`);
    const subject = Buffer.from(certificateNames(new Uint8Array(derOf(certFile))).subject).toString('hex');
    const seen = await present(certFile, join(certs, `${name}.key`));
    const outcome =
      seen.route === X509_READ
        ? 'stated by Envoy'
        : typeof seen.status === 'string'
          ? 'refused in the handshake'
          : `${seen.status} via skewgate`;
    tally.set(outcome, (tally.get(outcome) ?? 0) + 1);
    if (seen.route !== X509_READ) continue;
    stated++;
    // The XFCC Envoy would send skewgate for it (skewgate's verifier: test/unit/identity.test.ts).
    const ours = verifier.state(formatXfcc([readFileSync(certFile, 'utf8')], sha256(derOf(certFile))), Date.now());
    const want = ours.kind === 'stated' ? [200, ours.identity.user, ours.identity.groups, ours.identity.uid, fingerprint(certFile)] : ours;
    if (JSON.stringify([seen.status, seen.user, seen.groups, seen.uid, seen.credentialId]) !== JSON.stringify(want))
      wrong.push(`${name} (subject DER ${subject}): Envoy told ${JSON.stringify(seen)}, skewgate ${JSON.stringify(want)}`);
  }
  t.comment(`${N} random subjects: ${[...tally].map(([k, n]) => `${k} ${n}`).join(', ')}`);
  t.same(wrong, [], 'no certificate Envoy stated differently from skewgate');
  t.ok(stated >= N / 10, `the random subjects exercise the Lua: ${stated} of ${N} stated (≥ ${N / 10})`);
});

await t.test('a CA taken out of the bundle: once skewgate reloads it, Envoy states none of its certificates', async (t) => {
  const jane = (): Promise<Seen> => present(join(certs, 'jane.crt'), join(certs, 'jane.key'));
  t.equal((await jane()).route, X509_READ, 'before: jane is stated by Envoy');
  const before = readFileSync(join(xdsDir, RDS_FILE), 'utf8');
  copyFileSync(join(certs, 'other-ca.crt'), bundle);
  await until('routes rewritten for the new bundle', async () => {
    const text = readFileSync(join(xdsDir, RDS_FILE), 'utf8');
    const version = (JSON.parse(text) as { version_info: string }).version_info;
    return text !== before && (await runningRoutesVersion(envoy.adminUrl, AbortSignal.timeout(1000))) === version;
  });
  const after = await jane();
  t.not(
    after.route,
    X509_READ,
    `after: jane's certificate takes no certificate fast route (${String(after.status)} via ${after.route ?? '-'})`,
  );
  t.not(after.status, 200, 'and the apiserver is not told jane');
});
