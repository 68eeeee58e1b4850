// StreamClient reads one stream of a vstream-gateway: whole transactions,
// in commit order, each exactly once, across reconnects, gateway restarts
// and reshards. It owns the protocol a reader would otherwise write by
// hand: choosing the transport, resuming from the cursor, acking, backing
// off, refreshing the token, and telling the control events apart.
import { StreamError, configError, httpError, networkError } from './errors.js';
import { MemoryStore } from './stores.js';
import { prime, transports } from './transports.js';

const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/; // stream and subscriber names (openapi.yaml Name)
const DEFAULTS = {
  transport: 'ws',
  ackInterval: 250, // ms between acks: each is a store write on the gateway
  backoffMin: 500, // ms: the first reconnect waits up to this long
  backoffMax: 20000, // ms: no reconnect waits longer
  maxQueue: 1000, // transactions received ahead of the application
  pollWait: '30s', // long-poll wait
  pollLimit: 1000, // events per poll
};

/**
 * A Transaction is one whole transaction of the stream: its events in
 * order (row changes and control events) and the cursor after it.
 */
export class Transaction {
  constructor(events, cursor) {
    /** @type {any[]} */ this.events = events;
    /** @type {string} */ this.cursor = cursor;
  }

  /** The row changes (events of type "change"). */
  get changes() { return this.events.filter((e) => e.type === 'change'); }
}

export class StreamClient {
  #o; #store; #key; #transport;
  #queue = []; #head = 0; // received, not yet handed to the application
  #handed = null; // handed to the application, not yet committed
  #wake = null; #roomWaiters = [];
  #resume = ''; // cursor after the last whole transaction received
  #committed = ''; // cursor after the last transaction the application finished
  #token = ''; #tokenExp = 0;
  #listeners = new Map();
  #state = 'idle'; #error = null; #closed = false; #started = null;
  #conn = null; // the open connection: { abort(), send?(obj) }
  #attempt = 0;
  #ack = { want: '', sent: '', timer: 0, flushing: null };

  /** @param {import('./index.js').StreamClientOptions} options */
  constructor(options) {
    this.#o = { ...DEFAULTS, ...options };
    const o = this.#o;
    validate(o);
    this.#store = o.cursorStore || new MemoryStore();
    this.#key = o.storeKey || (o.subscriber ? `${o.stream}@${o.subscriber}` : o.stream);
    this.#transport = transports[o.transport === 'sse' && o.EventSource ? 'eventsource' : o.transport];
    if (o.autoAck === undefined) o.autoAck = Boolean(o.subscriber);
    if (o.signal) {
      if (o.signal.aborted) this.#closed = true;
      else o.signal.addEventListener('abort', () => { this.close(); }, { once: true });
    }
  }

  /** The cursor after the last transaction the application finished with. */
  get cursor() { return this.#committed; }
  /** idle, connecting, connected, reconnecting or closed. */
  get state() { return this.#state; }
  get options() { return this.#o; }

  /**
   * on registers a listener: a control event's type (resync, reshard,
   * moved, blocked, snapshot_complete, ddl, heartbeat), `disconnect`
   * (the gateway's close message), `state` (state, detail) or `error`.
   * Control events are told when the application reaches them, in order
   * with the transactions. Returns a function that removes the listener.
   */
  on(type, fn) {
    if (!this.#listeners.has(type)) this.#listeners.set(type, new Set());
    this.#listeners.get(type).add(fn);
    return () => this.#listeners.get(type).delete(fn);
  }

  #emit(type, ...args) {
    for (const fn of this.#listeners.get(type) || []) {
      try { fn(...args); } catch (e) { queueMicrotask(() => { throw e; }); }
    }
  }

  #setState(state, detail = '') {
    if (this.#state === state && !detail) return;
    this.#state = state;
    this.#emit('state', state, detail);
  }

  [Symbol.asyncIterator]() {
    return { next: () => this.next(), return: async () => { await this.close(); return { done: true, value: undefined }; } };
  }

  /**
   * next resolves to the next whole transaction. Asking for it commits the
   * one before (saved to the cursor store and, with autoAck, acked). After
   * close() it resolves done; after a fatal error it rejects with it, once
   * every transaction received before the error was handed over.
   */
  async next() {
    this.#start();
    this.commit();
    for (;;) {
      if (this.#head < this.#queue.length) {
        const item = this.#take();
        if (item.heartbeat) { this.#commitCursor(item.cursor); this.#emit('heartbeat', item); continue; }
        await this.#control(item);
        this.#handed = item;
        return { value: item, done: false };
      }
      if (this.#error) throw this.#error;
      if (this.#closed) return { value: undefined, done: true };
      await new Promise((resolve) => { this.#wake = resolve; });
    }
  }

  /**
   * subscribe calls fn with every transaction, one at a time: a
   * transaction is committed once fn (or the promise it returns) is done.
   * Resolves when the client is closed, rejects with a fatal error.
   */
  async subscribe(fn) {
    for (;;) {
      const { value, done } = await this.next();
      if (done) return;
      await fn(value);
      this.commit(); // fn is done with it: commit now, not at the next arrival
    }
  }

  /** commit records that the application finished with the last transaction handed to it. */
  commit() {
    if (!this.#handed) return;
    const c = this.#handed.cursor;
    this.#handed = null;
    this.#commitCursor(c);
  }

  #commitCursor(c) {
    if (!c || c === this.#committed) return;
    this.#committed = c;
    Promise.resolve(this.#store.set(this.#key, c)).catch((e) => this.#emit('error', e));
    if (this.#o.autoAck && this.#o.subscriber) this.ack(c);
  }

  // #control tells the listeners of a transaction's control events, and
  // lets onResync reload the application's state before the snapshot.
  async #control(txn) {
    for (const ev of txn.events) {
      if (ev.type === 'change') continue;
      if (ev.type === 'resync' && this.#o.onResync) await this.#o.onResync(ev);
      this.#emit(ev.type, ev);
    }
  }

  #take() {
    const item = this.#queue[this.#head];
    this.#queue[this.#head++] = undefined;
    if (this.#head > 1024 && this.#head * 2 > this.#queue.length) {
      this.#queue = this.#queue.slice(this.#head);
      this.#head = 0;
    }
    if (this.#roomWaiters.length && this.#pending() <= this.#o.maxQueue / 2) {
      for (const w of this.#roomWaiters.splice(0)) w();
    }
    return item;
  }

  #pending() { return this.#queue.length - this.#head; }

  #push(item) {
    this.#queue.push(item);
    this.#wakeUp();
  }

  // #wakeUp resumes next() if it waits.
  #wakeUp() {
    const w = this.#wake;
    this.#wake = null;
    if (w) w();
  }

  /**
   * ack confirms everything up to cursor for the named subscriber. Acks
   * are coalesced: at most one per ackInterval, always the latest.
   */
  ack(cursor) {
    if (!this.#o.subscriber || !cursor || cursor.startsWith('2')) return;
    this.#ack.want = cursor;
    if (!this.#ack.timer) this.#ack.timer = setTimeout(() => { this.#ack.timer = 0; this.#flushAck(); }, this.#o.ackInterval);
  }

  // #flushAck sends the latest wanted ack. While one is in flight it
  // waits for it, then sends the newer one if there is one: close() relies
  // on the last cursor leaving, not just the one already on its way.
  async #flushAck() {
    const a = this.#ack;
    while (a.flushing) await a.flushing;
    if (!a.want || a.want === a.sent) return;
    const c = a.want;
    // Settled through .then, so that a.flushing is set before it is
    // cleared even when the ack goes out synchronously on the WebSocket.
    const p = this.#sendAck(c).then(() => { a.sent = c; }, (e) => { this.#emit('error', e); }) // the next ack carries the position on
      .finally(() => { if (a.flushing === p) a.flushing = null; });
    a.flushing = p;
    await p;
  }

  async #sendAck(c) {
    if (this.#conn && this.#conn.send && this.#conn.send({ ack: c })) return;
    await this.#postAck(c);
  }

  async #postAck(c) {
    const o = this.#o;
    const r = await this.fetch(`${this.baseURL()}/v1/streams/${o.stream}/subscribers/${o.subscriber}/ack`, {
      method: 'POST', headers: { ...this.headers(), 'Content-Type': 'application/json' }, body: JSON.stringify({ cursor: c }),
    });
    if (!r.ok) throw await httpError(r);
  }

  /** close ends the connection; pending acks are sent first. */
  async close() {
    if (this.#closed && this.#state === 'closed') return;
    this.#closed = true;
    if (this.#conn) this.#conn.abort();
    clearTimeout(this.#ack.timer);
    this.#ack.timer = 0;
    await this.#flushAck();
    this.#setState('closed');
    this.#wakeUp();
    for (const w of this.#roomWaiters.splice(0)) w();
  }

  // ---- the connection loop

  #start() {
    if (!this.#started) this.#started = this.#run();
  }

  async #run() {
    if (this.#closed) return;
    const o = this.#o;
    const stored = (await this.#store.get(this.#key)) || '';
    this.#resume = o.cursor || stored;
    this.#committed = this.#resume;
    // A cursor given to the client is where the application starts: saved
    // at once, so that a restart before the first commit starts there too
    // rather than at the live end.
    if (this.#resume !== stored) await this.#store.set(this.#key, this.#resume);
    let unauthorized = 0;
    while (!this.#closed) {
      await this.#room();
      if (this.#closed) break;
      this.#setState(this.#attempt ? 'reconnecting' : 'connecting');
      let end;
      try {
        await this.#ensureToken(unauthorized > 0);
        end = (!this.#resume && this.#transport !== transports.poll && await prime(this)) || await this.#transport(this);
      } catch (e) {
        end = { error: e instanceof StreamError ? e : networkError(e) };
      }
      this.#conn = null;
      if (this.#closed) break;
      const delay = this.#afterConnection(end, unauthorized);
      if (delay === null) return;
      unauthorized = end.error && end.error.status === 401 ? unauthorized + 1 : 0;
      if (delay > 0) await this.#sleep(delay);
    }
  }

  // #afterConnection decides what follows a connection's end: the delay
  // before the next one, or null when the client failed for good.
  #afterConnection(end, unauthorized) {
    if (end.disconnect) this.#emit('disconnect', end.disconnect);
    const e = end.error;
    if (!e) {
      if (end.tokenExpired) { this.#tokenExp = 1; return 0; } // a fresh token, at once
      if (end.full || end.slow) return 0; // resume from the cursor at once
      if (end.shutdown) return Math.random() * 1000; // another replica takes over
      return this.#backoff();
    }
    if (e.code === 'spool_gone' && this.#o.subscriber) {
      // The subscriber's stored cursor is past the freed spool: read on
      // from it (openapi.yaml ReaderConflict).
      this.#resume = '';
      return 0;
    }
    if (e.status === 401 && unauthorized === 0 && (this.#o.getToken || this.#o.token)) { this.#tokenExp = 1; return 0; }
    if (!e.retryable) { this.#fail(e); return null; }
    this.#emit('error', e);
    return Math.max(e.retryAfter, this.#backoff());
  }

  // #backoff is "full jitter": a random wait up to an exponentially
  // growing cap, so that many clients a gateway restart cut off do not
  // come back in step.
  #backoff() {
    const cap = Math.min(this.#o.backoffMax, this.#o.backoffMin * 2 ** Math.min(this.#attempt, 16));
    this.#attempt++;
    return Math.random() * cap;
  }

  #fail(e) {
    this.#error = e;
    this.#closed = true;
    this.#emit('error', e);
    this.#setState('closed', e.message);
    this.#wakeUp();
  }

  #sleep(ms) {
    return new Promise((resolve) => {
      const t = setTimeout(done, ms);
      const conn = { abort: done };
      this.#conn = conn;
      function done() { clearTimeout(t); resolve(); }
    });
  }

  #room() {
    if (this.#pending() < this.#o.maxQueue || this.#closed) return Promise.resolve();
    return new Promise((resolve) => { this.#roomWaiters.push(resolve); });
  }

  async #ensureToken(force) {
    const o = this.#o;
    if (!o.getToken) { this.#token = o.token || ''; return; }
    const soon = this.#tokenExp && this.#tokenExp * 1000 - Date.now() < 5000;
    if (this.#token && !force && !soon) return;
    this.#token = String(await o.getToken());
    this.#tokenExp = jwtExp(this.#token);
  }

  // ---- what transports use (not part of the public API)

  /** @internal */ baseURL() { return String(this.#o.url).replace(/\/+$/, ''); }
  /** @internal */ fetch(url, init) { return (this.#o.fetch || globalThis.fetch)(url, init); }
  /** @internal */ get token() { return this.#token; }
  /** @internal */ get tokenExp() { return this.#tokenExp; }
  /** @internal */ async freshToken() { await this.#ensureToken(true); return this.#token; }
  /** @internal */ headers() {
    return { ...(this.#o.headers || {}), ...(this.#token ? { Authorization: `Bearer ${this.#token}` } : {}) };
  }

  /** @internal the query that starts a connection where the client is. */
  startQuery(extra = {}) {
    const o = this.#o;
    const q = new URLSearchParams();
    if (this.#resume) q.set('cursor', this.#resume);
    if (o.subscriber) q.set('subscriber', o.subscriber);
    if (!this.#resume && o.start) q.set('start', o.start);
    for (const [k, v] of Object.entries(extra)) if (v) q.set(k, v);
    return q;
  }

  /** @internal */ get resumeCursor() { return this.#resume; }
  /** @internal */ get closed() { return this.#closed; }
  /** @internal */ get full() { return this.#pending() >= this.#o.maxQueue; }
  /** @internal */ room() { return this.#room(); }
  /** @internal */ opened(conn) {
    this.#conn = conn;
    this.#setState('connected');
    if (this.#ack.want !== this.#ack.sent && !this.#ack.timer) this.ack(this.#ack.want);
  }
  /** @internal */ setConn(conn) { this.#conn = conn; }

  /** @internal a whole transaction arrived. */
  received(events, cursor) {
    if (this.#o.parser && this.#o.parser.value) for (const ev of events) mapValues(ev, this.#o.parser.value);
    this.#attempt = 0; // data flows: the next failure starts the back-off over
    this.#resume = cursor;
    this.#push(new Transaction(events, cursor));
  }

  /** @internal the position moved without a transaction (heartbeat, a disconnect cursor, an empty poll). */
  position(cursor) {
    this.#attempt = 0;
    if (!cursor || cursor === this.#resume || cursor.startsWith('2')) return;
    this.#resume = cursor;
    this.#push({ heartbeat: true, type: 'heartbeat', cursor });
  }
}

function validate(o) {
  if (!o.url) throw configError('url is required: the gateway\'s base URL');
  if (!NAME.test(o.stream || '')) throw configError(`stream ${JSON.stringify(o.stream)} is not a valid name`);
  if (o.subscriber && !NAME.test(o.subscriber)) throw configError(`subscriber ${JSON.stringify(o.subscriber)} is not a valid name`);
  if (!['ws', 'sse', 'poll'].includes(o.transport)) throw configError(`transport must be ws, sse or poll, not ${JSON.stringify(o.transport)}`);
  if (o.start && !['now', 'snapshot'].includes(o.start)) throw configError('start must be now or snapshot');
  if (o.getToken && typeof o.getToken !== 'function') throw configError('getToken must be a function');
  if (!(o.maxQueue >= 1)) throw configError('maxQueue must be at least 1');
  if (!(o.backoffMin > 0 && o.backoffMax >= o.backoffMin)) throw configError('backoff needs 0 < backoffMin <= backoffMax');
  if (o.transport === 'ws' && !o.WebSocket && typeof globalThis.WebSocket !== 'function') {
    throw configError('no WebSocket in this runtime: pass the WebSocket option (e.g. from the ws package) or use transport sse or poll');
  }
}

// jwtExp reads a JWT's exp (seconds) without verifying it: only to
// refresh before the gateway closes the connection. 0 if there is none.
export function jwtExp(token) {
  const part = token.split('.')[1];
  if (!part) return 0;
  try {
    // atob decodes forgivingly (WHATWG): a JWT's missing padding is fine.
    const json = atob(part.replace(/-/g, '+').replace(/_/g, '/'));
    const exp = JSON.parse(json).exp;
    return typeof exp === 'number' ? exp : 0;
  } catch {
    return 0;
  }
}

function mapValues(ev, fn) {
  if (ev.type !== 'change') return;
  for (const img of ['key', 'before', 'after']) {
    const row = ev[img];
    if (row) for (const k of Object.keys(row)) row[k] = fn(row[k], k, ev);
  }
}
