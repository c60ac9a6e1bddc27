// Rotation without a restart against real kube-apiservers (issue 14, item 3): etcd, a KUBE_OLD and a
// KUBE_NEW apiserver (only the new one serves the skewed resource), one gateway (Envoy rendered by
// skewgate with envoy.xds, so its certificates come through file-watched SDS, and skewgate as its
// own process), and a steady open-loop load of token and client-certificate clients (creates,
// gets, lists of the skewed and a common resource, plus watches). The certificate client opens a
// new connection for every request, so that every one of them is a TLS handshake against what is
// on disk at that moment. Renewed in place, as `kubeadm certs renew` does (same paths, new key
// pairs, the same CAs), one after the other:
//   1. the gateway's serving certificate (the certificate first, the key only once Envoy has been
//      made to load the pair that does not match and has refused it: its SDS key_rotation_failed
//      counter went up, and the old certificate is still served);
//   2. the front-proxy client certificate Envoy presents to the apiservers;
//   3. the client CA bundle, a second CA appended; a certificate of that CA must then authenticate;
//   4. the apiservers' own serving certificate (the one Envoy and skewgate verify upstream).
// Envoy keeps the connections it has (an SDS update drains nothing): after 2 and 4 a burst of
// concurrent watches makes it open new ones to the apiservers, counted from its upstream_cx_total.
// Claims: the same Envoy and skewgate processes throughout; each renewal in use, the first three
// after skewgate's log announced it (Envoy's own watch misses a file written in place); not one
// request of the load failed; no watch interrupted; no acknowledged write lost. How soon each was
// in use is a figure in bench/RESULTS.md, not a verdict. Fails, never skips, when a part or root
// (alias addresses) is missing. Uses two alias addresses of its lab slot (removed afterwards).
import t from 'tap';
import { X509Certificate } from 'node:crypto';
import { copyFile, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { connect } from 'node:tls';
import { request } from 'undici';
import type { ApiServerSpec } from '../../harness/lab/flags.js';
import { removeLoopbackAlias } from '../../harness/lab/net.js';
import { claimLabSlot } from '../../harness/lab/slots.js';
import { FRONT_PROXY_CLIENT_CN, LAB_SANS } from '../../harness/lab/pki.js';
import { render, writeClusterPart } from '../../bench/cluster-results.js';
import { FRONT_PROXY_SUFFIX } from '../../src/envoy/clusters.js';
import { caSecretName, certificateSecretName } from '../../src/envoy/tls-material.js';
import { issueCert, type KeyPairFiles } from '../../harness/openssl.js';
import { LoadHttp } from '../load/http.js';
import { LoadRun, freeLoopbackPort, seededRng } from '../load/run.js';
import type { RequestRecord } from '../load/types.js';
import { ensureNamespace, listFinal } from '../load/verify.js';
import { collectionPath, configMaps, labNamespace, mutatingAdmissionPolicies, type Workload } from '../load/workload.js';
import { withLoadLab } from '../helpers/load-lab.js';
import { jsonLinesSince, linesSince, logMark } from '../helpers/log-since.js';

const RATE_PER_ARM = 10;
const ARMS = ['token', 'cert'] as const;
const GATEWAY = 'rotation';
/**
 * How long to wait for a renewal skewgate passes on before calling it never picked up: skewgate
 * stats the files every SECRET_TICK_MS (the SecretRotator's default) and makes Envoy re-read a
 * changed secret on that tick and the next two; six ticks leave room for a late tick. A wait limit
 * (a renewal not taken up by then is not being taken up), not a latency verdict: how soon each
 * renewal was in use is reported in bench/RESULTS.md.
 */
const SECRET_TICK_MS = 5000;
const PICKUP_WAIT_MS = 6 * SECRET_TICK_MS;
/** kube-apiserver reloads --tls-cert-file on a file event, and at least once a minute: its own wait limit. */
const APISERVER_PICKUP_MS = 65_000;
const DWELL_MS = 4000;
/** Requests of each arm the open loop (RATE_PER_ARM/s) must have started in each DWELL_MS after a renewal: an eighth of what it schedules. */
const MIN_PER_DWELL = (RATE_PER_ARM * DWELL_MS) / 1000 / 8;
/** skewgate's log line when it makes Envoy re-read a secret whose files changed (src/envoy-runtime/secret-rotation.ts). */
const REREAD_MSG = 'certificate files changed; Envoy reads them again';
/**
 * Concurrent watches that make Envoy open new apiserver connections: its HTTP/1.1 pool holds fewer
 * idle ones than that (the second burst is twice the first, which leaves that many idle).
 */
const BURSTS = [24, 48] as const;
const SSR_PATH = '/apis/authentication.k8s.io/v1/selfsubjectreviews';
const NEW_CA_USER = 'kim';
const NEW_CA_GROUP = 'rotation-testers';

const slot = claimLabSlot();
const SERVERS = [
  { name: 'kas-41', ip: slot.alias(1), version: 'old' },
  { name: 'kas-42', ip: slot.alias(2), version: 'new' },
] as const;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const serialOf = async (file: string): Promise<string> => new X509Certificate(await readFile(file)).serialNumber.toUpperCase();

/** The serial of the certificate a new TLS connection to host:port is shown (verified against `ca`). */
function servedSerial(host: string, port: number, servername: string, ca: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect({ host, port, servername, ca }, () => {
      resolve(s.getPeerCertificate().serialNumber.toUpperCase());
      s.end();
    });
    s.setTimeout(2000, () => s.destroy(new Error('timeout')));
    s.once('error', reject);
  });
}

/** Polls `check` every 250 ms until it holds; ms from `fromMs` to then, or null after `limitMs`. */
async function until(check: () => Promise<boolean>, fromMs: number, limitMs: number): Promise<number | null> {
  while (Date.now() - fromMs < limitMs) {
    if (await check().catch(() => false)) return Date.now() - fromMs;
    await sleep(250);
  }
  return null;
}

t.setTimeout(6 * 60_000);
t.teardown(() => Promise.all(SERVERS.map((s) => removeLoopbackAlias(s.ip))));

t.test('certificates renewed in place under a mixed token and client-certificate load', async (t) => {
  await withLoadLab(
    'certificate-rotation',
    { connections: 64, addresses: slot },
    async ({ parts: { versions: v }, dir, session, lab, http, clock, progress, runSeconds, track }) => {
      const pki = lab.pki;
      // The files that are renewed: copies, so that the lab's own set stays as it was made.
      const liveDir = join(dir, 'live');
      await mkdir(liveDir, { recursive: true });
      const live = (name: string): string => join(liveDir, name);
      await Promise.all(
        [
          [pki.gatewayCertFile, 'gateway.crt'],
          [pki.gatewayKeyFile, 'gateway.key'],
          [pki.frontProxyClientCertFile, 'front-proxy-client.crt'],
          [pki.frontProxyClientKeyFile, 'front-proxy-client.key'],
          [pki.caFile, 'client-ca.crt'],
          [pki.serverCertFile, 'apiserver.crt'],
          [pki.serverKeyFile, 'apiserver.key'],
        ].map(([from, to]) => copyFile(from as string, live(to as string))),
      );
      // What the renewals write: new key pairs from the same CAs, and a second client CA.
      const issued = join(dir, 'renewed');
      await mkdir(issued, { recursive: true });
      const ca: KeyPairFiles = { certFile: pki.caFile, keyFile: pki.caKeyFile };
      const frontProxyCa: KeyPairFiles = { certFile: pki.frontProxyCaFile, keyFile: join(pki.dir, 'front-proxy-ca.key') };
      const sans = [...LAB_SANS];
      const renewedGateway = await issueCert({ dir: issued, name: 'gateway', subject: '/CN=skewgate-gateway', usage: 'server', ca, sans });
      const renewedFrontProxy = await issueCert({
        dir: issued,
        name: 'front-proxy-client',
        subject: `/CN=${FRONT_PROXY_CLIENT_CN}`,
        usage: 'client',
        ca: frontProxyCa,
      });
      const renewedApiserver = await issueCert({
        dir: issued,
        name: 'apiserver',
        subject: '/CN=kube-apiserver',
        usage: 'server',
        ca,
        sans,
      });
      const secondCa = await issueCert({
        dir: issued,
        name: 'client-ca-2',
        subject: '/CN=skewgate-rotation-second-client-ca',
        usage: 'ca',
      });
      const fromSecondCa = await issueCert({
        dir: issued,
        name: NEW_CA_USER,
        subject: `/O=${NEW_CA_GROUP}/CN=${NEW_CA_USER}`,
        usage: 'client',
        ca: secondCa,
      });

      const spec = (s: (typeof SERVERS)[number]): ApiServerSpec => ({
        name: s.name,
        version: s.version === 'old' ? v.kubeOld : v.kubeNew,
        ip: s.ip,
        port: 6443,
        placement: 'alias',
        // A later flag wins: the renewable copy instead of the lab's serving pair.
        extraArgs: [`--tls-cert-file=${live('apiserver.crt')}`, `--tls-private-key-file=${live('apiserver.key')}`],
      });
      await Promise.all(SERVERS.map((s) => session.start(spec(s))));
      const gw = await lab.startGateway({
        name: GATEWAY,
        withSkewgate: true,
        xds: true,
        port: await freeLoopbackPort(),
        tlsFiles: {
          gatewayCertFile: live('gateway.crt'),
          gatewayKeyFile: live('gateway.key'),
          clientCaFile: live('client-ca.crt'),
          frontProxyClientCertFile: live('front-proxy-client.crt'),
          frontProxyClientKeyFile: live('front-proxy-client.key'),
        },
      });
      const gwPort = Number(new URL(gw.url).port);
      const caPem = await readFile(pki.caFile, 'utf8');
      const pids = async (): Promise<Record<string, number | null>> => {
        const rows = await lab.status();
        const pid = (name: string): number | null => rows.find((r) => r.name === name && r.alive)?.pid ?? null;
        return { envoy: pid(`envoy-${GATEWAY}`), skewgate: pid(`skewgate-${GATEWAY}`) };
      };
      const pidsBefore = await pids();
      const workload: Workload = { skewed: mutatingAdmissionPolicies, common: configMaps, namespace: labNamespace };
      const direct = lab.apiServerUrl(SERVERS[0].name);
      for (const arm of ARMS) await ensureNamespace(session.direct, direct, labNamespace(arm));

      // kubeadm's kubelets, scheduler and controller-manager authenticate with client certificates.
      const certHttp = new LoadHttp({
        caFile: pki.caFile,
        clientCert: { certFile: pki.adminCertFile, keyFile: pki.adminKeyFile },
        connections: 64,
        freshConnections: true,
      });
      const burstHttp = new LoadHttp({
        caFile: pki.caFile,
        clientCert: { certFile: pki.adminCertFile, keyFile: pki.adminKeyFile },
        connections: BURSTS[1],
        timeoutMs: 15_000,
      });
      /**
       * Sum of Envoy's upstream_cx_total over the clusters that present the front-proxy certificate
       * (where skewgate routes a request it states the identity of), over every apiserver.
       */
      const upstreamConnections = async (): Promise<number> => {
        const text = await (await request(`${gw.envoyAdminUrl}/stats?filter=upstream_cx_total$`)).body.text();
        let sum = 0;
        for (const m of text.matchAll(/^cluster\.([^:]+)\.upstream_cx_total: (\d+)$/gm))
          if ((m[1] as string).endsWith(FRONT_PROXY_SUFFIX)) sum += Number(m[2]);
        return sum;
      };
      /** n concurrent certificate watches of 2 s: statuses, and how many apiserver connections Envoy opened meanwhile. */
      const burst = async (n: number): Promise<{ statuses: number[]; opened: number }> => {
        const before = await upstreamConnections();
        const path = `${collectionPath(configMaps, labNamespace('cert'))}?watch=1&timeoutSeconds=2`;
        const statuses = await Promise.all(
          Array.from({ length: n }, () =>
            burstHttp.send('GET', `${gw.url}${path}`).then(
              (r) => r.status,
              () => 0,
            ),
          ),
        );
        return { statuses, opened: (await upstreamConnections()) - before };
      };
      const envoyCerts = async (): Promise<string> => (await (await request(`${gw.envoyAdminUrl}/certs`)).body.text()).toUpperCase();
      /** SelfSubjectReview through the gateway on a fresh connection with this certificate: status and username. */
      const whoAmI = async (c: KeyPairFiles): Promise<{ status: number; user?: string; groups?: string[] }> => {
        const h = new LoadHttp({ caFile: pki.caFile, clientCert: c, connections: 1, timeoutMs: 5000 });
        try {
          const res = await h.send('POST', `${gw.url}${SSR_PATH}`, { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' });
          const info = (JSON.parse(res.text) as { status?: { userInfo?: { username?: string; groups?: string[] } } }).status?.userInfo;
          return {
            status: res.status,
            ...(info?.username ? { user: info.username } : {}),
            ...(info?.groups ? { groups: info.groups } : {}),
          };
        } catch {
          return { status: 0 };
        } finally {
          await h.close().catch(() => undefined);
        }
      };

      interface Rotation {
        readonly what: string;
        readonly pickupMs: number | null;
        readonly proof: string;
        /**
         * For a renewal skewgate passes on: the SDS secret, the serial its announcement must name
         * (the renewed certificate, or a bundle's first), and the serials its log announced for
         * that secret after the write.
         */
        readonly secret?: string;
        readonly serial?: string;
        readonly announced?: readonly string[];
      }
      const rotations: Rotation[] = [];
      /** After each renewal was in use, the load ran on with it: the span of that dwell (clock ms). */
      const dwells: { what: string; fromMs: number; toMs: number }[] = [];
      let servedBefore = '';
      let servedHalfWritten = '';
      /** Envoy's refusals of the gateway pair's SDS secret before the renewed certificate was written, and once the wait for one ended. */
      let refusedBefore = 0;
      let refusedAfter = 0;
      /** Envoy's log lines naming the mismatch, from the certificate's write to the refusal. */
      let mismatchLines = 0;
      const bursts: { after: string; statuses: number[]; opened: number }[] = [];
      let newCaBefore: Awaited<ReturnType<typeof whoAmI>> = { status: -1 };
      let newCaAfter: Awaited<ReturnType<typeof whoAmI>> = { status: -1 };
      const run = track(
        new LoadRun({
          arms: [
            { arm: 'token', baseUrl: gw.url },
            { arm: 'cert', baseUrl: gw.url, http: certHttp },
          ],
          http,
          workload,
          ratePerSec: RATE_PER_ARM,
          clock,
          rng: seededRng(3),
        }),
      );
      /** A renewed certificate written over live/<name>.crt, as kubeadm writes it first. */
      const writeCert = async (name: string, renewed: KeyPairFiles): Promise<void> =>
        writeFile(live(`${name}.crt`), await readFile(renewed.certFile));
      /** Then the key; returns when it was written. */
      const writeKey = async (name: string, renewed: KeyPairFiles): Promise<number> => {
        await writeFile(live(`${name}.key`), await readFile(renewed.keyFile));
        return Date.now();
      };
      /** Both, the key 300 ms after the certificate (meanwhile the pair does not match: the last good one must be kept). */
      const renewInPlace = async (name: string, renewed: KeyPairFiles): Promise<number> => {
        await writeCert(name, renewed);
        await sleep(300);
        return writeKey(name, renewed);
      };
      const skewgateLog = lab.logFile(`skewgate-${GATEWAY}`);
      /** The serials skewgate's log announced for `secret` after `mark` (it logs once the re-read is triggered). */
      const announcedSince = async (mark: number, secret: string): Promise<string[]> =>
        (await jsonLinesSince(skewgateLog, mark, REREAD_MSG))
          .filter((o) => o['secret'] === secret)
          .map((o) => String(o['serial'] ?? '').toUpperCase());
      /** Envoy's counter from its admin /stats; 0 before it exists. */
      const envoyCounter = async (name: string): Promise<number> => {
        const text = await (await request(`${gw.envoyAdminUrl}/stats?filter=${encodeURIComponent(`^${name}$`)}`)).body.text();
        const m = new RegExp(`^${name.replace(/[.]/g, '\\.')}: (\\d+)$`, 'm').exec(text);
        return m ? Number(m[1]) : 0;
      };
      /** Records a renewal, reports the load since the last one, and lets the load run on. */
      let phaseFrom = clock();
      const settle = async (r: Rotation): Promise<void> => {
        rotations.push(r);
        progress(`${r.what}: in use after ${r.pickupMs ?? 'never'} ms; ${run.progress(phaseFrom)}`);
        const fromMs = clock();
        phaseFrom = fromMs;
        await sleep(DWELL_MS);
        dwells.push({ what: r.what, fromMs, toMs: clock() });
      };
      /** After a pickup: the serials skewgate announced for `secret` since `mark` (waits a tick for the line, which may trail Envoy's read). */
      const announcedAfter = async (mark: number, secret: string): Promise<string[]> => {
        let got: string[] = [];
        await until(async () => (got = await announcedSince(mark, secret)).length > 0, Date.now(), SECRET_TICK_MS);
        return got;
      };
      const loadFrom = clock();
      let loadTo = loadFrom;
      try {
        progress(`steady: ${RATE_PER_ARM} req/s per arm (${ARMS.join(', ')}) through ${gw.url}`);
        run.start();
        await sleep(DWELL_MS);

        // 1. The gateway's serving certificate; kubeadm writes the pair one file after the other.
        // The key is written only once Envoy has been made to load the certificate beside the old
        // key and has refused it (its SDS secret's key_rotation_failed counter), so that the old
        // pair is shown to be still served after a refused load, not merely before any load.
        {
          const secret = certificateSecretName({ certFile: live('gateway.crt'), keyFile: live('gateway.key') });
          const refusedStat = `sds.${secret}.key_rotation_failed`;
          const want = await serialOf(renewedGateway.certFile);
          const served = (): Promise<string> => servedSerial('127.0.0.1', gwPort, 'localhost', caPem);
          servedBefore = await served();
          refusedBefore = await envoyCounter(refusedStat);
          const envoyLog = lab.logFile(`envoy-${GATEWAY}`);
          const envoyMark = await logMark(envoyLog);
          await writeCert('gateway', renewedGateway);
          await until(async () => (refusedAfter = await envoyCounter(refusedStat)) > refusedBefore, Date.now(), PICKUP_WAIT_MS);
          servedHalfWritten = await served().catch((err: unknown) => `no handshake: ${(err as Error).message}`);
          // Envoy's reason, logged beside the counter (at warn, the lab's level).
          await until(
            async () =>
              (mismatchLines = (await linesSince(envoyLog, envoyMark)).filter((l) => l.includes('KEY_VALUES_MISMATCH')).length) > 0,
            Date.now(),
            SECRET_TICK_MS,
          );
          const mark = await logMark(skewgateLog);
          const at = await writeKey('gateway', renewedGateway);
          const ms = await until(async () => (await served()) === want, at, PICKUP_WAIT_MS);
          await settle({
            what: 'gateway serving certificate',
            pickupMs: ms,
            proof: `a new TLS connection to the gateway is shown serial ${want}`,
            secret,
            serial: want,
            announced: await announcedAfter(mark, secret),
          });
        }

        // 2. The front-proxy client certificate, presented by Envoy on its next apiserver connections.
        {
          const secret = certificateSecretName({ certFile: live('front-proxy-client.crt'), keyFile: live('front-proxy-client.key') });
          const want = await serialOf(renewedFrontProxy.certFile);
          const mark = await logMark(skewgateLog);
          const at = await renewInPlace('front-proxy-client', renewedFrontProxy);
          const ms = await until(async () => (await envoyCerts()).includes(want), at, PICKUP_WAIT_MS);
          bursts.push({ after: 'front-proxy client certificate', ...(await burst(BURSTS[0])) });
          await settle({
            what: 'front-proxy client certificate',
            pickupMs: ms,
            proof: `Envoy's /certs lists serial ${want}`,
            secret,
            serial: want,
            announced: await announcedAfter(mark, secret),
          });
        }

        // 3. The client CA bundle: a second CA appended in place (skewgate names the bundle by its first certificate).
        {
          const secret = caSecretName(live('client-ca.crt'));
          newCaBefore = await whoAmI(fromSecondCa);
          const mark = await logMark(skewgateLog);
          const at = Date.now();
          await writeFile(live('client-ca.crt'), `${caPem.trimEnd()}\n${await readFile(secondCa.certFile, 'utf8')}`);
          const ms = await until(async () => (newCaAfter = await whoAmI(fromSecondCa)).user === NEW_CA_USER, at, PICKUP_WAIT_MS);
          await settle({
            what: 'client CA bundle (second CA appended)',
            pickupMs: ms,
            proof: `a certificate of the new CA is answered as user ${newCaAfter.user ?? '?'} by SelfSubjectReview`,
            secret,
            serial: await serialOf(pki.caFile),
            announced: await announcedAfter(mark, secret),
          });
        }

        // 4. The apiservers' serving certificate, which Envoy and skewgate verify upstream (the apiservers' own reload).
        {
          const want = await serialOf(renewedApiserver.certFile);
          const at = await renewInPlace('apiserver', renewedApiserver);
          const served = async (): Promise<boolean> =>
            (await Promise.all(SERVERS.map((s) => servedSerial(s.ip, 6443, 'kubernetes', caPem)))).every((s) => s === want);
          const ms = await until(served, at, APISERVER_PICKUP_MS);
          bursts.push({ after: "apiservers' serving certificate", ...(await burst(BURSTS[1])) });
          await settle({
            what: "apiservers' serving certificate",
            pickupMs: ms,
            proof: `both apiservers show serial ${want} on a new connection (their own reload)`,
          });
        }
        loadTo = clock();
        progress(`stopping the load: ${run.progress()}`);
        await run.stop();
      } finally {
        await certHttp.close().catch(() => undefined);
        await burstHttp.close().catch(() => undefined);
      }
      const pidsAfter = await pids();

      // ---- the numbers ----
      const reqs = run.log.requests;
      // Failed: no answer, or anything but 2xx. Every get is of an acknowledged object and every
      // skewed request has a capable apiserver ready all along, so a 404 is a failure too.
      const failed = (r: RequestRecord): boolean => r.status === null || r.status < 200 || r.status >= 300;
      const failures = reqs.filter(failed);
      const ordinary = reqs.filter((r) => r.op !== 'watch');
      const interrupted = run.log.watch.filter((w) => w.type === 'END');
      // Listed from kas-42: the only one that serves both resources.
      const final = await listFinal(session.direct, lab.apiServerUrl(SERVERS[1].name), workload, ARMS);
      const stored = new Map<string, number>();
      for (const o of final)
        stored.set(`${o.arm}\u0000${o.kind}\u0000${o.name}`, (stored.get(`${o.arm}\u0000${o.kind}\u0000${o.name}`) ?? 0) + 1);
      const acked = reqs.filter((r) => r.op === 'create' && !failed(r) && r.name !== undefined);
      const lost = acked.filter((r) => stored.get(`${r.arm}\u0000${r.kind}\u0000${r.name ?? ''}`) !== 1);
      const perArm = ARMS.map((arm) => {
        const rs = ordinary.filter((r) => r.arm === arm);
        return [
          arm,
          String(rs.length),
          String(rs.filter((r) => r.op === 'create').length),
          String(rs.filter((r) => r.kind === 'skewed').length),
          String(rs.filter(failed).length),
          String(interrupted.filter((w) => w.arm === arm).length),
        ];
      });
      const s = (ms: number | null): string => (ms === null ? '**never**' : ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`);
      const md = [
        `### Certificate rotation without a restart (test/cluster/certificate-rotation.test.ts)`,
        '',
        `**Method.** etcd and two kube-apiservers (kas-41 v${v.kubeOld}, kas-42 v${v.kubeNew}, the only one serving \`${workload.skewed.group}/${workload.skewed.version} ${workload.skewed.resource}\`; alias addresses ${SERVERS.map((s) => s.ip).join(', ')}, port 6443), one gateway: Envoy rendered by skewgate with \`envoy.xds\` (every certificate, key and CA bundle through a file-watched SDS secret) and skewgate as its own process. Two arms through it, each an open loop of ${RATE_PER_ARM} req/s (creates, gets of acknowledged objects, lists; of the skewed resource and of configmaps) plus a watch of each: **token** (the admin's bearer token, kept-alive connections) and **cert** (the admin's client certificate, stated by skewgate as front-proxy identity; a new connection, so a new TLS handshake, for every request). Clients never retry. Renewed in place one after the other, as \`kubeadm certs renew\` does (same paths, new key pairs, same CAs), ${DWELL_MS / 1000} s apart: the gateway's serving certificate (the certificate, then the key once Envoy had been made to load the mismatched pair and had refused it: its SDS secret's \`key_rotation_failed\` counter went up), the front-proxy client certificate Envoy presents upstream and the apiservers' serving certificate (each the key 300 ms after the certificate), the client CA bundle (a second CA appended). *In use after*: from the key's write (the bundle's); a figure, not a verdict: the test waits up to ${PICKUP_WAIT_MS / 1000} s (${PICKUP_WAIT_MS / SECRET_TICK_MS} of skewgate's ${SECRET_TICK_MS / 1000} s ticks), ${APISERVER_PICKUP_MS / 1000} s for the apiservers' own reload. Envoy keeps its open connections across an SDS update; after the front-proxy and the apiserver renewals ${BURSTS.join(' and ')} concurrent certificate watches make it open new apiserver connections. **Failed**: no answer or anything but 2xx (a 404 included: every get is of an acknowledged object, and the skewed resource's apiserver is ready throughout).`,
        '',
        render({
          headers: ['Renewed in place', 'In use after', 'Seen as'],
          rows: rotations.map((r) => [r.what, s(r.pickupMs), r.proof]),
        }),
        '',
        render({
          headers: ['Arm', 'Requests', 'Creates', 'Skewed', 'Failed', 'Watches interrupted'],
          rows: perArm,
        }),
        '',
        `New apiserver connections Envoy opened for the bursts (${bursts.map((b) => `${b.statuses.length} watches, ${b.statuses.filter((x) => x === 200).length} answered 200`).join('; ')}): ${bursts.map((b) => `${b.opened} after the ${b.after}`).join(', ')}. While the renewed serving certificate sat beside the old key, Envoy refused to load the pair ${refusedAfter - refusedBefore} time(s) (its \`key_rotation_failed\` counter) and the gateway then served serial ${servedHalfWritten} (before: ${servedBefore}). A certificate of the new client CA before the bundle changed: ${newCaBefore.status === 0 ? 'refused in the TLS handshake' : `status ${newCaBefore.status}`}; after: user \`${newCaAfter.user ?? '?'}\`, groups ${(newCaAfter.groups ?? []).map((g) => `\`${g}\``).join(', ')}. Envoy pid ${pidsBefore.envoy ?? '?'} → ${pidsAfter.envoy ?? '?'}, skewgate pid ${pidsBefore.skewgate ?? '?'} → ${pidsAfter.skewgate ?? '?'}. ${acked.length} acknowledged creates checked straight on kas-42, ${lost.length} lost or stored twice. Failed requests: ${failures.length === 0 ? 'none' : failures.map((r) => `${r.arm} ${r.kind} ${r.op} ${r.status ?? r.error ?? '?'} ${r.detail ?? ''}`.trim()).join('; ')}.`,
        '',
        `Load ${((loadTo - loadFrom) / 1000).toFixed(0)} s, run time ${runSeconds().toFixed(0)} s.`,
      ].join('\n');
      await writeClusterPart('certificate-rotation', md);
      t.comment(md);
      progress('results written to bench/RESULTS.md');

      // ---- the claims ----
      t.ok(pidsBefore.envoy !== null && pidsBefore.skewgate !== null, 'Envoy and skewgate running before the renewals');
      t.same(pidsAfter, pidsBefore, 'the same Envoy and skewgate processes throughout (no restart)');
      t.equal(rotations.length, 4, 'four renewals made');
      for (const r of rotations) {
        const limit = r.secret === undefined ? APISERVER_PICKUP_MS : PICKUP_WAIT_MS;
        t.ok(r.pickupMs !== null, `${r.what}: in use (${s(r.pickupMs)} after it was written; waited up to ${limit / 1000} s)`);
        // Envoy's own watch sees only moves into its folder; a file written in place is passed on by skewgate.
        if (r.secret !== undefined)
          t.ok(
            r.announced?.includes(r.serial ?? ''),
            `${r.what}: skewgate announced that Envoy re-reads ${r.secret} (serial ${r.serial}) after the write (announced: ${r.announced?.join(', ') || 'nothing'})`,
          );
      }
      t.equal(servedBefore, await serialOf(pki.gatewayCertFile), 'before: the gateway serves the certificate it started with');
      // The old pair still served after a load of the mismatched one was attempted and refused, not merely before any load.
      t.ok(
        refusedAfter > refusedBefore,
        `the renewed certificate beside the old key: Envoy tried to load the pair and refused it (key_rotation_failed ${refusedBefore} → ${refusedAfter})`,
      );
      t.ok(
        mismatchLines > 0,
        `because the key does not match the certificate: ${mismatchLines} Envoy log line(s) name KEY_VALUES_MISMATCH`,
      );
      t.equal(servedHalfWritten, servedBefore, 'after that refusal, the old pair still served');
      t.not(newCaBefore.user, NEW_CA_USER, 'before the bundle changed, a certificate of the new CA is not stated');
      t.equal(newCaAfter.status, 201, 'after: its SelfSubjectReview is answered');
      t.equal(newCaAfter.user, NEW_CA_USER, `after: it authenticates as ${NEW_CA_USER}`);
      t.ok(newCaAfter.groups?.includes(NEW_CA_GROUP), `after: with its group ${NEW_CA_GROUP}`);
      for (const b of bursts) {
        t.same(
          b.statuses.filter((x) => x !== 200),
          [],
          `after the ${b.after}: every burst watch answered 200`,
        );
        t.ok(b.opened > 0, `after the ${b.after}: Envoy opened ${b.opened} new apiserver connections, with the renewed material`);
      }
      // The load ran with each renewal in use: requests of both arms started in every dwell (and none failed, below).
      t.equal(dwells.length, rotations.length, 'a dwell after each renewal');
      for (const d of dwells)
        for (const arm of ARMS) {
          const n = ordinary.filter((r) => r.arm === arm && r.startMs >= d.fromMs && r.startMs < d.toMs).length;
          t.ok(n >= MIN_PER_DWELL, `${arm} arm: ${n} requests (at least ${MIN_PER_DWELL}) with the renewed ${d.what} in use`);
        }
      t.same(
        failures.map(
          (r) =>
            `${r.arm} ${r.kind} ${r.op} ${r.status ?? r.error ?? '?'} ${r.detail ?? ''} at ${((r.startMs - loadFrom) / 1000).toFixed(1)} s`,
        ),
        [],
        'not one request of the load failed',
      );
      t.same(
        interrupted.map((w) => `${w.arm} ${w.kind} ${w.detail ?? ''}`),
        [],
        'no watch interrupted',
      );
      t.ok(acked.length > 50, `${acked.length} acknowledged creates checked`);
      t.same(
        lost.map((r) => `${r.arm} ${r.kind} ${r.name ?? ''}`),
        [],
        'every acknowledged create stored once',
      );
    },
  );
});
