// Field selectors (k8s.io/apimachinery pkg/fields): only "does it parse" and the exact
// metadata.name value matter here. Pure.
import { compareGoStrings } from './go-strings.js';

/**
 * The value required for metadata.name by a field selector; undefined when no term requires one,
 * null when the selector does not parse.
 */
export function fieldSelectorName(selector: string): string | undefined | null {
  let bestTerm: string | undefined;
  let bestValue: string | undefined;
  let termStart = 0;
  let escaped = false;
  for (let i = 0; i <= selector.length; i++) {
    if (i < selector.length) {
      const c = selector.charCodeAt(i);
      if (escaped) {
        escaped = false;
        continue;
      }
      if (c === 0x5c) {
        escaped = true;
        continue;
      }
      if (c !== 0x2c) continue;
    }
    const term = selector.slice(termStart, i);
    termStart = i + 1;
    if (term === '') continue;
    const parsed = parseFieldTerm(term);
    if (parsed === null) return null;
    // the apiserver sorts terms and takes the first matching equality term
    if (parsed.equality && parsed.field === 'metadata.name' && (bestTerm === undefined || compareGoStrings(term, bestTerm) < 0)) {
      bestTerm = term;
      bestValue = parsed.value;
    }
  }
  return bestValue;
}

interface FieldTerm {
  readonly field: string;
  readonly equality: boolean;
  readonly value: string;
}

function parseFieldTerm(term: string): FieldTerm | null {
  // the first operator occurrence splits; at one position '!=' beats '==' beats '='
  for (let i = 0; i < term.length; i++) {
    const c = term.charCodeAt(i);
    let opLen = 0;
    let equality = true;
    if (c === 0x21 && term.charCodeAt(i + 1) === 0x3d) {
      opLen = 2;
      equality = false;
    } else if (c === 0x3d) opLen = term.charCodeAt(i + 1) === 0x3d ? 2 : 1;
    if (opLen === 0) continue;
    const value = unescapeFieldValue(term.slice(i + opLen));
    if (value === null) return null;
    return { field: term.slice(0, i), equality, value };
  }
  return null;
}

/** fields.UnescapeValue: '\\' may escape only '\\', ',' and '='; bare ',' or '=' are errors. */
function unescapeFieldValue(s: string): string | null {
  if (!s.includes('\\') && !s.includes(',') && !s.includes('=')) return s;
  let out = '';
  let escaped = false;
  for (let i = 0; i < s.length; i++) {
    const ch = s[i] ?? '';
    if (escaped) {
      if (ch !== '\\' && ch !== ',' && ch !== '=') return null;
      out += ch;
      escaped = false;
    } else if (ch === '\\') {
      escaped = true;
    } else if (ch === ',' || ch === '=') {
      return null;
    } else {
      out += ch;
    }
  }
  return escaped ? null : out;
}
