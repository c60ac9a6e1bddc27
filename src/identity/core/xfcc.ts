// Envoy's x-forwarded-client-cert header: elements separated by ",", each a list of key=value
// pairs separated by ";", values optionally double-quoted with backslash escapes. Envoy writes the
// header itself (SANITIZE_SET) after stripping a client's copy, so exactly one element is expected.
// Pure.

/** One XFCC element; keys lower-cased (Envoy writes By, Hash, Cert, Chain, Subject, URI, DNS). */
export type XfccElement = ReadonlyMap<string, string>;

export type XfccResult =
  { readonly ok: true; readonly elements: readonly XfccElement[] } | { readonly ok: false; readonly problem: string };

export function parseXfcc(header: string): XfccResult {
  const elements: XfccElement[] = [];
  let pairs = new Map<string, string>();
  let key = '';
  let value = '';
  let inKey = true;
  let quoted = false;
  let wasQuoted = false;

  const endPair = (): string | null => {
    const k = key.trim().toLowerCase();
    const v = wasQuoted ? value : value.trim();
    if (k === '' && v === '' && inKey) return null; // empty pair, e.g. a trailing ";"
    if (k === '' || inKey) return `malformed pair "${key}${inKey ? '' : `=${value}`}"`;
    if (pairs.has(k)) return `key "${k}" appears twice in one element`;
    pairs.set(k, v);
    key = '';
    value = '';
    inKey = true;
    wasQuoted = false;
    return null;
  };

  for (let i = 0; i < header.length; i++) {
    const c = header[i] as string;
    if (quoted) {
      if (c === '\\' && i + 1 < header.length) {
        value += header[++i];
      } else if (c === '"') {
        quoted = false;
      } else {
        value += c;
      }
      continue;
    }
    if (inKey) {
      if (c === '=') inKey = false;
      else if (c === ';' || c === ',') {
        const problem = endPair();
        if (problem) return { ok: false, problem };
        if (c === ',') {
          if (pairs.size > 0) elements.push(pairs);
          pairs = new Map();
        }
      } else key += c;
      continue;
    }
    if (c === '"' && value.trim() === '' && !wasQuoted) {
      quoted = true;
      wasQuoted = true;
      value = '';
    } else if (c === ';' || c === ',') {
      const problem = endPair();
      if (problem) return { ok: false, problem };
      if (c === ',') {
        elements.push(pairs);
        pairs = new Map();
      }
    } else if (wasQuoted) {
      if (c.trim() !== '') return { ok: false, problem: `text after the quoted value of "${key.trim()}"` };
    } else {
      value += c;
    }
  }
  if (quoted) return { ok: false, problem: 'unterminated quoted value' };
  const problem = endPair();
  if (problem) return { ok: false, problem };
  if (pairs.size > 0) elements.push(pairs);
  return { ok: true, elements };
}

/**
 * The header the gateway's Envoy writes for a verified client certificate (SANITIZE_SET with
 * cert and chain): Hash (SHA-256 of the leaf's DER), Cert (the leaf, URL-encoded PEM) and Chain
 * (every certificate the client sent, leaf first). Lets `skewgate explain` judge a certificate
 * file exactly as the gateway judges the header. `pems` is leaf first.
 */
export function formatXfcc(pems: readonly string[], leafSha256Hex: string): string {
  const leaf = pems[0] ?? '';
  return `Hash=${leafSha256Hex};Cert="${encodeURIComponent(leaf)}";Chain="${encodeURIComponent(pems.join(''))}"`;
}
