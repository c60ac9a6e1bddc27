// Bounds on what skewgate reads from an apiserver: the size cap on a body (discovery.maxDocumentBytes)
// and on an error answer, and the message that names the cap. Pure.

/** The config key of the cap, named in every error and log line about it. */
export const MAX_DOCUMENT_BYTES_KEY = 'discovery.maxDocumentBytes';

/** Error answers are read only for their Status message (200 characters of it are kept). */
export const ERROR_BODY_BYTES = 64 * 1024;

/** What showed a body too large: its Content-Length (nothing read), or the bytes read before stopping. */
export type Oversize = { readonly contentLength: number } | { readonly read: number };

export function tooLargeMessage(method: string, url: string, limit: number, seen: Oversize): string {
  const how =
    'contentLength' in seen
      ? `its Content-Length is ${seen.contentLength} bytes, not read`
      : `the download was stopped after ${seen.read} bytes`;
  return `${method} ${url}: the body is larger than ${MAX_DOCUMENT_BYTES_KEY} (${limit} bytes): ${how}; raise ${MAX_DOCUMENT_BYTES_KEY} if the document is genuine`;
}

/** A Content-Length header as a byte count; null when absent or not a plain decimal. */
export function contentLength(header: string | null): number | null {
  if (header === null || !/^\s*\d+\s*$/.test(header)) return null;
  const n = Number(header);
  return Number.isSafeInteger(n) ? n : null;
}
