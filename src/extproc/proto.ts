// Loads skewgate's hand-written protos once, from the proto/ folder at the package root.
import { existsSync } from 'node:fs';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { packageRoot } from '../util/package-root.js';

export const EXTPROC_PROTO_FILE = 'envoy/service/ext_proc/v3/external_processor.proto';
export const HEALTH_PROTO_FILE = 'grpc/health/v1/health.proto';
/** Fully qualified service names; they are part of the gRPC method paths. */
export const EXTPROC_SERVICE_PATH = 'envoy.service.ext_proc.v3.ExternalProcessor';
export const HEALTH_SERVICE_PATH = 'grpc.health.v1.Health';

export const PROTO_LOADER_OPTIONS: protoLoader.Options = Object.freeze({
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
});

/** The folder holding envoy/ and grpc/ protos: proto/ at the package root. */
export function findProtoRoot(): string {
  const root = path.join(packageRoot(), 'proto');
  if (!existsSync(path.join(root, EXTPROC_PROTO_FILE))) throw new Error(`skewgate: no ${EXTPROC_PROTO_FILE} in ${root}`);
  return root;
}

export interface LoadedProtos {
  readonly protoRoot: string;
  readonly extProc: grpc.ServiceDefinition;
  readonly health: grpc.ServiceDefinition;
  readonly ExtProcClient: grpc.ServiceClientConstructor;
  readonly HealthClient: grpc.ServiceClientConstructor;
}

let loaded: LoadedProtos | undefined;

function serviceDefinition(def: protoLoader.PackageDefinition, name: string): grpc.ServiceDefinition {
  const found = def[name];
  // A service entry is a map of method definitions; message/enum entries carry a `format` field.
  if (!found || 'format' in found) throw new Error(`skewgate: service ${name} missing from protos`);
  return found as unknown as grpc.ServiceDefinition;
}

/** Parses the protos on first use (synchronous, start-up only) and caches the result. */
export function loadProtos(): LoadedProtos {
  if (loaded) return loaded;
  const protoRoot = findProtoRoot();
  const def = protoLoader.loadSync([EXTPROC_PROTO_FILE, HEALTH_PROTO_FILE], {
    ...PROTO_LOADER_OPTIONS,
    includeDirs: [protoRoot],
  });
  const extProc = serviceDefinition(def, EXTPROC_SERVICE_PATH);
  const health = serviceDefinition(def, HEALTH_SERVICE_PATH);
  loaded = {
    protoRoot,
    extProc,
    health,
    ExtProcClient: grpc.makeClientConstructor(extProc, EXTPROC_SERVICE_PATH),
    HealthClient: grpc.makeClientConstructor(health, HEALTH_SERVICE_PATH),
  };
  return loaded;
}
