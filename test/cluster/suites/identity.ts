// Identity at the edge (issue 5, docs/design.md, invariant 3) against real kube-apiservers (suite
// of test/cluster/mixed-versions.test.ts: two of KUBE_OLD and one of KUBE_NEW on one etcd), its own
// Envoy + skewgate in front (it stops and restarts that skewgate: the shared arms are not
// touched), the built kubectl. Every claim is checked on what the apiservers saw: `kubectl auth
// whoami` / SelfSubjectReview answers and their audit logs, found by each answer's Audit-Id.
// Fails, never skips, when a part is missing.
import type { Test as Tap } from 'tap';
import { execFile } from 'node:child_process';
import { createHash, X509Certificate } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import type { OutgoingHttpHeaders } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { IDENTITY_UNSTATED_REASON, REASON_HEADER } from '../../../src/constants.js';
import { readAuditEvents, type ServerAuditEvent } from '../../../harness/lab/audit-events.js';
import { LAB_USERS, directContext, type LabUser } from '../../../harness/lab/gateway-config.js';
import { JANE_NAMESPACE } from '../../../harness/lab/rbac.js';
import { freePort, type GatewayInfo } from '../../../harness/lab/lab.js';
import { ADMIN_USER, BOB_GROUP, BOB_UID, BOB_USER, JANE_GROUPS, JANE_USER, labStaticTokens } from '../../../harness/lab/pki.js';
import type { ShapeLab, Suite } from '../../helpers/shape-lab.js';
import {
  auditId,
  call as callWith,
  servers,
  settle,
  ssr as ssrWith,
  statusMessage,
  userInfoOf,
  type Answer,
  type Credential,
  type UserInfo,
} from './identity-requests.js';

const GATEWAY = 'identity-gateway';
const SECRETS_PATH = `/api/v1/namespaces/${JANE_NAMESPACE}/secrets`;
const CREDENTIAL_ID = 'authentication.kubernetes.io/credential-id';
const TRICKY_USER = "Zoë O'Brien, Jr. + 1";

export const identitySuite: Suite = {
  title: 'identity at the edge: the same user through the gateway as straight to each apiserver, nothing forgeable',
  run: async (t: Tap, { parts: { kubectl: kubectlBin }, specs: SERVERS, lab }: ShapeLab) => {
    const FIRST = SERVERS[0]?.name ?? 'kas-1';
    const SECOND = SERVERS[1]?.name ?? 'kas-2';
    const t0 = Date.now();
    const elapsed = (): string => `${((Date.now() - t0) / 1000).toFixed(1)} s`;
    const dir = await mkdtemp(join(tmpdir(), 'skewgate-identity-'));
    t.teardown(async () => {
      await lab.stopGateway(GATEWAY).catch((err: unknown) => t.fail(`stopping ${GATEWAY}: ${(err as Error).message}`));
      await rm(dir, { recursive: true, force: true });
    });
    const pki = lab.pki;
    const ca = await readFile(pki.caFile, 'utf8');
    const pem = async (file: string): Promise<string> => readFile(file, 'utf8');
    // Every request trusts the lab's CA.
    const call = (base: string, method: string, path: string, o?: Parameters<typeof callWith>[4]): Promise<Answer> =>
      callWith(ca, base, method, path, o);
    const ssr = (base: string, cred: Credential | undefined, headers?: OutgoingHttpHeaders): Promise<Answer> =>
      ssrWith(ca, base, cred, headers);

    async function kubectl(gw: GatewayInfo, context: string, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
      return new Promise((resolve) => {
        execFile(
          kubectlBin,
          [
            '--kubeconfig',
            gw.kubeconfigFile,
            '--cache-dir',
            join(dir, 'kubectl-cache'),
            '--context',
            context,
            '--request-timeout',
            '20s',
            ...args,
          ],
          { maxBuffer: 8 << 20 },
          (err, stdout, stderr) => {
            const code = err === null ? 0 : typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : 1;
            resolve({ code, stdout, stderr });
          },
        );
      });
    }

    async function whoami(gw: GatewayInfo, context: string): Promise<UserInfo> {
      const r = await kubectl(gw, context, 'auth', 'whoami', '-o', 'json');
      if (r.code !== 0) throw new Error(`kubectl --context ${context} auth whoami: exit ${r.code}: ${r.stderr.trim()}`);
      return (JSON.parse(r.stdout) as { status: { userInfo: UserInfo } }).status.userInfo;
    }

    async function credentialId(certFile: string): Promise<string> {
      return `X509SHA256=${createHash('sha256')
        .update(new X509Certificate(await pem(certFile)).raw)
        .digest('hex')}`;
    }

    /** Waits until every ID is in some apiserver's audit log (the log is written shortly after the answer). */
    async function auditEvents(ids: readonly string[]): Promise<Map<string, ServerAuditEvent[]>> {
      const files = SERVERS.map((s) => ({ server: s.name, file: lab.auditLogFile(s.name) }));
      let events = new Map<string, ServerAuditEvent[]>();
      for (const deadline = Date.now() + 15_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 250))) {
        events = await readAuditEvents(files);
        if (ids.every((id) => events.has(id))) break;
      }
      return events;
    }

    /** The one apiserver whose audit log has the request that got this answer. */
    async function servedBy(a: Answer): Promise<string | undefined> {
      const id = auditId(a);
      if (id === undefined) return undefined;
      const where = servers((await auditEvents([id])).get(id));
      return where.length === 1 ? where[0] : undefined;
    }

    const tokens = labStaticTokens({ admin: pki.adminToken, jane: pki.janeToken, skewgate: pki.skewgateToken });
    const tokenOf = (user: string): { uid: string; groups: readonly string[] } => {
      const tok = tokens.find((x) => x.user === user);
      if (tok === undefined) throw new Error(`no static token for ${user}`);
      return tok;
    };

    /** What kube-apiserver itself makes of each credential (checked directly first, then through the gateway). */
    async function expectedUsers(): Promise<Record<LabUser, UserInfo>> {
      const cred = async (file: string): Promise<Record<string, string[]>> => ({ [CREDENTIAL_ID]: [await credentialId(file)] });
      return {
        'admin-cert': { username: ADMIN_USER, groups: ['system:masters', 'system:authenticated'], extra: await cred(pki.adminCertFile) },
        'admin-token': {
          username: ADMIN_USER,
          uid: tokenOf(ADMIN_USER).uid,
          groups: [...tokenOf(ADMIN_USER).groups, 'system:authenticated'],
        },
        'jane-cert': { username: JANE_USER, groups: [...JANE_GROUPS, 'system:authenticated'], extra: await cred(pki.janeCertFile) },
        'jane-token': { username: JANE_USER, uid: tokenOf(JANE_USER).uid, groups: [...tokenOf(JANE_USER).groups, 'system:authenticated'] },
        // The UID comes from the subject attribute 1.3.6.1.4.1.57683.2 (AllowParsingUserUIDFromCertAuth).
        'bob-cert': { username: BOB_USER, uid: BOB_UID, groups: [BOB_GROUP, 'system:authenticated'], extra: await cred(pki.bobCertFile) },
        // Go's x509 reads the subject DER: the multi-valued RDN's O values come in DER (sorted) order,
        // not as written; the OU is no group; the CN keeps its comma, plus and non-ASCII letters.
        'tricky-cert': {
          username: TRICKY_USER,
          groups: ['aa-team', 'zz-team', 'Ünïcødé Örg', 'dev-viewers', 'system:authenticated'],
          extra: await cred(pki.trickyCertFile),
        },
      };
    }

    const creds = {
      anonymous: {} as Credential,
      adminToken: { token: pki.adminToken } as Credential,
      janeToken: { token: pki.janeToken } as Credential,
      janeCert: { cert: await pem(pki.janeCertFile), key: await pem(pki.janeKeyFile) } as Credential,
      adminCert: { cert: await pem(pki.adminCertFile), key: await pem(pki.adminKeyFile) } as Credential,
      serverOnly: { cert: await pem(pki.serverOnlyCertFile), key: await pem(pki.serverOnlyKeyFile) } as Credential,
      foreign: { cert: await pem(pki.foreignCertFile), key: await pem(pki.foreignKeyFile) } as Credential,
    };

    /** Everything a client might send to claim another identity or pin a request to one apiserver. */
    async function forgedHeaders(pin: string): Promise<OutgoingHttpHeaders> {
      const adminPem = await pem(pki.adminCertFile);
      const hash = createHash('sha256').update(new X509Certificate(adminPem).raw).digest('hex');
      return {
        'X-Remote-User': 'system:admin',
        'X-Remote-Uid': 'forged-uid',
        'X-Remote-Group': ['system:masters', 'system:nodes'],
        'X-Remote-Extra-Scopes': 'forged',
        'X-Remote-Extra-authentication.kubernetes.io%2fcredential-id': 'X509SHA256=forged',
        'X-Forwarded-Client-Cert': `Hash=${hash};Cert="${encodeURIComponent(adminPem)}";Subject="CN=${ADMIN_USER},O=system:masters";URI=`,
        'X-Kubernetes-Peer-Proxied': 'true',
        'X-Skewgate-Upstream': pin,
      };
    }

    const summary: string[] = [];

    // ---- the lab -------------------------------------------------------------------------------

    let gw: GatewayInfo;
    let expected: Record<LabUser, UserInfo>;
    let labUp = false;
    /** A part after a failed start fails with one clear line instead of a cascade of TypeErrors. */
    const needLab = (t: Tap): boolean => {
      if (!labUp) t.fail('the gateway did not start (see the first test)');
      return labUp;
    };
    const directBase = (name: string): string => lab.apiServerUrl(name);

    await t.test('the gateway: Envoy + skewgate with client certificates', async (t) => {
      gw = await lab.startGateway({ name: GATEWAY, withSkewgate: true, port: await freePort() });
      expected = await expectedUsers();
      const config = await readFile(gw.configFile, 'utf8');
      t.match(config, /clientCaFile:/, 'the gateway verifies client certificates (envoy.tls.clientCaFile)');
      t.match(config, /upstreamClientCert:/, 'and presents the front-proxy client certificate upstream');
      labUp = true;
      summary.push(`gateway up in ${elapsed()} (${SERVERS.map((s) => `${s.name} v${s.version}`).join(', ')})`);
    });

    await t.test('a. kubectl auth whoami: the same user through the gateway as straight to each apiserver', async (t) => {
      if (!needLab(t)) return;
      for (const user of LAB_USERS) {
        const direct = await Promise.all(SERVERS.map((s) => whoami(gw, directContext(user, s.name))));
        for (const [i, d] of direct.entries()) t.same(d, expected[user], `${user} straight to ${SERVERS[i]?.name}: ${JSON.stringify(d)}`);
        // Three times: Envoy balances over the three apiservers.
        for (let i = 0; i < 3; i++) {
          const through = await whoami(gw, user);
          t.strictSame(through, direct[0], `${user} through the gateway (${i + 1}) = directly`);
        }
      }
      summary.push(`whoami equal through the gateway and directly for ${LAB_USERS.join(', ')}`);
    });

    await t.test('b. RBAC: jane may list configmaps in default; every other request stays a denial', async (t) => {
      if (!needLab(t)) return;
      const made = await kubectl(gw, 'cert', 'create', 'configmap', 'identity-probe', '-n', JANE_NAMESPACE, '--from-literal=k=v');
      t.ok(
        made.code === 0 || /AlreadyExists/.test(made.stderr),
        `the admin (client certificate, through the gateway) creates a configmap: ${made.stdout.trim() || made.stderr.trim()}`,
      );
      for (const ctx of ['jane-cert', 'jane-token'] as const) {
        const list = await kubectl(gw, ctx, 'get', 'configmaps', '-n', JANE_NAMESPACE, '-o', 'name');
        t.equal(list.code, 0, `${ctx}: kubectl get configmaps -n ${JANE_NAMESPACE} (${list.stderr.trim()})`);
        t.match(list.stdout, /configmap\/identity-probe/);
        const denials: [string[], RegExp][] = [
          [
            ['get', 'secrets', '-n', JANE_NAMESPACE],
            /Forbidden.*User "jane" cannot list resource "secrets" in API group "" in the namespace "default"/,
          ],
          [
            ['get', 'configmaps', '-n', 'kube-system'],
            /Forbidden.*User "jane" cannot list resource "configmaps" in API group "" in the namespace "kube-system"/,
          ],
          // kubectl create words it "error: failed to create configmap: configmaps is forbidden: …".
          [['create', 'configmap', `by-${ctx}`, '-n', JANE_NAMESPACE], /forbidden: User "jane" cannot create resource "configmaps"/],
          [['get', 'namespaces'], /Forbidden.*User "jane" cannot list resource "namespaces"/],
        ];
        for (const [args, message] of denials) {
          const r = await kubectl(gw, ctx, ...args);
          t.not(r.code, 0, `${ctx}: kubectl ${args.join(' ')} fails`);
          t.match(r.stderr, message, `${ctx}: ${r.stderr.trim()}`);
        }
        const canI = await kubectl(gw, ctx, 'auth', 'can-i', 'list', 'secrets', '-n', JANE_NAMESPACE);
        t.equal(canI.stdout.trim(), 'no', `${ctx}: can-i list secrets → no`);
      }
      // The raw denial through the gateway is the apiserver's own, word for word.
      for (const [name, cred] of [
        ['jane token', creds.janeToken],
        ['jane cert', creds.janeCert],
      ] as const) {
        const direct = await call(directBase(FIRST), 'GET', SECRETS_PATH, { cred });
        const through = await call(gw.url, 'GET', SECRETS_PATH, { cred });
        t.equal(direct.status, 403, `${name}: GET secrets directly → 403`);
        t.equal(through.status, 403, `${name}: GET secrets through the gateway → 403`);
        t.same(JSON.parse(through.body), JSON.parse(direct.body), `${name}: the same Status body: ${statusMessage(through)}`);
      }
      summary.push('jane (cert and token): configmaps in default listed; secrets, kube-system, writes, namespaces: 403 naming User "jane"');
    });

    await t.test('c. forged identity and routing headers have no effect (answers and audit logs)', async (t) => {
      if (!needLab(t)) return;
      const forged = await forgedHeaders(FIRST);
      const callers = [
        { name: 'anonymous', cred: creds.anonymous, user: undefined },
        { name: 'jane token', cred: creds.janeToken, user: expected['jane-token'] },
        { name: 'jane cert', cred: creds.janeCert, user: expected['jane-cert'] },
      ];
      const sent: { caller: string; what: string; id: string; trueUser: UserInfo | undefined }[] = [];
      for (const c of callers) {
        for (let i = 0; i < 4; i++) {
          const a = await ssr(gw.url, c.cred, forged);
          const info = userInfoOf(a);
          if (c.user === undefined) {
            // Directly, an anonymous SelfSubjectReview is a 403 for system:anonymous; through the
            // gateway the front-proxy connection makes it a 401 unless skewgate states anonymity.
            t.ok(
              a.status === 401 || (a.status === 403 && statusMessage(a).includes('User "system:anonymous"')),
              `anonymous + forged headers: ${a.status} ${statusMessage(a)}`,
            );
          } else {
            t.equal(a.status, 201, `${c.name} + forged headers: SelfSubjectReview ${a.status}`);
            t.strictSame(info, c.user, `${c.name}: the apiserver sees the true user, not system:admin`);
          }
          const id = auditId(a);
          t.ok(id, `${c.name}: the answer comes from an apiserver (Audit-Id ${id ?? 'missing'})`);
          if (id !== undefined) sent.push({ caller: c.name, what: 'selfsubjectreview', id, trueUser: c.user });
        }
        const secrets = await call(gw.url, 'GET', SECRETS_PATH, { cred: c.cred, headers: forged });
        if (c.user === undefined)
          t.ok(secrets.status === 401 || secrets.status === 403, `anonymous + forged headers: GET secrets ${secrets.status}`);
        else {
          t.equal(secrets.status, 403, `${c.name} + forged headers: GET secrets still 403`);
          t.match(statusMessage(secrets), /User "jane" cannot list resource "secrets"/);
        }
        const id = auditId(secrets);
        if (id !== undefined) sent.push({ caller: c.name, what: 'list secrets', id, trueUser: c.user });
      }

      const events = await auditEvents(sent.map((s) => s.id));
      const perServer = new Map<string, number>();
      for (const s of sent) {
        const evs = events.get(s.id);
        const where = servers(evs);
        t.equal(where.length, 1, `${s.caller} ${s.what} ${s.id}: in exactly one apiserver's audit log (${where.join(', ') || 'none'})`);
        for (const w of where) perServer.set(w, (perServer.get(w) ?? 0) + 1);
        for (const { event } of evs ?? []) {
          const u = event.user;
          t.not(u.username, 'system:admin', `${s.id}: never system:admin`);
          t.notOk(u.groups?.includes('system:masters'), `${s.id}: never in system:masters`);
          t.equal(event.impersonatedUser, undefined, `${s.id}: no impersonatedUser`);
          t.not(u.uid, 'forged-uid');
          t.notOk(Object.keys(u.extra ?? {}).includes('scopes'), `${s.id}: no forged extra`);
          if (s.trueUser === undefined) {
            t.ok(
              u.username === undefined || u.username === 'system:anonymous',
              `${s.id}: anonymous stays anonymous (${JSON.stringify(u)})`,
            );
          } else {
            t.equal(u.username, s.trueUser.username, `${s.caller} ${s.what}: audit user ${u.username ?? '-'}`);
            t.same(u.groups, s.trueUser.groups, `${s.caller} ${s.what}: audit groups ${JSON.stringify(u.groups)}`);
            t.same(u.extra?.[CREDENTIAL_ID], s.trueUser.extra?.[CREDENTIAL_ID], `${s.caller} ${s.what}: the true credential id (or none)`);
          }
        }
      }
      const spread = [...perServer.entries()].sort();
      t.comment(`forged x-skewgate-upstream: ${FIRST}; audit logs: ${spread.map(([k, v]) => `${k} ${v}`).join(', ')}`);
      t.ok(perServer.size >= 2, `requests spread over ${perServer.size} apiservers, not pinned to ${FIRST}`);
      t.ok((perServer.get(FIRST) ?? 0) < sent.length, `not all on ${FIRST}`);
      summary.push(
        `forged X-Remote-*, XFCC (admin cert), peer-proxied, x-skewgate-upstream: ${sent.length} requests audited as their true users, spread ${spread.map(([k, v]) => `${k}:${v}`).join(' ')}`,
      );
    });

    await t.test('c2. anonymous requests are what they are directly (no front-proxy certificate on their connection)', async (t) => {
      if (!needLab(t)) return;
      const seen: string[] = [];
      for (const path of ['/version', '/readyz', SECRETS_PATH]) {
        const direct = await call(directBase(FIRST), 'GET', path);
        const through = await call(gw.url, 'GET', path);
        seen.push(`${path} direct ${direct.status}, gateway ${through.status}`);
        // Only a stated identity travels over front-proxy connections; on those, kube-apiserver would
        // answer 401 to a request without X-Remote-User instead of treating it as system:anonymous.
        t.equal(through.status, direct.status, `anonymous GET ${path} through the gateway as directly (${direct.status})`);
      }
      t.comment(`anonymous: ${seen.join('; ')}`);
      summary.push(`anonymous: ${seen.join('; ')}`);
    });

    await t.test('d. Impersonate-* headers pass through; the apiserver authorises them', async (t) => {
      if (!needLab(t)) return;
      const asJane = { 'Impersonate-User': JANE_USER };
      const direct = await ssr(directBase(SECOND), creds.adminCert, asJane);
      const through = await ssr(gw.url, creds.adminCert, asJane);
      t.equal(through.status, 201, 'admin cert impersonating jane through the gateway');
      t.equal(userInfoOf(through)?.username, JANE_USER, 'whoami says jane');
      t.strictSame(userInfoOf(through), userInfoOf(direct), `the same as directly: ${JSON.stringify(userInfoOf(through))}`);
      const asJaneKubectl = await kubectl(gw, 'cert', 'auth', 'whoami', '--as', JANE_USER, '-o', 'json');
      t.equal(asJaneKubectl.code, 0, `kubectl --as jane through the gateway (${asJaneKubectl.stderr.trim()})`);
      t.match(asJaneKubectl.stdout, /"username": "jane"/);

      const id = auditId(through);
      const ev = (await auditEvents(id === undefined ? [] : [id])).get(id ?? '')?.[0]?.event;
      t.equal(ev?.user.username, ADMIN_USER, 'audit: authenticated as the admin (from the certificate)');
      t.equal(ev?.impersonatedUser?.username, JANE_USER, 'audit: impersonating jane');

      for (const [name, cred] of [
        ['jane token', creds.janeToken],
        ['jane cert', creds.janeCert],
      ] as const) {
        for (const headers of [
          { 'Impersonate-User': ADMIN_USER },
          { 'Impersonate-User': JANE_USER, 'Impersonate-Group': 'system:masters' },
        ]) {
          const a = await ssr(gw.url, cred, headers);
          t.equal(a.status, 403, `${name} with ${JSON.stringify(headers)} through the gateway → 403`);
          // 1.36 checks constrained impersonation first ("cannot impersonate-on:user-info:create
          // resource selfsubjectreviews"), 1.35 the classic verb ("cannot impersonate resource users").
          t.match(statusMessage(a), /User "jane" cannot impersonate/, statusMessage(a));
          const server = await servedBy(a);
          const d = await ssr(directBase(server ?? FIRST), cred, headers);
          t.same(JSON.parse(a.body), JSON.parse(d.body), `the same denial as ${server ?? '?'} gives directly`);
        }
      }
      summary.push('Impersonate-User passes through (admin as jane: whoami jane, audit impersonatedUser jane); jane impersonating: 403');
    });

    await t.test(
      "d2. one id from Envoy to the audit log: Envoy's request id is the apiserver's Audit-ID; a client's own is kept",
      async (t) => {
        if (!needLab(t)) return;
        const a = await ssr(gw.url, creds.janeToken);
        const id = auditId(a) ?? '';
        t.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/, `the answer's Audit-Id: ${id}`);
        t.equal(servers((await auditEvents([id])).get(id)).length, 1, "in one apiserver's audit log");
        // Envoy's access log (its stdout, the lab's log file of the gateway's Envoy) names the same id.
        type Line = { request_id?: string; audit_id?: string };
        let line: Line | undefined;
        for (
          const deadline = Date.now() + 15_000;
          line === undefined && Date.now() < deadline;
          await new Promise((r) => setTimeout(r, 250))
        )
          line = (await readFile(lab.logFile(`envoy-${GATEWAY}`), 'utf8'))
            .split('\n')
            .filter((l) => l.startsWith('{'))
            .map((l) => JSON.parse(l) as Line)
            .find((l) => l.request_id === id);
        t.ok(line, "Envoy's access log has the request under its request id");
        t.equal(line?.audit_id, id, 'and under the Audit-ID it sent');
        const mine = `sg-client-${process.pid}-${Date.now()}`;
        const own = await ssr(gw.url, creds.janeToken, { 'Audit-ID': mine });
        t.equal(auditId(own), mine, "a client's own Audit-ID: kept");
        t.equal(servers((await auditEvents([mine])).get(mine)).length, 1, 'and audited under it');
        summary.push("Audit-ID: Envoy's request id (access log request_id = audit_id = the audit log's auditID); a client's own kept");
      },
    );

    await t.test('e. certificates that must not authenticate', async (t) => {
      if (!needLab(t)) return;
      // A cluster-CA certificate for serverAuth only, with the admin's subject.
      const directServerOnly = await ssr(directBase(FIRST), creds.serverOnly);
      t.equal(
        directServerOnly.status,
        401,
        `serverAuth-only certificate straight to ${FIRST} → ${directServerOnly.status} (no clientAuth EKU)`,
      );
      // Envoy (BoringSSL) checks the purpose of a client certificate: the handshake fails before
      // skewgate (which checks the clientAuth EKU too) or any apiserver sees a request.
      const serverOnly = await settle(ssr(gw.url, creds.serverOnly));
      const serverOnlyGateway = serverOnly.ok
        ? `answered ${serverOnly.answer.status} ${statusMessage(serverOnly.answer)}`
        : `handshake refused (${serverOnly.error})`;
      t.notOk(serverOnly.ok, `serverAuth-only certificate through the gateway: ${serverOnlyGateway}`);
      t.match(serverOnly.ok ? '' : serverOnly.error, /UNSUPPORTED_CERTIFICATE/, 'alert: unsupported certificate');

      // A clientAuth certificate from a CA the cluster does not trust, claiming system:masters.
      const directForeign = await ssr(directBase(FIRST), creds.foreign);
      t.equal(
        directForeign.status,
        401,
        `foreign-CA certificate straight to ${FIRST} → ${directForeign.status} (kube-apiserver accepts the handshake, then fails authentication: not anonymous)`,
      );
      const foreign = await settle(ssr(gw.url, creds.foreign));
      const foreignGateway = foreign.ok ? `answered ${foreign.answer.status}` : `handshake refused (${foreign.error})`;
      t.notOk(foreign.ok, `foreign-CA certificate through the gateway: ${foreignGateway}`);
      t.match(foreign.ok ? '' : foreign.error, /UNKNOWN_CA/, 'alert: unknown CA');
      t.comment(
        `serverAuth-only: direct ${directServerOnly.status}, gateway ${serverOnlyGateway}; foreign CA: direct ${directForeign.status}, gateway ${foreignGateway}`,
      );
      summary.push(
        `serverAuth-only cert: direct ${directServerOnly.status}, gateway ${serverOnlyGateway}; foreign-CA cert: direct ${directForeign.status}, gateway ${foreignGateway}`,
      );
    });

    await t.test(
      'f. skewgate down (fail-open): tokens keep working, certificates get 401 from Envoy, never an unstated identity',
      async (t) => {
        if (!needLab(t)) return;
        const stopped = Date.now();
        await lab.stopSkewgate(GATEWAY);
        t.comment(`skewgate stopped; Envoy marked it down after ${((Date.now() - stopped) / 1000).toFixed(1)} s`);
        try {
          const ns = await kubectl(gw, 'token', 'get', 'namespace', JANE_NAMESPACE, '-o', 'name');
          t.equal(ns.code, 0, `admin token: kubectl get namespace through the gateway (${ns.stderr.trim()})`);
          t.strictSame(await whoami(gw, 'jane-token'), expected['jane-token'], 'jane token: whoami unchanged');
          const forged = await forgedHeaders(SECOND);
          const janeForged = await ssr(gw.url, creds.janeToken, forged);
          t.strictSame(
            userInfoOf(janeForged),
            expected['jane-token'],
            'jane token + forged headers, skewgate down: still jane (Envoy strips them)',
          );
          const anonForged = await ssr(gw.url, creds.anonymous, forged);
          t.not(anonForged.status, 201, `anonymous + forged headers, skewgate down: ${anonForged.status} ${statusMessage(anonForged)}`);

          for (const [name, cred] of [
            ['jane cert', creds.janeCert],
            ['admin cert', creds.adminCert],
          ] as const) {
            for (const headers of [{}, forged]) {
              const a = await ssr(gw.url, cred, headers);
              t.equal(a.status, 401, `${name}${headers === forged ? ' + forged headers' : ''}, skewgate down → ${a.status}`);
              t.equal(a.headers[REASON_HEADER], IDENTITY_UNSTATED_REASON, `answered by Envoy's backstop route (${REASON_HEADER})`);
              t.equal(auditId(a), undefined, 'never reached an apiserver (no Audit-Id)');
              const body = JSON.parse(a.body) as { kind?: string; reason?: string; code?: number };
              t.same(
                { kind: body.kind, reason: body.reason, code: body.code },
                { kind: 'Status', reason: 'Unauthorized', code: 401 },
                'a Kubernetes Status body',
              );
            }
          }
          const k = await kubectl(gw, 'jane-cert', 'get', 'configmaps', '-n', JANE_NAMESPACE);
          t.not(k.code, 0, "kubectl with jane's certificate fails while skewgate is down");
          t.match(k.stderr, /Unauthorized|provide credentials/, k.stderr.trim());
        } finally {
          const started = Date.now();
          await lab.startSkewgate(GATEWAY);
          t.comment(`skewgate back, healthy in Envoy after ${((Date.now() - started) / 1000).toFixed(1)} s`);
        }
        t.strictSame(await whoami(gw, 'jane-cert'), expected['jane-cert'], "skewgate back: jane's certificate works again");
        t.strictSame(await whoami(gw, 'bob-cert'), expected['bob-cert'], "and bob's (UID)");
        summary.push(
          'skewgate down: token requests fine, forged headers still stripped; certificate requests 401 from the backstop route (no Audit-Id); back up: certificates work',
        );
      },
    );

    await t.test('summary', async (t) => {
      summary.push(`run time ${elapsed()}`);
      t.comment(`identity at the edge, real kube-apiservers:\n  - ${summary.join('\n  - ')}`);
      t.ok(summary.length >= 7, 'every part ran');
    });
  },
};
