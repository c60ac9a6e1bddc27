// Pure: JSON.parse of a large discovery list in pieces. An aggregated /apis of a big cluster is
// tens of megabytes; one JSON.parse of it holds the event loop for a hundred milliseconds or more.
// Its bulk is one array (`items`) of objects, so the text is scanned for that array's elements and
// each is parsed on its own, with pause points between; an element too large for one pause (a group
// of many resources) is split the same way, a level down. The result is the same as
// JSON.parse of the whole; at any doubt (malformed text, the key repeated or escaped) the whole is
// parsed at once instead, and that parse's error is the one reported — unless the text is past
// maxPieceChars: then nothing that large is parsed at once, and the error names the piece.
import { type Sliced } from '../../util/core/sliced.js';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const COMMA = 0x2c;
const COLON = 0x3a;

/** Characters scanned between two pause points. */
const SCAN_CHUNK = 64 * 1024;

interface Spans {
  /** Index of the array's '[' and its ']'. */
  readonly open: number;
  readonly close: number;
  /** [start, end) of each element, whitespace included. */
  readonly elements: readonly (readonly [number, number])[];
}

/**
 * Where the array under top-level key `key` and its elements are, or null when the text is not an
 * object holding exactly one such array (or is malformed in a way the scan sees).
 */
function* findItems(text: string, key: string): Sliced<Spans | null> {
  const quotedKey = JSON.stringify(key);
  let depth = 0;
  let inString = false;
  let stringStart = -1;
  let lastString = '';
  let currentKey = '';
  let open = -1;
  let close = -1;
  let elementStart = -1;
  const elements: [number, number][] = [];
  for (let i = 0; i < text.length; i++) {
    if (i % SCAN_CHUNK === 0 && i > 0) yield;
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) {
        inString = false;
        if (depth === 1) lastString = text.slice(stringStart, i + 1);
      }
      continue;
    }
    switch (c) {
      case QUOTE:
        inString = true;
        stringStart = i;
        break;
      case COLON:
        if (depth === 1) {
          // An escaped key could spell `key` another way, and JSON.parse keeps the last of equal keys.
          if (lastString.includes('\\')) return null;
          currentKey = lastString;
        }
        break;
      case OPEN_OBJECT:
      case OPEN_ARRAY:
        if (depth === 0 && c !== OPEN_OBJECT) return null;
        if (depth === 1 && c === OPEN_ARRAY && currentKey === quotedKey) {
          if (open >= 0) return null; // the key twice: JSON.parse keeps the last; let it decide
          open = i;
          elementStart = i + 1;
        }
        depth++;
        break;
      case CLOSE_OBJECT:
      case CLOSE_ARRAY:
        depth--;
        if (depth < 0) return null;
        if (depth === 1 && open >= 0 && close < 0 && c === CLOSE_ARRAY) {
          close = i;
          if (text.slice(elementStart, i).trim() !== '' || elements.length > 0) elements.push([elementStart, i]);
        }
        break;
      case COMMA:
        if (depth === 2 && open >= 0 && close < 0) {
          elements.push([elementStart, i]);
          elementStart = i + 1;
        }
        break;
      default:
        break;
    }
  }
  if (inString || depth !== 0 || open < 0 || close < 0) return null;
  return { open, close, elements };
}

/**
 * An element longer than this is split in turn, at the next key of the path: one group holding
 * 200,000 resources was one JSON.parse of it, ~250 ms on the event loop (issue 31).
 */
export const NESTED_MIN_CHARS = 64 * 1024;

/** An aggregated discovery list's bulk: its groups, a group's versions, a version's resources. */
export const AGGREGATED_PATH: readonly string[] = ['items', 'versions', 'resources'];

/**
 * Past this, one piece of a document is not parsed at once (PieceTooLargeError): JSON.parse of a
 * mebibyte takes ~10 ms here, and kube-apiserver writes no resource entry, nor a group or version
 * without its list, of more than a few KB. Without it, one resource of 8 MB of shortNames, or a
 * malformed document re-parsed whole for its error, would hold the event loop for 200 ms (issue 31).
 */
export const MAX_PIECE_CHARS = 1024 * 1024;

/** A piece of the text too large to be parsed at once: the document is refused, as one past the size cap is. */
export class PieceTooLargeError extends RangeError {
  constructor(
    readonly where: string,
    readonly chars: number,
    readonly limit: number,
  ) {
    super(`${where} is ${chars.toLocaleString('en-US')} characters of JSON, more than the ${limit.toLocaleString('en-US')} parsed at once`);
    this.name = 'PieceTooLargeError';
  }
}

/** A piece's own JSON.parse error, naming the piece: what a malformed text past maxPieceChars throws. */
export class PieceSyntaxError extends SyntaxError {
  constructor(message: string, where: string) {
    super(`${message} (in ${where})`);
    this.name = 'SyntaxError';
  }
}

export interface PieceLimits {
  /** An element longer than this is split at the next key of the path (default NESTED_MIN_CHARS). */
  readonly nestedMinChars?: number;
  /** No JSON.parse of more than this (default: none). */
  readonly maxPieceChars?: number;
}

/**
 * JSON.parse(text), with the elements of the top-level array under path[0] parsed one at a time,
 * and an element longer than nestedMinChars split the same way at path[1] (and so on). Throws what
 * JSON.parse of the whole throws; with maxPieceChars, a piece past it that would be parsed at once
 * throws PieceTooLargeError instead, and a malformed element of a text past it throws that element's
 * own error (naming where it is), not the whole's.
 */
export function* parseJsonSteps(
  text: string,
  path: string | readonly string[] = 'items',
  limits: number | PieceLimits = {},
  where = 'the document',
): Sliced<unknown> {
  const { nestedMinChars = NESTED_MIN_CHARS, maxPieceChars = Number.POSITIVE_INFINITY } =
    typeof limits === 'number' ? { nestedMinChars: limits } : limits;
  const whole = (why = ''): unknown => {
    if (text.length > maxPieceChars) throw new PieceTooLargeError(`${where}${why}`, text.length, maxPieceChars);
    return JSON.parse(text) as unknown;
  };
  const [key, ...deeper] = typeof path === 'string' ? [path] : path;
  if (key === undefined) return whole();
  const spans = yield* findItems(text, key);
  if (spans === null) return whole(`, which does not split at ${JSON.stringify(key)} (malformed, or no such list),`);
  let envelope: unknown;
  const items: unknown[] = [];
  let at = `${where} without its ${key}`;
  try {
    const rest = `${text.slice(0, spans.open)}[]${text.slice(spans.close + 1)}`;
    if (rest.length > maxPieceChars) throw new PieceTooLargeError(at, rest.length, maxPieceChars);
    envelope = JSON.parse(rest) as unknown;
    for (let i = 0; i < spans.elements.length; i++) {
      const [start, end] = spans.elements[i] as readonly [number, number];
      at = `${where === 'the document' ? '' : `${where}.`}${key}[${i}]`;
      const piece = text.slice(start, end);
      if (deeper.length > 0 && end - start > nestedMinChars) {
        items.push(yield* parseJsonSteps(piece, deeper, { nestedMinChars, maxPieceChars }, at));
      } else {
        if (piece.length > maxPieceChars) throw new PieceTooLargeError(at, piece.length, maxPieceChars);
        items.push(JSON.parse(piece) as unknown);
      }
      yield;
    }
  } catch (err) {
    if (err instanceof PieceTooLargeError || err instanceof PieceSyntaxError) throw err;
    if (text.length <= maxPieceChars) return JSON.parse(text) as unknown; // the whole document's error, with its position
    throw new PieceSyntaxError((err as Error).message, at);
  }
  if (envelope === null || typeof envelope !== 'object' || Array.isArray(envelope)) return whole();
  (envelope as Record<string, unknown>)[key] = items;
  return envelope;
}
