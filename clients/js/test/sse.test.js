import { test } from 'node:test';
import assert from 'node:assert/strict';
import { sseEvents } from '../src/sse.js';

function body(chunks) {
  const enc = new TextEncoder();
  return new ReadableStream({
    start(ctl) { for (const c of chunks) ctl.enqueue(enc.encode(c)); ctl.close(); },
  });
}

async function all(chunks) {
  const out = [];
  for await (const batch of sseEvents(body(chunks))) out.push(...batch);
  return out;
}

test('events, ids, comments and multi-line data', async () => {
  const got = await all(['retry: 1000\n\n: hi\nevent: change\ndata: {"a":1}\n\nid: c1\nevent: change\ndata: x\ndata: y\n\n']);
  assert.deepEqual(got, [
    { event: 'change', data: '{"a":1}', id: null },
    { event: 'change', data: 'x\ny', id: 'c1' },
  ]);
});

test('any split of the bytes and any line ending give the same events', async () => {
  const text = 'id: 1\r\nevent: heartbeat\r\ndata: {"cursor":"1"}\r\n\r\nevent: change\rdata:no-space\r\rdata: é\n\n';
  const want = await all([text]);
  assert.equal(want.length, 3);
  assert.deepEqual(want[1], { event: 'change', data: 'no-space', id: null });
  assert.deepEqual(want[2], { event: 'message', data: 'é', id: null });
  for (let i = 1; i < text.length; i++) {
    assert.deepEqual(await all([text.slice(0, i), text.slice(i)]), want, `split at ${i}`);
  }
});

test('an event not ended by a blank line is not dispatched', async () => {
  assert.deepEqual(await all(['event: change\ndata: cut']), []);
});
