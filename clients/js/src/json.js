// JSON with exact integers. The gateway writes BIGINT columns as JSON
// numbers with every digit, also past 2^53, where JSON.parse rounds them
// (9007199254740993 becomes …992). parseJSON keeps such integers exact: as
// their decimal text by default, or as whatever parser.bigint makes of it
// (BigInt, a decimal library's type). Numbers JSON.parse reads exactly stay
// numbers.

// An integer literal of 16 or more digits in value position. It may also
// match inside a string (a false alarm, which only costs the slow path);
// it never misses a real one: a number follows one of [ : , or, in JSON
// written with spaces, whitespace. (Two branches rather than [[:,]\s*:
// the gateway's JSON has no spaces, and this scans it faster.)
const LONG_INT = /[[:,]-?\d{16}|\s-?\d{16}/;

// The tokens that matter on the slow path: whole strings (so that digits
// inside them are skipped) and whole numbers.
const TOKEN = /"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d*)?(?:[eE][+-]?\d+)?/g;

// MARK starts a string that stands for a long integer. JSON cannot hold
// the raw character inside a string, only its escape, so a data string
// that begins with that escape is marked too, and unmarked on the way out.
const MARK = '\u0001';
const ESC = '\\u0001';

/**
 * parseJSON parses one JSON text. bigint, if given, maps the decimal text
 * of an integer outside ±(2^53 − 1).
 * @param {string} text
 * @param {((digits: string) => unknown) | undefined} [bigint]
 */
export function parseJSON(text, bigint) {
  if (!LONG_INT.test(text)) return JSON.parse(text);
  // JSON.parse's reviver sees a number already rounded, and the source
  // text access that would fix that is not in every engine this module
  // runs on (Node 20 lacks it): long integers become strings first.
  const quoted = text.replace(TOKEN, (t) => {
    if (t[0] === '"') return bigint && t.startsWith(ESC, 1) ? `"${ESC}${t.slice(1)}` : t;
    if (/[.eE]/.test(t) || Number.isSafeInteger(Number(t))) return t;
    return bigint ? `"${ESC}${t}"` : `"${t}"`;
  });
  if (!bigint) return JSON.parse(quoted);
  return JSON.parse(quoted, (k, v) => (typeof v === 'string' && v[0] === MARK ? (v[1] === MARK ? v.slice(1) : bigint(v.slice(1))) : v));
}
