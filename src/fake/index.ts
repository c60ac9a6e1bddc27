// The fake control plane used by tests and `skewgate demo`.
export { FakeApiServer, type DiscoveryFault, type FakeApiServerOptions, type RecordedRequest } from './apiserver.js';
export { BUILTINS_NEW, BUILTINS_OLD } from './builtins.js';
export { FakeCluster, type FakeResource, type KObject, type WatchEvent } from './cluster.js';
export { createPki, type Pki } from './pki.js';
