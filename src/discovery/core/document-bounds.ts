// Bounds on the discovery documents skewgate reads from each apiserver: the size cap, the backoff
// of a document whose download failed, and which documents are flagged as bloated. Pure: numbers
// in, numbers and messages out (the client and the service do the I/O and the logging).

/**
 * A document above this share of the cap is flagged: at half the cap, a cluster that doubles its
 * APIs would start failing discovery, and the operator should hear of it before that.
 */
export const BLOAT_SHARE = 0.5;

/** The size above which a document is flagged as bloated. */
export function bloatThreshold(maxDocumentBytes: number): number {
  return Math.floor(maxDocumentBytes * BLOAT_SHARE);
}

/**
 * How long after its f-th consecutive failed download a document is not downloaded again. The
 * first failure puts nothing off: with an ETag the next round is a 304 anyway, and a fix is read
 * at once. From the second on: the interval, doubling per failure, at most maxMs (and never less
 * than the interval).
 */
export function downloadBackoffMs(failures: number, intervalMs: number, maxMs: number): number {
  if (failures <= 1) return 0;
  return Math.max(intervalMs, Math.min(maxMs, intervalMs * 2 ** Math.min(failures - 2, 30)));
}

export interface BloatChange {
  /** The documents above the threshold now. */
  readonly flagged: ReadonlySet<string>;
  /** Newly above it: warn once for each. */
  readonly grew: readonly (readonly [document: string, bytes: number])[];
  /** Back at or below it: say so once. */
  readonly shrank: readonly (readonly [document: string, bytes: number])[];
}

/**
 * Which documents cross the bloat threshold between two rounds. A document not in `sizes` (not
 * read yet) keeps its flag: a flag changes only on a known size.
 */
export function bloatChange(flagged: ReadonlySet<string>, sizes: ReadonlyMap<string, number>, threshold: number): BloatChange {
  const next = new Set(flagged);
  const grew: [string, number][] = [];
  const shrank: [string, number][] = [];
  for (const [doc, bytes] of sizes) {
    const over = bytes > threshold;
    if (over && !flagged.has(doc)) {
      next.add(doc);
      grew.push([doc, bytes]);
    } else if (!over && flagged.has(doc)) {
      next.delete(doc);
      shrank.push([doc, bytes]);
    }
  }
  return { flagged: grew.length === 0 && shrank.length === 0 ? flagged : next, grew, shrank };
}
