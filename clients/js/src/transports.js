// The transports: each opens one connection from the client's resume
// cursor, hands it every whole transaction (client.received) and every
// bare position (client.position), and resolves when the connection ends,
// saying how: { error } (a StreamError), { tokenExpired }, { full } (the
// application is behind: reconnect when it catches up), { slow },
// { shutdown }, { disconnect } (the gateway's close message), or {} (the
// connection dropped). The client decides what comes next.
//
// A transaction is whole when its transport says so: "txn_end" on
// WebSocket, an `id:` on SSE, the cursor changing on a poll page. A cursor
// beginning with "2" lies inside a huge transaction that arrives in
// pieces: never a place to resume or acknowledge.
import { httpError, networkError, protocolError, configError } from './errors.js';
import { parseJSON } from './json.js';
import { sseEvents } from './sse.js';

const inside = (cursor) => cursor.startsWith('2');
const utf8 = new TextDecoder();

function streamURL(c, kind, extra) {
  return `${c.baseURL()}/v1/streams/${encodeURIComponent(c.options.stream)}/${kind}?${c.startQuery(extra)}`;
}

function parse(c, text) {
  const p = c.options.parser;
  return parseJSON(text, p && p.bigint);
}

// ---- WebSocket

// Close codes of the gateway (openapi.yaml, the /ws operation).
const CANNOT_CONTINUE = new Set(['tables_dropped', 'resume_impossible', 'spool_gone']);

function ws(c) {
  const WS = c.options.WebSocket || globalThis.WebSocket;
  const url = streamURL(c, 'ws', { batch: 'txn' }).replace(/^http/, 'ws');
  const protocols = c.token ? ['vsg.v1', `bearer.${c.token}`] : ['vsg.v1'];
  return new Promise((resolve) => {
    let sock;
    try { sock = new WS(url, protocols); } catch (e) { resolve({ error: configError(`WebSocket: ${e.message}`) }); return; }
    let opened = false;
    let bye = null;
    let full = false;
    let refresh = 0;
    let txn = [];
    const conn = {
      abort: () => sock.close(1000),
      send: (obj) => { if (sock.readyState !== 1) return false; sock.send(JSON.stringify(obj)); return true; },
    };
    c.setConn(conn);
    const scheduleRefresh = () => {
      clearTimeout(refresh);
      if (!c.options.getToken || !c.tokenExp) return;
      const left = c.tokenExp * 1000 - Date.now();
      // Refresh a fifth of the lifetime before exp (at most 30 s before):
      // the gateway closes the connection at exp unless a refresh came.
      refresh = setTimeout(async () => {
        try {
          const t = await c.freshToken();
          if (conn.send({ refresh: t })) scheduleRefresh();
        } catch { /* the gateway closes at exp with 4010; the client reconnects */ }
      }, Math.max(0, left - Math.min(30000, left / 5)));
    };
    const deliver = (ev) => {
      txn.push(ev);
      if (!ev.txn_end) return;
      const cursor = ev.cursor;
      c.received(txn, cursor);
      txn = [];
      if (c.full && !full) { full = true; sock.close(1000); }
    };
    sock.onopen = () => { opened = true; c.opened(conn); scheduleRefresh(); };
    sock.onmessage = (m) => {
      if (full) return;
      let v;
      try { v = parse(c, typeof m.data === 'string' ? m.data : utf8.decode(m.data)); } catch (e) {
        resolve({ error: protocolError(`a message that is not JSON: ${e.message}`) });
        sock.close(1000);
        return;
      }
      if (Array.isArray(v)) {
        // batch=txn writes the cursor once, on a message's last event:
        // the others are of the same transaction and share it.
        for (const ev of v) {
          ev.cursor ??= v[v.length - 1].cursor;
          deliver(ev);
        }
      } else if (v.type === 'heartbeat') { if (!txn.length) c.position(v.cursor); }
      else if (v.type === 'disconnect') bye = v;
      else deliver(v);
    };
    sock.onerror = () => {}; // onclose follows with the code
    sock.onclose = (e) => {
      clearTimeout(refresh);
      // The disconnect cursor is that of the last whole transaction sent:
      // all of it arrived, so it is a place to resume.
      if (bye && bye.cursor && !txn.length) c.position(bye.cursor);
      if (!opened && !bye && !c.closed) { diagnose(c).then(resolve); return; }
      resolve(wsEnd(e.code, bye, full));
    };
  });
}

// failed is the error of a stream the gateway ended: status as the HTTP
// answer to the same condition would have, code the gateway's.
const failed = (message, status, code) => Object.assign(protocolError(message), { status, code });

function wsEnd(code, bye, full) {
  if (full) return { full };
  if (!bye) return {};
  const end = { disconnect: bye };
  switch (bye.code) {
    case 4001: return { ...end, shutdown: true };
    case 4008: return { ...end, slow: true };
    case 4010: case 4003: return { ...end, tokenExpired: true };
    case 4011: return { ...end, error: failed(bye.message, CANNOT_CONTINUE.has(bye.reason) ? 409 : 502, bye.reason || 'upstream_failed') };
    default: return { ...end, error: failed(`closed ${code}: ${bye.message}`, 502, bye.reason || 'closed') };
  }
}

// diagnose finds out why a WebSocket was refused: a browser hides the
// HTTP answer of a failed handshake. The SSE endpoint makes the same checks
// (stream, cursor, token, subscriber) and answers them in JSON. The cursor
// is checked without the subscriber, the subscriber without the cursor, so
// that a refusal names which of the two it is about.
async function diagnose(c) {
  const q = c.startQuery();
  const sub = q.get('subscriber');
  q.delete('subscriber');
  const probes = [q];
  if (sub) probes.push(new URLSearchParams({ subscriber: sub }));
  for (const p of probes) {
    const ctl = new AbortController();
    try {
      const r = await c.fetch(`${c.baseURL()}/v1/streams/${encodeURIComponent(c.options.stream)}/sse?${p}`,
        { headers: c.headers(), signal: ctl.signal });
      if (!r.ok) return { error: await httpError(r) };
    } catch (e) {
      return { error: networkError(e) };
    } finally {
      ctl.abort(); // a successful SSE response would stream on
    }
  }
  return { error: networkError('the WebSocket handshake failed, though the stream can be read') };
}

// ---- SSE through fetch (headers can carry the token)

async function sse(c) {
  const ctl = new AbortController();
  c.setConn({ abort: () => ctl.abort() });
  let r;
  try {
    r = await c.fetch(streamURL(c, 'sse'), { headers: { ...c.headers(), Accept: 'text/event-stream' }, signal: ctl.signal });
  } catch (e) {
    return c.closed ? {} : { error: networkError(e) };
  }
  if (!r.ok) return { error: await httpError(r) };
  c.opened({ abort: () => ctl.abort() });
  let txn = [];
  try {
    for await (const batch of sseEvents(r.body)) {
      for (const m of batch) {
        const end = sseMessage(c, m, txn);
        if (end) return end;
        if (m.id !== null && m.event !== 'heartbeat' && !inside(m.id)) txn = [];
      }
      if (c.full) await c.room();
      if (c.closed) return {};
    }
    return {};
  } catch (e) {
    return c.closed ? {} : { error: e.status !== undefined ? e : networkError(e) };
  } finally {
    ctl.abort();
  }
}

// sseMessage applies one SSE message; it returns how the stream ended if
// the message ends it.
function sseMessage(c, m, txn) {
  switch (m.event) {
    case 'heartbeat':
      if (!txn.length) c.position(m.id);
      return null;
    case 'token_expired':
      return { tokenExpired: true };
    case 'error': {
      const d = JSON.parse(m.data);
      const status = CANNOT_CONTINUE.has(d.code) ? 409 : 502;
      return { error: failed(d.message, status, d.code) };
    }
    default:
      txn.push(parse(c, m.data));
      if (m.id !== null && !inside(m.id)) c.received(txn, m.id);
      return null;
  }
}

// ---- SSE through EventSource (when the application asks for it)

const SSE_TYPES = ['change', 'reshard', 'moved', 'blocked', 'resync', 'snapshot_complete', 'ddl', 'heartbeat', 'token_expired', 'error'];

function eventsource(c) {
  const ES = c.options.EventSource;
  const q = c.startQuery(c.token ? { access_token: c.token } : {});
  return new Promise((resolve) => {
    const es = new ES(`${c.baseURL()}/v1/streams/${encodeURIComponent(c.options.stream)}/sse?${q}`);
    let txn = [];
    let lastId = '';
    let opened = false;
    const end = (how) => { es.close(); resolve(how); };
    c.setConn({ abort: () => end({}) });
    es.onopen = () => { opened = true; c.opened({ abort: () => end({}) }); };
    for (const type of SSE_TYPES) {
      es.addEventListener(type, (e) => {
        if (type === 'error' && !e.data) { // EventSource's own connection error
          es.close();
          if (opened) resolve({}); else diagnose(c).then(resolve);
          return;
        }
        // An event that carried an id: changed lastEventId (an event
        // without one keeps the previous value).
        const id = e.lastEventId !== lastId ? e.lastEventId : null;
        lastId = e.lastEventId;
        const how = sseMessage(c, { event: type, data: e.data, id }, txn);
        if (how) { end(how); return; }
        if (id !== null && type !== 'heartbeat' && !inside(id)) txn = [];
        if (c.full) end({ full: true });
      });
    }
  });
}

// ---- HTTP long-poll

// With prime, poll gives a WebSocket or SSE client that has no cursor
// one before it connects, and returns null. Those transports send none
// before the first transaction or heartbeat, and a connection that broke
// before either would be opened again where the stream starts then: the
// live end has moved on (rows lost), a snapshot starts over, a
// subscriber's stored cursor is behind what was received (rows again). A
// pull page without waiting answers at once with the position, and any
// transactions before it.
async function poll(c, prime) {
  // One controller per request: a signal shared by every request of a
  // long session would collect one listener per fetch.
  let ctl = null;
  let stopped = false;
  const conn = { abort: () => { stopped = true; if (ctl) ctl.abort(); } };
  if (!prime) c.setConn(conn);
  const o = c.options;
  let cursor = '';
  let txn = [];
  // What the last page said to pass back (Vsg-Scope, Vsg-Interval): the
  // URL a cache in front of the gateway keeps pages under. The scope is
  // the token's: learnt again when the token changes.
  let scope = '';
  let interval = '';
  let scopeToken = c.token;
  for (;;) {
    await c.room();
    if (c.closed || stopped) return {};
    // A token about to expire is renewed between requests, not after a 401.
    if (c.tokenExp && c.tokenExp * 1000 - Date.now() < 5000) await c.freshToken();
    if (c.token !== scopeToken) { scope = ''; scopeToken = c.token; }
    ctl = new AbortController();
    const q = cursor ? new URLSearchParams({ cursor }) : c.startQuery();
    q.set('wait', prime ? '0s' : o.pollWait);
    q.set('limit', String(o.pollLimit));
    if (scope) q.set('scope', scope);
    if (interval) q.set('interval', interval);
    let page;
    try {
      const r = await c.fetch(`${c.baseURL()}/v1/streams/${encodeURIComponent(o.stream)}/changes?${q}`, { headers: c.headers(), signal: ctl.signal });
      if (!r.ok) return { error: await httpError(r) };
      scope = header(r, 'Vsg-Scope', /^[\w-]{16}$/);
      interval = header(r, 'Vsg-Interval', /^\d{1,18}$/);
      page = parse(c, await r.text());
    } catch (e) {
      return c.closed ? {} : { error: e.status !== undefined ? e : networkError(e) };
    }
    if (!prime) c.opened(conn);
    txn = pollPage(c, page, txn);
    if (prime && c.resumeCursor && !txn.length) return null;
    if (page.next_cursor) cursor = page.next_cursor;
    else if (prime) return { error: networkError('the gateway does not know the stream\'s position yet') };
  }
}

export const prime = (c) => poll(c, true);

// header is a response header's value if it matches re, else ''.
function header(r, name, re) {
  const v = r.headers.get(name) || '';
  return re.test(v) ? v : '';
}

// pollPage hands over the page's whole transactions and returns the
// events of one it ends inside (a huge transaction, continued by the next
// page: next_cursor begins with "2").
function pollPage(c, page, txn) {
  const evs = page.events || [];
  const next = page.next_cursor || '';
  for (let i = 0; i < evs.length; i++) {
    txn.push(evs[i]);
    const last = i + 1 === evs.length;
    // An event ends its transaction where the cursor changes, and at the
    // page's end unless next_cursor goes on inside it; an event of a
    // piece of a huge transaction (its cursor inside) never does.
    if (!inside(evs[i].cursor) && (last ? !inside(next) : evs[i + 1].cursor !== evs[i].cursor)) {
      c.received(txn, evs[i].cursor);
      txn = [];
    }
  }
  if (!txn.length && next) c.position(next); // filters may move the position without events
  return txn;
}

export const transports = { ws, sse, eventsource, poll };
