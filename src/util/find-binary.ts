// Finding an external binary to run (Envoy here; the harness's kube-apiserver, etcd, kubectl and
// Jaeger): an explicit path, else an environment variable, else a default under the package root.
// Whatever is chosen must be executable, or the caller's own error names the fix.
import { accessSync, constants as fsConstants } from 'node:fs';

/** $name when it is set and not empty, else fallback(). */
export function pathFromEnv(name: string, fallback: () => string): string {
  const value = process.env[name];
  return value !== undefined && value !== '' ? value : fallback();
}

/** `path` when it is executable by this process; else throws missing(path). */
export function requireExecutable(path: string, missing: (path: string) => Error): string {
  try {
    accessSync(path, fsConstants.X_OK);
  } catch {
    throw missing(path);
  }
  return path;
}

export interface FindBinaryOptions {
  /** A path given by the caller (an option, a flag): used as it is. */
  readonly explicit?: string | undefined;
  /** The environment variable that overrides the default. */
  readonly env: string;
  /** The default, e.g. under the package root's .tools/. */
  readonly fallback: () => string;
  readonly missing: (path: string) => Error;
}

/** Explicit path, else $env, else the fallback; throws `missing` when that is not executable. */
export function findBinary(o: FindBinaryOptions): string {
  return requireExecutable(o.explicit ?? pathFromEnv(o.env, o.fallback), o.missing);
}
