// The vocabulary every section of the Envoy bootstrap renderer shares: the JSON value types,
// Envoy's Duration form, file paths as rendered, and the renderer's error. Pure.
import type { ErrorCode } from '../errors/catalog.js';
import { isAbsolute, relative, sep } from 'node:path';

export type Json = string | number | boolean | null | readonly Json[] | { readonly [key: string]: Json };
export type JsonObject = { readonly [key: string]: Json };

export class BootstrapError extends Error {
  readonly code = 'SKEWGATE_ERR_BOOTSTRAP' satisfies ErrorCode;
  constructor(message: string) {
    super(message);
    this.name = 'BootstrapError';
  }
}

/** Envoy's Duration JSON form. */
export function duration(ms: number): string {
  const s = (ms / 1000).toFixed(3).replace(/\.?0+$/, '');
  return `${s === '' ? '0' : s}s`;
}

/** Paths inside `base` become relative ("examples/pki/ca.crt"); others stay as the config named them. */
export function renderPath(p: string, base: string | undefined): string {
  if (base === undefined || !isAbsolute(p)) return p;
  const rel = relative(base, p);
  if (rel === '' || rel.startsWith('..') || isAbsolute(rel)) return p;
  return rel.split(sep).join('/');
}

export type PathFn = (p: string) => string;
