// JSON with exact integers. The gateway writes BIGINT columns as JSON
// numbers with every digit, also past 2^53, where JSON.parse rounds them
// (9007199254740993 becomes …992). parseJSON keeps such integers exact: as
// their decimal text by default, or as whatever parser.bigint makes of it
// (BigInt, a decimal library's type). Numbers JSON.parse reads exactly stay
// numbers.

// An integer literal of 16 or more digits in value position. It may also
// match inside a string (a false alarm, which only costs the slow path);
// it never misses a real one.
const LONG_INT = /[[:,]\s*-?\d{16}/;

/**
 * parseJSON parses one JSON text. bigint, if given, maps the decimal text
 * of an integer outside ±(2^53 − 1).
 * @param {string} text
 * @param {((digits: string) => unknown) | undefined} [bigint]
 */
export function parseJSON(text, bigint) {
  if (!LONG_INT.test(text)) return JSON.parse(text);
  return new ExactParser(text, bigint || String).parse();
}

// ExactParser is a plain recursive-descent JSON parser, used only for
// texts that may hold long integers: JSON.parse's reviver sees the value
// already rounded, and the source-text access that would fix that is not
// in every engine this module runs on (Node 20 lacks it).
class ExactParser {
  constructor(s, bigint) { this.s = s; this.i = 0; this.bigint = bigint; }

  parse() {
    const v = this.value();
    this.ws();
    if (this.i !== this.s.length) this.fail('unexpected data after JSON value');
    return v;
  }

  fail(msg) { throw new SyntaxError(`${msg} at position ${this.i}`); }

  ws() {
    const s = this.s;
    while (this.i < s.length) {
      const c = s.charCodeAt(this.i);
      if (c !== 32 && c !== 10 && c !== 13 && c !== 9) break;
      this.i++;
    }
  }

  value() {
    this.ws();
    const c = this.s[this.i];
    if (c === '{') return this.object();
    if (c === '[') return this.array();
    if (c === '"') return this.string();
    if (c === '-' || (c >= '0' && c <= '9')) return this.number();
    for (const [lit, v] of [['true', true], ['false', false], ['null', null]]) {
      if (this.s.startsWith(lit, this.i)) { this.i += lit.length; return v; }
    }
    return this.fail('unexpected character');
  }

  object() {
    const o = {};
    this.i++;
    this.ws();
    if (this.s[this.i] === '}') { this.i++; return o; }
    for (;;) {
      this.ws();
      if (this.s[this.i] !== '"') this.fail('expected a key');
      const k = this.string();
      this.ws();
      if (this.s[this.i++] !== ':') this.fail('expected ":"');
      o[k] = this.value();
      this.ws();
      const c = this.s[this.i++];
      if (c === '}') return o;
      if (c !== ',') this.fail('expected "," or "}"');
    }
  }

  array() {
    const a = [];
    this.i++;
    this.ws();
    if (this.s[this.i] === ']') { this.i++; return a; }
    for (;;) {
      a.push(this.value());
      this.ws();
      const c = this.s[this.i++];
      if (c === ']') return a;
      if (c !== ',') this.fail('expected "," or "]"');
    }
  }

  string() {
    // Find the closing quote, skipping escapes, and let JSON.parse decode
    // the string: it is exact for strings.
    const start = this.i;
    this.i++;
    for (;;) {
      const c = this.s[this.i++];
      if (c === undefined) this.fail('unterminated string');
      if (c === '\\') this.i++;
      else if (c === '"') return JSON.parse(this.s.slice(start, this.i));
    }
  }

  number() {
    const m = /-?(?:0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/y;
    m.lastIndex = this.i;
    const r = m.exec(this.s);
    if (!r) this.fail('bad number');
    this.i = m.lastIndex;
    const n = Number(r[0]);
    if (r[1] === undefined && r[2] === undefined && !Number.isSafeInteger(n)) return this.bigint(r[0]);
    return n;
  }
}
