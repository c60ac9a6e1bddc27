// The fake control plane used by tests and `skewgate-lab demo`.
export {
  FakeApiServer,
  FRONT_PROXY_ALLOWED_NAMES,
  type DiscoveryFault,
  type FakeApiServerOptions,
  type FakeUser,
  type RecordedRequest,
} from './apiserver.js';
export { BUILTINS_NEW, BUILTINS_OLD } from './builtins.js';
export { FakeCluster, type FakeResource, type KObject, type WatchEvent } from './cluster.js';
export { createPki, type KeyPairFiles, type Pki, type TestClientCerts } from './pki.js';
export { BlackholeProxy } from './blackhole-proxy.js';
