// The node-side steps of deploy/static-pods/README.md's "Install", as an operator makes them, on a
// lab node whose "/" is a folder of its own (`nodeRoot`: lab nodes share this machine's
// filesystem): /etc/skewgate/skewgate.yaml (the example with only the apiservers' names and URLs
// replaced and the collector block deleted, as the README says when there is none),
// /etc/skewgate/skewgate.conf (user skewgate:<node>, group skewgate:discovery, as `kubeadm
// kubeconfig user` writes it), kubeadm's five PKI files the pod mounts, and the manifest as it is
// but for its hostPaths' root. Returns the manifest to place in the kubelet's folder.
import { copyFile, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { SKEWGATE_GROUP, type LabPki } from '../../harness/lab/pki.js';
import { issueCert } from '../../harness/openssl.js';

export interface StaticPodInstall {
  /** deploy/static-pods */
  readonly recipe: string;
  readonly nodeRoot: string;
  readonly nodeName: string;
  /** A folder for the credential's key pair (the node's pki). */
  readonly pkiDir: string;
  readonly pki: LabPki;
  /** The apiservers, in the example's order: their hostnames and URLs. */
  readonly apiservers: readonly { readonly name: string; readonly url: string }[];
}

interface PodManifest {
  spec: { volumes: { name: string; hostPath?: { path: string } }[] };
}

/** Writes the node's files (over none of an earlier install: nodeRoot is emptied first); returns the manifest to place. */
export async function installStaticPodGateway(o: StaticPodInstall): Promise<object> {
  const onNode = (path: string): string => join(o.nodeRoot, path);
  await rm(o.nodeRoot, { recursive: true, force: true });

  const config = parse(await readFile(join(o.recipe, 'skewgate.yaml'), 'utf8')) as {
    apiservers: { name: string; url: string }[];
    telemetry: { tracing?: unknown };
  };
  if (config.apiservers.length !== o.apiservers.length)
    throw new Error(`the example names ${config.apiservers.length} apiservers, the lab has ${o.apiservers.length}`);
  config.apiservers.forEach((a, i) => {
    a.name = o.apiservers[i]?.name ?? a.name;
    a.url = o.apiservers[i]?.url ?? a.url;
  });
  delete config.telemetry.tracing;
  await mkdir(onNode('etc/skewgate'), { recursive: true });
  await writeFile(onNode('etc/skewgate/skewgate.yaml'), stringify(config), { mode: 0o644 });

  await mkdir(o.pkiDir, { recursive: true });
  const user = `skewgate:${o.nodeName}`;
  const cred = await issueCert({
    dir: o.pkiDir,
    name: 'skewgate',
    subject: `/O=${SKEWGATE_GROUP}/CN=${user}`,
    usage: 'client',
    ca: { certFile: o.pki.caFile, keyFile: o.pki.caKeyFile },
  });
  const embed = async (f: string): Promise<string> => (await readFile(f)).toString('base64');
  await writeFile(
    onNode('etc/skewgate/skewgate.conf'),
    stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [
        { name: 'kubernetes', cluster: { server: o.apiservers[0]?.url, 'certificate-authority-data': await embed(o.pki.caFile) } },
      ],
      users: [
        { name: user, user: { 'client-certificate-data': await embed(cred.certFile), 'client-key-data': await embed(cred.keyFile) } },
      ],
      contexts: [{ name: 'default', context: { cluster: 'kubernetes', user } }],
      'current-context': 'default',
    }),
    { mode: 0o600 },
  );

  // The files the pod mounts one by one (the CA key is not among them).
  await mkdir(onNode('etc/kubernetes/pki'), { recursive: true });
  for (const [to, from] of [
    ['ca.crt', o.pki.caFile],
    ['apiserver.crt', o.pki.serverCertFile],
    ['apiserver.key', o.pki.serverKeyFile],
    ['front-proxy-client.crt', o.pki.frontProxyClientCertFile],
    ['front-proxy-client.key', o.pki.frontProxyClientKeyFile],
  ] as const)
    await copyFile(from, onNode(`etc/kubernetes/pki/${to}`));

  const manifest = parse(await readFile(join(o.recipe, 'skewgate-gateway.yaml'), 'utf8')) as PodManifest;
  for (const vol of manifest.spec.volumes) if (vol.hostPath !== undefined) vol.hostPath.path = onNode(vol.hostPath.path);
  return manifest;
}
