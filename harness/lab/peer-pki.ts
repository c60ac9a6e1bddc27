// The certificates of a lab gateway's channel to a peer skewgate (envoy.extprocPeers and
// extproc.peer, deploy/replicas.md): a CA of its own, the peer's serving certificate (verified by
// the name PEER_SERVER_NAME) and Envoy's client certificate. Issued once per gateway start.
import { mkdir } from 'node:fs/promises';
import { issueCert, type KeyPairFiles } from '../openssl.js';

export const PEER_SERVER_NAME = 'skewgate-peer';

export interface PeerChannelPki {
  readonly ca: KeyPairFiles;
  readonly serving: KeyPairFiles;
  readonly envoyClient: KeyPairFiles;
}

export async function issuePeerChannelPki(dir: string): Promise<PeerChannelPki> {
  await mkdir(dir, { recursive: true });
  const ca = await issueCert({ dir, name: 'peer-ca', subject: '/CN=skewgate-lab-peer-ca', usage: 'ca' });
  const serving = await issueCert({
    dir,
    name: 'peer-serving',
    subject: `/CN=${PEER_SERVER_NAME}`,
    usage: 'server',
    ca,
    sans: [`DNS:${PEER_SERVER_NAME}`, 'IP:127.0.0.1'],
  });
  const envoyClient = await issueCert({ dir, name: 'envoy-peer-client', subject: '/CN=skewgate-lab-envoy', usage: 'client', ca });
  return { ca, serving, envoyClient };
}
