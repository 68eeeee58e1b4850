// The client against a real gateway on the local Vitess cluster (see
// helpers.js): every transport, named subscribers, errors, back-pressure,
// token expiry, a gateway SIGKILL and restart, a reshard.
import { afterEach, test } from 'node:test';
import assert from 'node:assert/strict';
import { StreamClient, StreamError, MemoryStore } from '../src/index.js';
import { Reader, WebSocket, ctl, exactlyOnce, gateway, insert, newStream, closeAll, Proxy, rows, skip, token, track, until, waitWritten, writer } from './helpers.js';

const TRANSPORTS = ['ws', 'sse', 'poll'];
afterEach(closeAll); // a failed test leaves no client reading
const opts = (stream, extra) => ({ url: gateway, stream, WebSocket, getToken: () => token(), pollWait: '5s', ...extra });

test('every transport hands over whole transactions, in order, each once', { skip }, async () => {
  const s = await newStream('js-txn');
  const readers = TRANSPORTS.map((transport) => new Reader(track(new StreamClient(opts(s.name, { transport, cursor: s.cursor }))), 'txn'));
  await insert('txn', 12, 1);
  const want = await insert('txn', 30, 5);
  for (const r of readers) await r.until(want);
  for (const [i, r] of readers.entries()) {
    assert.deepEqual(r.rows, want, TRANSPORTS[i]); // one shard: commit order
    // Each transaction of five rows arrived as one, never cut.
    assert.deepEqual(r.txns.map((t) => t.length), [...Array(12).fill(1), ...Array(6).fill(5)], TRANSPORTS[i]);
    assert.equal(r.client.state, 'connected');
    await r.client.close();
    assert.equal(r.client.state, 'closed');
  }
});

test('a named subscriber resumes where its acks left it, through any transport', { skip }, async () => {
  const s = await newStream('js-named');
  for (const [i, transport] of TRANSPORTS.entries()) {
    const phase = `named${i}`;
    const sub = `js.sub-${transport}`; // the token's sub is js
    const first = new Reader(track(new StreamClient(opts(s.name, { transport, cursor: s.cursor, subscriber: sub, ackInterval: 20 }))), phase);
    const want1 = await insert(phase, 10);
    await first.until(want1);
    await first.client.close(); // sends the pending ack
    const more = await insert(phase, 10);
    // A new client, no cursor of its own: it starts from the subscriber's.
    const second = new Reader(track(new StreamClient(opts(s.name, { transport, subscriber: sub }))), phase);
    const want2 = more.slice(want1.length);
    await second.until(want2);
    exactlyOnce(first.rows, want1, `${transport} before`);
    exactlyOnce(second.rows, want2, `${transport} after`);
    await second.client.close();
  }
});

test('a connection cut before the first transaction resumes where the client started, not at the new live end', { skip }, async (t) => {
  const s = await newStream('js-cut');
  const proxy = await Proxy.start();
  t.after(() => proxy.close());
  for (const transport of TRANSPORTS) {
    const c = track(new StreamClient({ ...opts(s.name, { transport }), url: proxy.url, start: 'now', backoffMax: 1000 }));
    const r = new Reader(c, `cut-${transport}`);
    await until(() => c.state === 'connected', 20000, () => `${transport}: ${c.state}`);
    const before = proxy.accepted;
    proxy.hold();
    proxy.cut();
    // Rows written while the client cannot reach the gateway: after "now".
    const want = await insert(`cut-${transport}`, 10);
    await until(() => proxy.accepted > before, 20000, () => `${transport}: no reconnect`);
    proxy.release();
    await r.until(want, 30000);
    exactlyOnce(r.rows, want, transport);
    await c.close();
  }
});

test('the cursor store keeps what the application finished with', { skip }, async () => {
  const s = await newStream('js-store');
  const store = new MemoryStore();
  const c1 = track(new StreamClient(opts(s.name, { cursor: s.cursor, cursorStore: store, storeKey: 'k' })));
  const want = await insert('store', 6, 3);
  const first = await c1.next();
  assert.equal(store.get('k'), s.cursor, 'nothing committed before the application asks for more');
  const second = await c1.next();
  assert.equal(store.get('k'), first.value.cursor, 'asking for the next commits the one before');
  await c1.close();
  // A new client from the store gets the second transaction again: it was
  // handed over but never committed.
  const c2 = track(new StreamClient(opts(s.name, { cursorStore: store, storeKey: 'k' })));
  const again = await c2.next();
  assert.deepEqual(again.value.changes.map((e) => e.after.email), second.value.changes.map((e) => e.after.email));
  assert.deepEqual(second.value.changes.map((e) => e.after.email), want.slice(3));
  await c2.close();
});

test('refusals come as typed errors, on every transport', { skip }, async () => {
  for (const transport of TRANSPORTS) {
    const missing = track(new StreamClient(opts('no-such-stream', { transport })));
    await assert.rejects(missing.next(), (e) => e instanceof StreamError && e.status === 404 && e.code === 'stream_not_found' && !e.retryable, transport);
    const s = await newStream('js-err');
    const bad = track(new StreamClient(opts(s.name, { transport, cursor: 'not-a-cursor' })));
    await assert.rejects(bad.next(), (e) => e.status === 400 && e.code === 'invalid_cursor', transport);
    const anon = track(new StreamClient(opts(s.name, { transport, getToken: undefined })));
    await assert.rejects(anon.next(), (e) => e.status === 401 && e.code === 'unauthorized', transport);
    assert.equal(anon.state, 'closed');
  }
});

test('an application slower than the stream loses nothing (the queue pauses reading)', { skip }, async () => {
  const s = await newStream('js-slow');
  const readers = TRANSPORTS.map((transport) => {
    const c = track(new StreamClient(opts(s.name, { transport, cursor: s.cursor, maxQueue: 4 })));
    const r = new Reader(c, 'slow');
    const take = r.take.bind(r);
    r.take = async (txn) => { take(txn); await new Promise((res) => { setTimeout(res, 5); }); };
    return r;
  });
  const want = await insert('slow', 200, 2);
  for (const [i, r] of readers.entries()) {
    await r.until(want);
    assert.deepEqual(r.rows, want, TRANSPORTS[i]);
    await r.client.close();
  }
});

test('tokens that expire: getToken again, nothing lost or repeated', { skip }, async () => {
  const s = await newStream('js-token');
  const calls = new Map();
  const readers = TRANSPORTS.map((transport) => {
    calls.set(transport, 0);
    const getToken = () => { calls.set(transport, calls.get(transport) + 1); return token('3s'); };
    return new Reader(track(new StreamClient(opts(s.name, { transport, cursor: s.cursor, getToken }))), 'tok');
  });
  await writer('start', 'tok');
  // Tokens live 3 s: wait until every client has fetched its third, then
  // stop writing and check what they read across the expiries.
  await until(() => TRANSPORTS.every((t) => calls.get(t) >= 3), 30000, () => `getToken calls: ${[...calls]}`);
  const want = await writer('stop', 'tok');
  for (const [i, r] of readers.entries()) {
    await r.until(want);
    assert.deepEqual(r.rows, want, TRANSPORTS[i]);
    await r.client.close();
  }
});

test('a gateway SIGKILLed and restarted: every row exactly once', { skip }, async () => {
  const s = await newStream('js-kill');
  const states = new Map(TRANSPORTS.map((t) => [t, []]));
  const readers = TRANSPORTS.map((transport) => {
    const c = track(new StreamClient(opts(s.name, { transport, cursor: s.cursor, backoffMax: 2000 })));
    c.on('state', (st) => states.get(transport).push(st));
    return new Reader(c, 'kill');
  });
  await writer('start', 'kill');
  await readers[0].until((await rows('kill')).slice(0, 20));
  await ctl('POST', '/gateway/kill');
  const atKill = (await rows('kill')).length;
  await waitWritten('kill', atKill + 25); // rows written while it is down
  await ctl('POST', '/gateway/start');
  await waitWritten('kill', atKill + 50);
  const want = await writer('stop', 'kill');
  for (const [i, r] of readers.entries()) {
    await r.until(want);
    assert.deepEqual(r.rows, want, TRANSPORTS[i]);
    assert.ok(states.get(TRANSPORTS[i]).includes('reconnecting'), `${TRANSPORTS[i]} states: ${states.get(TRANSPORTS[i])}`);
    await r.client.close();
  }
});

test('a reshard 0 → -80,80-, a gateway SIGKILL, and back: every row exactly once, reshard events typed', { skip, timeout: 600000 }, async () => {
  const s = await newStream('js-reshard');
  const reshards = new Map(TRANSPORTS.map((t) => [t, []]));
  const readers = TRANSPORTS.map((transport) => {
    // Named subscribers: their acks and bridge spools live in the gateway's store across the kill.
    const c = track(new StreamClient(opts(s.name, { transport, cursor: s.cursor, subscriber: `js.resh-${transport}`, backoffMax: 2000 })));
    c.on('reshard', (e) => reshards.get(transport).push(`${e.from.join(',')}>${e.to.join(',')}`));
    return new Reader(c, 'resh');
  });
  await writer('start', 'resh');
  const wf = `js${process.pid}`;
  await ctl('POST', `/reshard?workflow=${wf}a&from=0&to=-80,80-`);
  await ctl('POST', '/gateway/kill');
  const atKill = (await rows('resh')).length;
  await waitWritten('resh', atKill + 25); // rows written while it is down
  await ctl('POST', '/gateway/start');
  await ctl('POST', `/reshard?workflow=${wf}b&from=-80,80-&to=0`);
  const want = await writer('stop', 'resh');
  for (const [i, r] of readers.entries()) {
    await r.until(want, 120000);
    const seen = new Map();
    for (const row of r.rows) seen.set(row, (seen.get(row) || 0) + 1);
    const lost = want.filter((row) => !seen.has(row)).length;
    const dup = [...seen.values()].filter((n) => n > 1).length;
    console.log(`RESULT js client ${TRANSPORTS[i]} through a reshard 0 -> -80,80-, a gateway SIGKILL and a reshard back: ${want.length} rows, lost ${lost}, duplicated ${dup}`);
    exactlyOnce(r.rows, want, TRANSPORTS[i]); // across shards: no one order
    assert.deepEqual(reshards.get(TRANSPORTS[i]), ['0>-80,80-', '-80,80->0'], TRANSPORTS[i]);
    await r.client.close();
  }
});

test('a polling client passes each page\'s scope and interval back, the URL a cache keeps pages under', { skip }, async () => {
  const s = await newStream('js-cache');
  const asked = [];
  const recording = (url, init) => { if (url.includes('/changes?')) asked.push(new URL(url).searchParams); return fetch(url, init); };
  const r = new Reader(track(new StreamClient(opts(s.name, { transport: 'poll', cursor: s.cursor, fetch: recording }))), 'cache');
  const want = await insert('cache', 5);
  await r.until(want);
  assert.deepEqual(r.rows, want);
  assert.ok(asked.length >= 2, `${asked.length} polls`);
  assert.equal(asked[0].get('scope'), null, 'the first poll knows no scope yet');
  for (const [i, q] of asked.slice(1).entries()) {
    assert.match(q.get('scope') || '', /^[A-Za-z0-9_-]{16}$/, `poll ${i + 1}`);
    assert.match(q.get('interval') || '', /^[0-9]+$/, `poll ${i + 1}`);
  }
  await r.client.close();
});
