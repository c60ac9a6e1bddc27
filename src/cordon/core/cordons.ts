// Cordons: an operator's word that an apiserver should take less, kept apart from what discovery
// sees. A cordoned apiserver gets only what no other member can serve; a drained one gets nothing
// new (docs/design.md, "Cordon"). The table, the file it is kept in across restarts, and the
// order in which routing and Envoy hear of a change. Pure; the time comes in.

/** cordon: only what nobody else can serve; drain: nothing new. */
export type CordonMode = 'cordon' | 'drain';
export const CORDON_MODES: readonly CordonMode[] = Object.freeze(['cordon', 'drain']);

export interface Cordon {
  readonly apiserver: string;
  readonly mode: CordonMode;
  /** Who asked, as the asker named itself ("alice@host", "capi-hook"); the admin endpoint has no authentication. */
  readonly by: string;
  /** Why, in the asker's words ('' when none was given). */
  readonly reason: string;
  /** When, RFC 3339. */
  readonly at: string;
}

/** Apiserver name → its cordon. Replaced, never changed. */
export type CordonTable = ReadonlyMap<string, Cordon>;

export const NO_CORDONS: CordonTable = new Map<string, Cordon>();

/** Kept beside Envoy's xDS files (envoy.xds.directory): both are the gateway's state across restarts. */
export const CORDON_FILE = 'cordons.json';
const FILE_KIND = 'SkewgateCordons';
const FILE_VERSION = 1;

export function withCordon(table: CordonTable, c: Cordon): CordonTable {
  const next = new Map(table);
  next.set(c.apiserver, Object.freeze({ ...c }));
  return next;
}

export function withoutCordon(table: CordonTable, apiserver: string): CordonTable {
  if (!table.has(apiserver)) return table;
  const next = new Map(table);
  next.delete(apiserver);
  return next;
}

/**
 * Who must hear of a change first. Taking an apiserver's routes away (to drain): routing stops
 * naming it before Envoy drops its route, or a request routed to it meets no route. Giving them
 * back (from drain): Envoy first, for the same reason. Otherwise its routes stay as they are.
 */
export function cordonOrder(before: CordonMode | undefined, after: CordonMode | undefined): 'routing first' | 'envoy first' | 'together' {
  if (after === 'drain' && before !== 'drain') return 'routing first';
  if (before === 'drain' && after !== 'drain') return 'envoy first';
  return 'together';
}

export function cordonFileText(table: CordonTable): string {
  const cordons = [...table.values()].sort((a, b) => (a.apiserver < b.apiserver ? -1 : a.apiserver > b.apiserver ? 1 : 0));
  return `${JSON.stringify({ kind: FILE_KIND, version: FILE_VERSION, cordons }, null, 2)}\n`;
}

/** The table a cordons file holds, and what in it could not be read (each entry skipped is named). */
export function parseCordonFile(text: string): { readonly table: CordonTable; readonly problems: readonly string[] } {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    return { table: NO_CORDONS, problems: [`not JSON: ${(err as Error).message}`] };
  }
  const d = doc as { kind?: unknown; version?: unknown; cordons?: unknown } | null;
  if (d === null || typeof d !== 'object' || d.kind !== FILE_KIND || d.version !== FILE_VERSION || !Array.isArray(d.cordons))
    return { table: NO_CORDONS, problems: [`not a ${FILE_KIND} document of version ${FILE_VERSION}`] };
  const problems: string[] = [];
  let table = NO_CORDONS;
  d.cordons.forEach((entry: unknown, i: number) => {
    const c = cordonOf(entry);
    if (typeof c === 'string') problems.push(`cordons[${i}]: ${c}`);
    else table = withCordon(table, c);
  });
  return { table, problems };
}

function cordonOf(entry: unknown): Cordon | string {
  const e = entry as Partial<Record<keyof Cordon, unknown>> | null;
  if (e === null || typeof e !== 'object') return 'not an object';
  if (typeof e.apiserver !== 'string' || e.apiserver === '') return 'apiserver: missing';
  if (!CORDON_MODES.includes(e.mode as CordonMode)) return `mode: must be one of ${CORDON_MODES.join(', ')}`;
  if (typeof e.at !== 'string' || Number.isNaN(Date.parse(e.at))) return 'at: not a time';
  return {
    apiserver: e.apiserver,
    mode: e.mode as CordonMode,
    by: typeof e.by === 'string' ? e.by : '',
    reason: typeof e.reason === 'string' ? e.reason : '',
    at: e.at,
  };
}

/** What POST /v1/cordon and /v1/uncordon take. */
export interface CordonRequest {
  readonly apiserver: string;
  /** Absent on uncordon. */
  readonly mode?: CordonMode;
  readonly by: string;
  readonly reason: string;
}

/** The longest `by` and `reason` kept: they go into logs, spans and the file. */
export const CORDON_TEXT_MAX = 256;

/** A request body checked: the request, or every problem with it. */
export function cordonRequestOf(body: unknown, uncordon: boolean): CordonRequest | readonly string[] {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return ['the body must be a JSON object'];
  const b = body as Record<string, unknown>;
  const fields = uncordon ? ['apiserver', 'by', 'reason'] : ['apiserver', 'mode', 'by', 'reason'];
  const problems = Object.keys(b)
    .filter((k) => !fields.includes(k))
    .map((k) => `unknown field ${JSON.stringify(k)}`);
  if (typeof b['apiserver'] !== 'string' || b['apiserver'] === '')
    problems.push('apiserver: the name of a member, as `skewgate status` lists it');
  const mode = b['mode'] ?? 'cordon';
  if (!uncordon && !CORDON_MODES.includes(mode as CordonMode)) problems.push(`mode: one of ${CORDON_MODES.join(', ')}`);
  for (const k of ['by', 'reason'])
    if (b[k] !== undefined && (typeof b[k] !== 'string' || b[k].length > CORDON_TEXT_MAX))
      problems.push(`${k}: a string of at most ${CORDON_TEXT_MAX} characters`);
  if (problems.length > 0) return problems;
  return {
    apiserver: b['apiserver'] as string,
    ...(uncordon ? {} : { mode: mode as CordonMode }),
    by: (b['by'] as string | undefined) ?? '',
    reason: (b['reason'] as string | undefined) ?? '',
  };
}

/** One change as it is logged, traced and kept in the history. */
export interface CordonChange {
  readonly apiserver: string;
  readonly before: CordonMode | null;
  readonly after: CordonMode | null;
  readonly by: string;
  readonly reason: string;
  /** Where the admin request came from ("unix socket", "127.0.0.1:53412"). */
  readonly peer: string;
}
