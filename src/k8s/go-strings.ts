// Go's string rules that kube-apiserver follows: the order of its sorting and selection, and which
// numbers strconv.ParseInt accepts. Pure.

/**
 * Go compares strings byte by byte (UTF-8). UTF-16 code units give the same order except when a
 * supplementary character (a surrogate pair) meets a BMP character above U+D7FF.
 */
export function compareGoStrings(a: string, b: string): number {
  if (a === b) return 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    const xs = x >= 0xd800 && x <= 0xdfff;
    const ys = y >= 0xd800 && y <= 0xdfff;
    if (xs !== ys) return xs ? 1 : -1;
    return x < y ? -1 : 1;
  }
  return a.length < b.length ? -1 : a.length > b.length ? 1 : 0;
}

/** strconv.ParseInt(s, 10, 64) succeeds. */
export function isInt64(s: string): boolean {
  let i = 0;
  let negative = false;
  const sign = s.charCodeAt(0);
  if (sign === 0x2b || sign === 0x2d) {
    negative = sign === 0x2d;
    i = 1;
  }
  if (i >= s.length) return false;
  for (let j = i; j < s.length; j++) {
    const c = s.charCodeAt(j);
    if (c < 0x30 || c > 0x39) return false;
  }
  while (i < s.length - 1 && s.charCodeAt(i) === 0x30) i++;
  const digits = s.length - i;
  if (digits !== 19) return digits < 19;
  return s.slice(i) <= (negative ? '9223372036854775808' : '9223372036854775807');
}
