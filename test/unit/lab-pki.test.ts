import t from 'tap';
import { LAB_ADDRESSES_PER_SLOT } from '../../harness/lab/addresses.js';
import { X509Certificate, createHash } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stat } from 'node:fs/promises';
import {
  ADMIN_USER,
  BOB_UID,
  JANE_GROUPS,
  JANE_USER,
  KUBERNETES_UID_OID,
  LAB_MAX_LOOPBACK,
  LAB_PKI_FILES,
  LAB_SANS,
  checkSanEntries,
  createLabPki,
  extraSansTag,
  labPkiFiles,
  labStaticTokens,
  subjectCertOpensslConfig,
  tokenAuthCsv,
} from '../../harness/lab/pki.js';

t.test('static tokens: --token-auth-file lines, groups quoted', async (t) => {
  const csv = tokenAuthCsv(labStaticTokens({ admin: 'a1', jane: 'j1', skewgate: 's1' }));
  t.equal(
    csv,
    'a1,kubernetes-admin,uid-kubernetes-admin,"system:masters"\nj1,jane,uid-jane,"dev-viewers,team-b"\ns1,skewgate,uid-skewgate,"skewgate:discovery"\n',
  );
  t.throws(() => tokenAuthCsv([{ token: 't', user: 'a,b', uid: 'u', groups: [] }]), /CSV quoting/);
  t.throws(() => tokenAuthCsv([{ token: 't', user: 'u', uid: 'u', groups: ['x"y'] }]), /CSV quoting/);
});

t.test('serving SANs cover every lab loopback address', async (t) => {
  for (let i = 1; i <= LAB_MAX_LOOPBACK; i++) t.ok(LAB_SANS.includes(`IP:127.0.0.${i}`), `127.0.0.${i}`);
  t.equal(LAB_MAX_LOOPBACK, LAB_ADDRESSES_PER_SLOT, "slot 0's certificate names every loopback address a slot has");
  t.ok(LAB_SANS.includes('IP:10.96.0.1'));
});

t.test('the openssl config names the UID attribute and reads subjects as UTF-8', async (t) => {
  const cnf = subjectCertOpensslConfig();
  t.match(cnf, new RegExp(`^kubernetesUID = ${KUBERNETES_UID_OID.replace(/\./g, '\\.')}$`, 'm'));
  t.match(cnf, /^oid_section = oids$/m);
  t.match(cnf, /^utf8 = yes$/m);
  t.match(cnf, /^extendedKeyUsage = clientAuth$/m);
});

t.test('createLabPki: the identity test certificates (openssl)', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'skewgate-lab-pki-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const pki = await createLabPki(dir);
  const cert = async (f: string): Promise<X509Certificate> => new X509Certificate(await readFile(f));
  const ca = await cert(pki.caFile);
  const eku = (c: X509Certificate): string[] => c.keyUsage ?? [];
  const CLIENT_AUTH = '1.3.6.1.5.5.7.3.2';
  const SERVER_AUTH = '1.3.6.1.5.5.7.3.1';

  const jane = await cert(pki.janeCertFile);
  t.equal(jane.subject, `O=${JANE_GROUPS[0]}\nO=${JANE_GROUPS[1]}\nCN=${JANE_USER}`, 'jane: O values in order, then the CN');
  t.ok(jane.verify(ca.publicKey), 'issued by the cluster CA');
  t.same(eku(jane), [CLIENT_AUTH]);

  const bob = await cert(pki.bobCertFile);
  t.match(bob.subject, new RegExp(`^${KUBERNETES_UID_OID.replace(/\./g, '\\.')}=${BOB_UID}$`, 'm'), 'bob carries the UID attribute');
  t.ok(bob.verify(ca.publicKey));

  const tricky = await cert(pki.trickyCertFile);
  // Node prints the DER order: the multi-valued RDN is sorted (aa before zz), whatever -subj said.
  t.equal(tricky.subject, "C=DE\nO=aa-team + O=zz-team\nO=Ünïcødé Örg\nOU=not-a-group\nO=dev-viewers\nCN=Zoë O'Brien\\, Jr. \\+ 1");
  t.ok(tricky.raw.includes(Buffer.from('Zoë', 'utf8')), 'the CN is UTF-8 in the DER (not Latin-1 read as UTF-8)');
  t.ok(tricky.verify(ca.publicKey));

  const serverOnly = await cert(pki.serverOnlyCertFile);
  t.same(eku(serverOnly), [SERVER_AUTH], 'server-only: serverAuth and nothing else');
  t.equal(serverOnly.subject, `O=system:masters\nCN=${ADMIN_USER}`);
  t.ok(serverOnly.verify(ca.publicKey), 'from the cluster CA');

  const foreign = await cert(pki.foreignCertFile);
  t.notOk(foreign.verify(ca.publicKey), 'foreign: not from the cluster CA');
  t.ok(foreign.verify((await cert(pki.foreignCaFile)).publicKey), 'from its own CA');
  t.same(eku(foreign), [CLIENT_AUTH]);

  const fp = await cert(pki.frontProxyClientCertFile);
  t.notOk(fp.verify(ca.publicKey), 'the front-proxy client certificate is not from the client CA');

  const csv = await readFile(pki.tokenAuthFile, 'utf8');
  t.match(csv, new RegExp(`^${pki.janeToken},jane,uid-jane,"dev-viewers,team-b"$`, 'm'), 'jane has a static token');
  t.equal((await readFile(pki.janeTokenFile, 'utf8')).trim(), pki.janeToken);

  // Reused while complete; made again when a file is missing or the marker is of an older layout.
  const fingerprint = async (): Promise<string> =>
    createHash('sha256')
      .update(await readFile(pki.caFile))
      .digest('hex');
  const first = await fingerprint();
  t.equal((await createLabPki(dir)).janeToken, pki.janeToken, 'a complete set is reused');
  t.equal(await fingerprint(), first);
  await rm(pki.trickyCertFile);
  const again = await createLabPki(dir);
  t.not(await fingerprint(), first, 'a missing file: the whole set is made again');
  t.not(again.janeToken, pki.janeToken);
  const second = await fingerprint();
  await writeFile(join(dir, '.complete'), 'skewgate-lab-pki/2 2026-01-01T00:00:00Z\n');
  await createLabPki(dir);
  t.not(await fingerprint(), second, 'a marker of another layout: made again');
  t.ok(
    LAB_PKI_FILES.every((f) => !f.includes('/')),
    'flat file list',
  );
});

t.test('labPkiFiles: the paths of a set, known before it is made', async (t) => {
  const files = labPkiFiles('/pki');
  const paths = Object.entries(files)
    .filter(([k]) => k !== 'dir')
    .map(([, v]) => v);
  for (const p of paths) t.ok(LAB_PKI_FILES.includes(p.replace(/^\/pki\//, '')), `${p} is in the set`);
  t.equal(files.caFile, '/pki/ca.crt');
});

t.test("extra SANs: on both serving certificates, after the lab's; a set made for other names is made again", async (t) => {
  t.equal(extraSansTag([]), '', "no extra SANs: the marker of the lab's sets (which are reused as before)");
  t.match(extraSansTag(['DNS:kas-1']), /^sans-[0-9a-f]{16}$/);
  t.not(extraSansTag(['DNS:kas-1']), extraSansTag(['DNS:kas-2']));
  t.doesNotThrow(() => checkSanEntries(['DNS:kas-1', 'DNS:envoy-baseline', 'IP:172.31.250.11', 'IP:::1']));
  for (const bad of ['kas-1', 'DNS:a,b', 'DNS:', 'URI:x', 'IP:1.2.3.4,DNS:x'])
    t.throws(() => checkSanEntries([bad]), /DNS:name or IP:address/, bad);

  const dir = await mkdtemp(join(tmpdir(), 'skewgate-lab-pki-sans-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const extraSans = ['DNS:kas-1', 'IP:172.31.250.11'];
  const pki = await createLabPki(dir, { extraSans });
  for (const f of [pki.serverCertFile, pki.gatewayCertFile]) {
    const sans = (new X509Certificate(await readFile(f)).subjectAltName ?? '').split(', ');
    t.ok(sans.includes('DNS:kas-1') && sans.includes('IP Address:172.31.250.11'), `${f}: the extra names`);
    t.ok(sans.includes('DNS:localhost') && sans.includes('IP Address:127.0.0.16'), "and the lab's");
  }
  const uid = process.getuid?.();
  for (const name of LAB_PKI_FILES) {
    const st = await stat(join(dir, name));
    t.equal(st.uid, uid, `${name}: the writer's`);
    if (/\.(key|token)$|^tokens\.csv$/.test(name)) t.equal(st.mode & 0o077, 0, `${name}: owner only`);
    else t.equal(st.mode & 0o444, 0o444, `${name}: readable by all`);
  }
  const ca = createHash('sha256')
    .update(await readFile(pki.caFile))
    .digest('hex');
  t.equal((await createLabPki(dir, { extraSans })).janeToken, pki.janeToken, 'the same names: reused');
  await createLabPki(dir, { extraSans: ['DNS:kas-2'] });
  t.not(
    createHash('sha256')
      .update(await readFile(pki.caFile))
      .digest('hex'),
    ca,
    'other names: made again',
  );
  const plain = await createLabPki(dir);
  const sans = new X509Certificate(await readFile(plain.serverCertFile)).subjectAltName ?? '';
  t.notMatch(sans, /kas-/, "without extra SANs: the lab's names only");
  t.equal(sans.split(', ').length, LAB_SANS.length);
  await t.rejects(createLabPki(dir, { extraSans: ['kas-1'] }), /DNS:name or IP:address/);
});
