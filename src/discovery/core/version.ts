// An apiserver's version as its /version answers it (k8s.io/apimachinery's version.Info), and when
// a discovery round asks for it again. Pure.

/** How long a version read stays unchecked while nothing else suggests a restart. */
export const VERSION_REFRESH_MS = 30_000;

/** Longest gitVersion kept (kube-apiserver's are like "v1.36.3" or "v1.36.3-eks-1234abcd"). */
const MAX_LENGTH = 128;

/**
 * The gitVersion of a /version body; null for anything else (not JSON, no string gitVersion, an
 * empty or overlong one, or characters other than printable ASCII: it goes into logs, metric
 * labels and span attributes as it is).
 */
export function parseGitVersion(text: string): string | null {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return null;
  }
  const v = doc !== null && typeof doc === 'object' ? (doc as { gitVersion?: unknown }).gitVersion : undefined;
  if (typeof v !== 'string' || v.length === 0 || v.length > MAX_LENGTH || !/^[\x21-\x7e]+$/.test(v)) return null;
  return v;
}

/** What a round knows before it starts: the last version read and when, and whether the last round was ready. */
export interface VersionState {
  readonly gitVersion?: string;
  readonly versionReadAt?: number;
  readonly ready: boolean | null;
  readonly consecutiveFailures: number;
}

/**
 * Whether this round reads /version: none read yet, the last round not ready or failing (the
 * apiserver may be restarting — as another version, in an upgrade or a rollback), or the last read
 * older than VERSION_REFRESH_MS.
 */
export function versionDue(s: VersionState, now: number): boolean {
  if (s.gitVersion === undefined || s.versionReadAt === undefined) return true;
  if (s.ready !== true || s.consecutiveFailures > 0) return true;
  return now - s.versionReadAt >= VERSION_REFRESH_MS;
}
