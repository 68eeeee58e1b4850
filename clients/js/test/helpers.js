// Helpers of the tests that read a real gateway. They run through the
// end-to-end test TestJSClient (make test), which starts a gateway on the
// local Vitess cluster and a control server, and passes both here:
// VSG_URL (the gateway), VSG_CONTROL (write rows, kill and restart the
// gateway, reshard, mint tokens). Without them these tests are skipped,
// unless VSG_REQUIRE_GATEWAY=1, when that is a failure.
import assert from 'node:assert/strict';
import WebSocket from 'ws';

export const gateway = process.env.VSG_URL || '';
const control = process.env.VSG_CONTROL || '';
if (process.env.VSG_REQUIRE_GATEWAY === '1') assert.ok(gateway && control, 'VSG_URL and VSG_CONTROL must be set');
export const skip = gateway ? false : 'needs a gateway: VSG_URL and VSG_CONTROL (run by e2e TestJSClient)';

export { WebSocket };

/** ctl calls the control server. */
export async function ctl(method, path) {
  const r = await fetch(control + path, { method });
  const body = await r.json();
  if (!r.ok) throw new Error(`${method} ${path}: ${body.error}`);
  return body;
}

export async function token(ttl = '1h', scope = '') {
  return (await ctl('GET', `/token?ttl=${ttl}&scope=${scope}`)).token;
}

let streams = 0;

/** newStream creates a stream on customer.customer and returns its name and a cursor at its live end. */
export async function newStream(prefix) {
  const name = `${prefix}-${process.pid}-${++streams}`;
  const admin = await token('1h', 'admin');
  const r = await fetch(`${gateway}/v1/streams`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${admin}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ name, keyspace: 'customer', tables: ['customer'] }),
  });
  assert.equal(r.status, 201, await r.text());
  return { name, cursor: await liveCursor(name) };
}

// liveCursor asks for the stream's position now: rows written after it
// are the test's.
async function liveCursor(stream) {
  const t = await token();
  for (let i = 0; i < 50; i++) {
    const r = await fetch(`${gateway}/v1/streams/${stream}/changes`, { headers: { Authorization: `Bearer ${t}` } });
    const b = await r.json();
    if (r.ok && b.next_cursor) return b.next_cursor;
    await new Promise((res) => { setTimeout(res, 200); });
  }
  throw new Error(`no cursor for ${stream}`);
}

/**
 * phase names a group of rows for this run of the tests: the control
 * server keeps every row it wrote, and a second run against it must not
 * expect the first run's rows.
 */
export function phase(name) {
  return `${name}${process.pid}`;
}

/** insert writes n rows of a phase, per_txn rows per transaction; returns every row of the phase so far. */
export async function insert(name, n, perTxn = 1) {
  return (await ctl('POST', `/insert?phase=${phase(name)}&n=${n}&per_txn=${perTxn}`)).rows;
}

/** writer starts (or stops, returning the phase's rows) the control server's steady writer: a row every 20 ms. */
export async function writer(action, name) {
  return (await ctl('POST', `/writer/${action}?phase=${phase(name)}`)).rows || [];
}

/** rows returns the rows of a phase written so far. */
export async function rows(name) {
  return (await ctl('GET', `/rows?phase=${phase(name)}`)).rows || [];
}

/**
 * Reader runs a client and records the emails of its rows, per
 * transaction, until it has every one of want.
 */
export class Reader {
  constructor(client, name) {
    this.client = client;
    this.mark = `-${phase(name)}-`;
    this.rows = [];
    this.txns = [];
    this.control = [];
    this.done = client.subscribe((txn) => this.take(txn));
    this.done.catch(() => {});
    this.waiters = [];
  }

  take(txn) {
    const rows = [];
    for (const ev of txn.events) {
      if (ev.type !== 'change') { this.control.push(ev); continue; }
      const email = (ev.after || ev.before || {}).email || '';
      if (email.includes(this.mark)) rows.push(email);
    }
    if (rows.length) { this.rows.push(...rows); this.txns.push(rows); }
    for (const w of this.waiters) w();
  }

  /** until waits until every row of want was read (or the client failed, or timeout ms passed). */
  async until(want, timeout = 60000) {
    const need = new Set(want);
    const have = () => this.rows.filter((r) => need.has(r)).length >= need.size;
    const deadline = Date.now() + timeout;
    while (!have()) {
      const left = deadline - Date.now();
      if (left <= 0) break;
      await Promise.race([
        new Promise((res) => { this.waiters.push(res); setTimeout(res, Math.min(left, 1000)); }),
        this.done.then(() => { throw new Error('the client ended'); }),
      ]);
      this.waiters = [];
    }
  }
}

/** exactlyOnce checks every row of want arrived once, in commit order, and nothing else of the phase. */
export function exactlyOnce(got, want, what) {
  const seen = new Map();
  for (const r of got) seen.set(r, (seen.get(r) || 0) + 1);
  const missing = want.filter((r) => !seen.has(r));
  const repeated = [...seen].filter(([, n]) => n > 1).map(([r]) => r);
  const extra = got.filter((r) => !want.includes(r));
  assert.deepEqual({ missing, repeated, extra }, { missing: [], repeated: [], extra: [] }, what);
}

/** until polls cond (which may return a promise) every 50 ms until it holds, failing with what() after timeout ms. */
export async function until(cond, timeout, what) {
  const deadline = Date.now() + timeout;
  while (!(await cond())) {
    assert.ok(Date.now() < deadline, `timed out: ${what()}`);
    await new Promise((res) => { setTimeout(res, 50); });
  }
}

const open = new Set();

/** track registers a client for closeAll. */
export function track(client) {
  open.add(client);
  return client;
}

/** closeAll closes every tracked client: run after each test, so that a failure leaves none reading. */
export async function closeAll() {
  await Promise.all([...open].map((c) => c.close()));
  open.clear();
}

/**
 * Proxy forwards TCP connections to the gateway, so that a test can cut
 * them (as a network failure would) and hold new ones back.
 */
export class Proxy {
  static async start() {
    const net = await import('node:net');
    const target = new URL(gateway);
    const p = new Proxy();
    p.server = net.createServer((down) => {
      p.accepted++;
      p.sockets.add(down);
      down.on('close', () => p.sockets.delete(down));
      down.on('error', () => {});
      const connect = () => {
        const up = net.connect(Number(target.port), target.hostname);
        up.on('error', () => down.destroy());
        down.on('error', () => up.destroy());
        p.sockets.add(up);
        up.on('close', () => { p.sockets.delete(up); down.destroy(); });
        down.on('close', () => up.destroy());
        down.pipe(up).pipe(down);
      };
      if (p.held) p.held.push(connect); else connect();
    });
    await new Promise((res) => { p.server.listen(0, '127.0.0.1', res); });
    p.url = `http://127.0.0.1:${p.server.address().port}`;
    return p;
  }

  constructor() { this.sockets = new Set(); this.accepted = 0; this.held = null; }
  /** cut resets every open connection. */
  cut() { for (const s of this.sockets) s.destroy(); }
  /** hold keeps new connections waiting until release. */
  hold() { this.held = []; }
  release() { const h = this.held || []; this.held = null; for (const f of h) f(); }
  close() { this.cut(); this.server.close(); }
}

/** waitWritten waits until the steady writer has written at least n rows of a phase. */
export async function waitWritten(name, n, timeout = 30000) {
  let have = 0;
  await until(async () => (have = (await rows(name)).length) >= n, timeout, () => `${have} rows of ${name} written, waiting for ${n}`);
  return have;
}
