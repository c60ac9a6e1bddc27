// Label selectors (k8s.io/apimachinery pkg/labels Parse): only validity matters here, because an
// invalid one makes the apiserver drop the field-selector name. Pure.
import { isInt64 } from './go-strings.js';

const T_EOS = 1;
const T_CLOSE = 2;
const T_COMMA = 3;
const T_NOT = 4;
const T_DOUBLE_EQ = 5;
const T_EQ = 6;
const T_GT = 7;
const T_ID = 8;
const T_IN = 9;
const T_LT = 10;
const T_NOT_EQ = 11;
const T_NOT_IN = 12;
const T_OPEN = 13;

function symbolToken(s: string): number {
  switch (s) {
    case ')':
      return T_CLOSE;
    case ',':
      return T_COMMA;
    case '!':
      return T_NOT;
    case '==':
      return T_DOUBLE_EQ;
    case '=':
      return T_EQ;
    case '>':
      return T_GT;
    case '<':
      return T_LT;
    case '!=':
      return T_NOT_EQ;
    case '(':
      return T_OPEN;
    default:
      return 0;
  }
}

function isSelectorWhitespace(c: number): boolean {
  return c === 0x20 || c === 0x09 || c === 0x0d || c === 0x0a;
}

function isSelectorSymbol(c: number): boolean {
  return c === 0x3d || c === 0x21 || c === 0x28 || c === 0x29 || c === 0x2c || c === 0x3e || c === 0x3c;
}

interface Tokens {
  readonly toks: number[];
  readonly lits: string[];
}

/** The apiserver's lexer, including its quirk that a NUL reads as end of input. */
function lexLabelSelector(s: string): Tokens {
  const toks: number[] = [];
  const lits: string[] = [];
  let pos = 0;
  const read = (): number => (pos < s.length ? s.charCodeAt(pos++) : 0);
  for (;;) {
    let ch = read();
    while (isSelectorWhitespace(ch)) ch = read();
    if (ch === 0) {
      toks.push(T_EOS);
      lits.push('');
      return { toks, lits };
    }
    pos--;
    if (isSelectorSymbol(ch)) {
      let buffer = '';
      let tok = 0;
      let lit = '';
      for (;;) {
        const c = read();
        if (c === 0) break;
        if (!isSelectorSymbol(c)) {
          pos--;
          break;
        }
        buffer += String.fromCharCode(c);
        const t = symbolToken(buffer);
        if (t !== 0) {
          tok = t;
          lit = buffer;
        } else if (tok !== 0) {
          pos--;
          break;
        }
      }
      toks.push(tok);
      lits.push(lit);
    } else {
      const begin = pos;
      let lit = '';
      for (;;) {
        const at = pos;
        const c = read();
        if (c === 0) {
          lit = s.slice(begin, at);
          break;
        }
        if (isSelectorSymbol(c) || isSelectorWhitespace(c)) {
          pos--;
          lit = s.slice(begin, at);
          break;
        }
      }
      toks.push(lit === 'in' ? T_IN : lit === 'notin' ? T_NOT_IN : T_ID);
      lits.push(lit);
    }
  }
}

export function isLabelSelector(selector: string): boolean {
  const { toks, lits } = lexLabelSelector(selector);
  let p = 0;
  // in a value position the keywords 'in' and 'notin' are plain identifiers
  const look = (values: boolean): number => {
    const t = toks[p] ?? T_EOS;
    return values && (t === T_IN || t === T_NOT_IN) ? T_ID : t;
  };
  const consume = (values: boolean): number => {
    const t = look(values);
    p++;
    return t;
  };
  const literal = (): string => lits[p - 1] ?? '';

  const identifierList = (): string[] | null => {
    const values: string[] = [];
    for (;;) {
      const t = consume(true);
      if (t === T_ID) {
        values.push(literal());
        const next = look(true);
        if (next === T_COMMA) continue;
        if (next === T_CLOSE) return values;
        return null;
      }
      if (t !== T_COMMA) return null;
      if (values.length === 0) values.push('');
      const next = look(true);
      if (next === T_CLOSE) {
        values.push('');
        return values;
      }
      if (next === T_COMMA) values.push('');
    }
  };

  const setValues = (): string[] | null => {
    if (consume(true) !== T_OPEN) return null;
    const t = look(true);
    if (t === T_ID || t === T_COMMA) {
      const values = identifierList();
      if (values === null || consume(true) !== T_CLOSE) return null;
      return values;
    }
    if (t === T_CLOSE) {
      consume(true);
      return [''];
    }
    return null;
  };

  const exactValue = (): string[] | null => {
    const t = look(true);
    if (t === T_EOS || t === T_COMMA) return [''];
    return consume(true) === T_ID ? [literal()] : null;
  };

  const requirement = (): boolean => {
    let t = consume(true);
    let negated = false;
    if (t === T_NOT) {
      negated = true;
      t = consume(true);
    }
    if (t !== T_ID || !isQualifiedName(literal())) return false;
    const after = look(true);
    if (negated || after === T_EOS || after === T_COMMA) return true;
    const op = consume(false);
    let values: string[] | null;
    if (op === T_IN || op === T_NOT_IN) values = setValues();
    else if (op === T_EQ || op === T_DOUBLE_EQ || op === T_NOT_EQ || op === T_GT || op === T_LT) values = exactValue();
    else return false;
    if (values === null) return false;
    for (const v of values) {
      if (!isLabelValue(v)) return false;
      if ((op === T_GT || op === T_LT) && !isInt64(v)) return false;
    }
    return true;
  };

  for (;;) {
    const t = look(true);
    if (t === T_EOS) return true;
    if (t !== T_ID && t !== T_NOT) return false;
    if (!requirement()) return false;
    const sep = consume(true);
    if (sep === T_EOS) return true;
    if (sep !== T_COMMA) return false;
    const next = look(true);
    if (next !== T_ID && next !== T_NOT) return false;
  }
}

const QUALIFIED_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** A label key: [DNS-1123 subdomain '/'] name, the name at most 63 characters. */
function isQualifiedName(key: string): boolean {
  const slash = key.indexOf('/');
  let name = key;
  if (slash >= 0) {
    const prefix = key.slice(0, slash);
    name = key.slice(slash + 1);
    if (name.includes('/')) return false;
    if (prefix.length === 0 || prefix.length > 253 || !DNS1123_SUBDOMAIN.test(prefix)) return false;
  }
  return name.length > 0 && name.length <= 63 && QUALIFIED_NAME.test(name);
}

function isLabelValue(value: string): boolean {
  return value === '' || (value.length <= 63 && QUALIFIED_NAME.test(value));
}
