import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseJSON } from '../src/json.js';

test('integers past 2^53 keep every digit, as text by default', () => {
  const v = parseJSON('{"after":{"id":9007199254740993,"n":-18446744073709551615,"small":42,"f":1.5e300,"s":"x"}}');
  assert.equal(v.after.id, '9007199254740993');
  assert.equal(v.after.n, '-18446744073709551615');
  assert.equal(v.after.small, 42);
  assert.equal(v.after.f, 1.5e300);
  assert.equal(v.after.s, 'x');
});

test('parser.bigint maps them', () => {
  const v = parseJSON('[1,12345678901234567890,{"a":[true,false,null]}]', BigInt);
  assert.deepEqual(v, [1, 12345678901234567890n, { a: [true, false, null] }]);
});

test('the exact path decodes strings and nesting as JSON.parse does', () => {
  const texts = [
    '{"a":"\\u00e9\\"\\\\\\n","b":[],"c":{},"d":[{"e":[1,[2,[3]]]}],"big":1234567890123456789}',
    ' { "k" : [ 1 , 2.5 , -0 , 1e3 , "x,1234567890123456789" ] , "z" : 1234567890123456789 } ',
  ];
  for (const t of texts) {
    const want = JSON.parse(t, (k, v) => (k === 'big' || k === 'z' ? String(BigInt(t.match(new RegExp(`"${k}"\\s*:\\s*(\\d+)`))[1])) : v));
    assert.deepEqual(parseJSON(t), want);
  }
});

test('a long digit run inside a string is not a number', () => {
  const v = parseJSON('{"email":"a,12345678901234567@x"}');
  assert.equal(v.email, 'a,12345678901234567@x');
});

test('malformed JSON is a SyntaxError on both paths', () => {
  for (const t of ['{"a":1', '[1,]', '{"a":12345678901234567', '{"a":12345678901234567,}', '{"a":"x}', 'nul']) {
    assert.throws(() => parseJSON(t), SyntaxError, t);
  }
});

test('a data string that starts with the marker character survives a mapped parse', () => {
  const t = '{"s":"\\u0001x","t":"\\u00011234567890123456789","n":1234567890123456789}';
  assert.deepEqual(parseJSON(t, BigInt), { s: '\u0001x', t: '\u00011234567890123456789', n: 1234567890123456789n });
  assert.deepEqual(parseJSON(t), { s: '\u0001x', t: '\u00011234567890123456789', n: '1234567890123456789' });
});

test('long integers after whitespace take the exact path too', () => {
  assert.deepEqual(parseJSON('{"a": 12345678901234567890, "b":[\n  -12345678901234567890 ]}'), { a: '12345678901234567890', b: ['-12345678901234567890'] });
});
