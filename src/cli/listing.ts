// How the listing commands (status, skew, history, validate) print, as kubectl does: only data on
// stdout — the table (-o wide: more columns), the names (-o name), or the whole answer (-o
// json|yaml) — and everything said to a person (whose view this is, notes, the summary, problems)
// on stderr, so that `skewgate status | awk …` reads rows only. --no-headers drops the header row.
import type { ListFormat } from './formats.js';
import type { LogFormat } from '../util/log.js';
import { formatTable, structured } from './one-shot.js';

export interface Column<T> {
  readonly header: string;
  readonly cell: (row: T) => string;
  /** Only with -o wide. */
  readonly wide?: boolean;
}

export interface Listing<T> {
  readonly rows: readonly T[];
  readonly columns: readonly Column<T>[];
  /** The row's name, for -o name. */
  readonly name: (row: T) => string;
  /** The whole answer, for -o json|yaml. */
  readonly data: unknown;
}

export interface ListOptions {
  readonly format: ListFormat;
  readonly noHeaders?: boolean;
  /** --log-format json: what is said to a person goes to stderr as JSON lines too (level info). */
  readonly logFormat?: LogFormat | undefined;
}

/** What goes to stdout for this listing (an empty table is nothing, not a lone header). */
export function renderListing<T>(l: Listing<T>, o: ListOptions): string {
  const data = structured(o.format, l.data);
  if (data !== null) return data;
  if (o.format === 'name') return l.rows.map((r) => `${l.name(r)}\n`).join('');
  if (l.rows.length === 0) return '';
  const columns = l.columns.filter((c) => o.format === 'wide' || c.wide !== true);
  const body = l.rows.map((r) => columns.map((c) => c.cell(r)));
  return formatTable(o.noHeaders === true ? body : [columns.map((c) => c.header), ...body]);
}

/** Whether a format prints rows (table, wide, name) rather than the whole answer: then the notes go to stderr. */
export function isRowFormat(format: ListFormat): boolean {
  return format === 'table' || format === 'wide' || format === 'name';
}

/**
 * Lines for a person: on stderr, and only beside rows (json and yaml hold them in the answer); with
 * --log-format json, one JSON line each, so that stderr stays JSON lines throughout.
 */
export function sayAside(list: ListOptions, lines: readonly string[]): void {
  if (!isRowFormat(list.format) || lines.length === 0) return;
  if (list.logFormat === 'json') {
    const time = new Date().toISOString();
    process.stderr.write(lines.map((msg) => `${JSON.stringify({ level: 'info', time, service: 'skewgate', msg })}\n`).join(''));
    return;
  }
  process.stderr.write(`${lines.join('\n')}\n`);
}
