// The stream page's live table: the live changes of one stream over SSE or
// WebSocket. The cursor after the last whole transaction shown is kept in
// localStorage per stream, so a reload resumes exactly where the page was.
//
// Live first: a stream that starts with a snapshot is read here from the
// live end (start=now), so changes show within a second whatever the table
// size; its current rows load beside the table, in pages (current.js).
import { $, apiURL, apiError, el, getJSON, token } from './api.js';

const page = new URLSearchParams(location.search);
const MAX_ROWS = 500;
const ACK_EVERY = 250;
const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/; // stream and subscriber names
const TYPES = ['change', 'reshard', 'resync', 'snapshot_complete', 'ddl', 'heartbeat'];

const st = {
  stream: '', transport: 'sse', subscriber: '',
  defs: new Map(),  // stream definitions by name
  onStream: () => {}, // told when the page switches to another stream
  conn: null,       // the EventSource or WebSocket
  gen: 0,           // bumped per connection; callbacks of an old one are ignored
  cursor: '',       // cursor after the last whole transaction received
  pending: '',      // cursor of the transaction still arriving
  acked: '',        // last cursor acked over this WebSocket
  bye: null,        // the WebSocket disconnect message, if the gateway sent one
  connToken: null,  // the token the open connection was made with
  paused: false, retry: 0, timer: 0, ackTimer: 0, changes: 0,
};

// ---- HTTP helpers

// streamURL is where the live table reads. Browsers cannot set headers on
// EventSource, so the token travels there as the access_token query
// parameter; a WebSocket carries it as a subprotocol instead (wsProtocols).
function streamURL(kind) {
  const def = st.defs.get(st.stream);
  const u = apiURL(`v1/streams/${encodeURIComponent(st.stream)}/${kind}`, {
    cursor: st.cursor, subscriber: st.subscriber,
    start: def && def.start === 'snapshot' ? 'now' : '',
    access_token: kind === 'sse' ? token() : '',
  });
  if (kind === 'ws') u.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
  return u.href;
}

function wsProtocols() {
  const t = token();
  return t ? ['vsg.v1', `bearer.${t}`] : ['vsg.v1'];
}

// Integers past 2^53 arrive with exact digits; keep their text where the
// browser exposes it (JSON.parse source text access) instead of rounding.
class Big { constructor(s) { this.s = s; } toString() { return this.s; } toJSON() { return this.s; } }
function reviver(_k, v, ctx) {
  return typeof v === 'number' && !Number.isSafeInteger(v) && ctx && /^-?\d+$/.test(ctx.source || '')
    ? new Big(ctx.source) : v;
}

// ---- cursor

const storeKey = () => `vsg.cursor.${st.stream}`;
function loadCursor() {
  try { st.cursor = localStorage.getItem(storeKey()) || ''; } catch { st.cursor = ''; }
  st.pending = '';
  showCursor();
}
function forgetCursor() {
  st.cursor = st.pending = '';
  try { localStorage.removeItem(storeKey()); } catch { /* storage disabled */ }
  showCursor();
}

// commit records that the transaction ending at cursor c was received whole.
function commit(c) {
  if (!c) return;
  if (c === st.pending) st.pending = '';
  if (c === st.cursor) return;
  st.cursor = c;
  try { localStorage.setItem(storeKey(), c); } catch { /* storage disabled */ }
  showCursor();
  // A named WebSocket subscriber confirms the transactions it rendered. An
  // ack covers everything before it and each one is a store write on the
  // gateway, so acks go at most every ACK_EVERY ms, always for the latest.
  if (st.transport === 'ws' && st.subscriber && !st.ackTimer) st.ackTimer = setTimeout(sendAck, ACK_EVERY);
}

function sendAck() {
  st.ackTimer = 0;
  const ws = st.conn;
  if (ws instanceof WebSocket && ws.readyState === WebSocket.OPEN && st.cursor !== st.acked) {
    ws.send(JSON.stringify({ ack: st.cursor }));
    st.acked = st.cursor;
  }
}

// dropPending removes the rows of a transaction cut off by a disconnect: the
// gateway sends that whole transaction again after the resume.
function dropPending() {
  if (st.pending && st.pending !== st.cursor) {
    document.querySelectorAll(`#changes tr[data-cursor="${CSS.escape(st.pending)}"]`).forEach((tr) => tr.remove());
    updateCount();
  }
  st.pending = '';
}

// ---- connection

function connect() {
  disconnect();
  if (!st.stream) return;
  st.paused = false;
  $('pause').disabled = false;
  $('pause').textContent = 'Pause';
  setState(st.retry ? 'reconnecting' : 'connecting');
  (st.transport === 'ws' ? openWS : openSSE)(++st.gen);
}

function disconnect() {
  clearTimeout(st.timer);
  if (st.ackTimer) { clearTimeout(st.ackTimer); sendAck(); }
  if (st.conn) {
    st.gen++;
    st.conn.close();
    st.conn = null;
  }
  dropPending();
}

function openSSE(gen) {
  const es = st.conn = new EventSource(streamURL('sse'));
  st.connToken = token();
  es.onopen = () => { if (gen === st.gen) { st.retry = 0; setState('connected'); } };
  for (const type of TYPES) {
    es.addEventListener(type, (e) => {
      if (gen !== st.gen) return;
      handle(JSON.parse(e.data, reviver));
      // The gateway puts id: only on the last event of a transaction (and on
      // heartbeats), so lastEventId is always a whole-transaction cursor.
      commit(e.lastEventId);
    });
  }
  // At the token's exp the gateway ends the stream with token_expired: left
  // alone, EventSource would reconnect with the expired token and be refused.
  es.addEventListener('token_expired', (e) => {
    if (gen !== st.gen) return;
    es.close();
    st.conn = null;
    dropPending();
    commit(JSON.parse(e.data).cursor || e.lastEventId);
    tokenExpired();
  });
  // "error" is both the gateway's final error event (it has data) and the
  // EventSource's own connection error (it has none).
  es.addEventListener('error', (e) => {
    if (gen !== st.gen) return;
    if (e.data) {
      const d = JSON.parse(e.data);
      notice('error', `Stream failed (${d.code}): ${d.message}. Retrying…`);
      return;
    }
    dropPending();
    if (es.readyState === EventSource.CLOSED) diagnose(gen);
    else setState('reconnecting'); // the browser retries with Last-Event-ID itself
  });
}

function openWS(gen) {
  const ws = st.conn = new WebSocket(streamURL('ws'), wsProtocols());
  st.connToken = token();
  let opened = false;
  st.acked = '';
  st.bye = null;
  ws.onopen = () => { if (gen === st.gen) { opened = true; st.retry = 0; setState('connected'); } };
  ws.onmessage = (m) => {
    if (gen !== st.gen) return;
    const ev = JSON.parse(m.data, reviver);
    if (ev.type === 'disconnect') { st.bye = ev; return; }
    // The last event of a transaction carries txn_end: the transaction is
    // whole. A message with another cursor, or a heartbeat, shows it too.
    if (st.pending && ev.cursor !== st.pending) commit(st.pending);
    handle(ev);
    if (ev.txn_end || ev.type === 'heartbeat') commit(ev.cursor);
  };
  ws.onclose = () => {
    if (gen !== st.gen) return;
    st.conn = null;
    const bye = st.bye;
    // The disconnect cursor is that of the last whole transaction written:
    // if it is the pending one, that transaction arrived whole.
    if (bye && bye.cursor === st.pending) st.pending = '';
    dropPending();
    if (bye && bye.cursor) commit(bye.cursor);
    if (!bye) {
      if (opened) retryLater();
      else diagnose(gen);
      return;
    }
    switch (bye.code) {
      case 4008: notice('warn', 'The gateway dropped this page for reading too slowly; resumed from the last whole transaction.'); retryLater(0); break;
      case 4001: retryLater(1000); break; // gateway shutting down: another replica takes over
      case 4010: tokenExpired(); break;
      default: notice('error', `Disconnected (${bye.reason}): ${bye.message}. Retrying…`); retryLater();
    }
  };
}

// tokenExpired answers the gateway closing a connection at its token's exp,
// the cursor kept: with a token pasted since the connection opened, it goes
// on at once; otherwise it waits, paused, for a fresh token and Resume.
function tokenExpired() {
  if (token() && token() !== st.connToken) { retryLater(0); return; }
  st.paused = true;
  $('pause').disabled = false;
  $('pause').textContent = 'Resume';
  setState('error', 'token expired: paste a fresh token, then Resume');
}

// diagnose finds out why a connection was refused: browsers hide the HTTP
// error of a failed EventSource or WebSocket. The SSE endpoint makes the same
// checks (stream, cursor) for both transports; it is asked without the
// subscriber, for which an SSE request with a cursor would count as an ack.
async function diagnose(gen) {
  setState('reconnecting');
  // A reload also fails the connection, before pagehide: give the page the
  // chance to go away rather than probe on its way out.
  await new Promise((resolve) => { setTimeout(resolve, 300); });
  if (gen !== st.gen) return;
  const ctl = new AbortController();
  const url = apiURL(`v1/streams/${encodeURIComponent(st.stream)}/sse`, { cursor: st.cursor });
  let err = null;
  try {
    const t = token();
    const r = await fetch(url, { signal: ctl.signal, headers: t ? { Authorization: `Bearer ${t}` } : {} });
    if (!r.ok) err = apiError(r.status, await r.json().catch(() => null));
  } catch { /* unreachable: retry below */ }
  ctl.abort(); // a successful SSE response would stream forever
  if (gen !== st.gen) return;
  if (err && err.code === 'invalid_cursor' && st.cursor) {
    notice('warn', `The saved cursor was refused (${err.message}). Starting over from where the stream starts.`);
    forgetCursor();
    connect();
  } else if (err && err.status < 500) {
    setState('error', err.message); // retrying cannot help
    $('pause').disabled = true;
  } else {
    retryLater();
  }
}

function retryLater(delay = Math.min(30000, 1000 * 2 ** st.retry)) {
  st.retry++;
  setState('reconnecting', delay ? `in ${Math.round(delay / 1000)} s` : '');
  clearTimeout(st.timer);
  st.timer = setTimeout(connect, delay);
}

// ---- events

function handle(ev) {
  if (ev.cursor && ev.cursor !== st.cursor) st.pending = ev.cursor;
  switch (ev.type) {
    case 'change':
      st.changes++;
      addChange(ev);
      break;
    case 'resync':
      clearRows();
      notice('warn', ev.reason === 'store_lost'
        ? 'Resync: the gateway\'s store lost data this position depended on, so the stream restarts from a fresh snapshot. The table was cleared.'
        : 'Resync: the saved position could not be resumed exactly, so the stream restarts from a fresh snapshot. The table was cleared.');
      addControl(ev, 'resync: a fresh snapshot follows');
      break;
    case 'reshard':
      notice('info', `Keyspace ${ev.keyspace} was resharded: ${ev.from.join(', ')} → ${ev.to.join(', ')}. The stream continues on the new shards.`);
      addControl(ev, `reshard ${ev.from.join(',')} → ${ev.to.join(',')} (journal ${ev.journal_id})`);
      break;
    case 'snapshot_complete':
      addControl(ev, 'snapshot complete: live changes follow');
      break;
    case 'ddl':
      addControl(ev, `DDL on ${ev.keyspace || ''}/${ev.shard || ''}: ${ev.statement}`);
      break;
    // heartbeat: only the cursor moves
  }
}

// ---- rendering

function fmt(v) {
  if (v === null || v === undefined) return 'NULL';
  if (typeof v === 'object' && !(v instanceof Big)) return JSON.stringify(v);
  return String(v);
}

function value(v, cls = '') {
  const s = fmt(v);
  const n = el('span', v === null ? `${cls} null`.trim() : cls, s.length > 120 ? `${s.slice(0, 119)}…` : s);
  if (s.length > 120) n.title = s;
  return n;
}

function column(name, ...parts) {
  const n = el('span', 'col');
  n.append(el('b', '', `${name}: `), ...parts);
  return n;
}

function changedColumns(ev) {
  const td = el('td');
  const before = ev.before || {};
  const after = ev.after || {};
  if (ev.op === 'update') {
    for (const k of Object.keys(after)) {
      if (fmt(after[k]) !== fmt(before[k])) td.append(column(k, value(before[k], 'before'), ' → ', value(after[k], 'after')));
    }
    if (!td.childNodes.length) td.append(el('span', 'null', 'no column changed'));
  } else if (ev.op === 'delete') {
    for (const [k, v] of Object.entries(before)) td.append(column(k, value(v, 'gone')));
  } else {
    for (const [k, v] of Object.entries(after)) td.append(column(k, value(v)));
  }
  return td;
}

function addChange(ev) {
  const tr = el('tr', 'new');
  tr.dataset.cursor = ev.cursor || '';
  const time = el('td', 'time', ev.commit_ts ? new Date(ev.commit_ts).toLocaleTimeString() : 'copy');
  time.title = ev.commit_ts || 'read by the copy phase';
  const op = el('td');
  op.append(el('span', `op ${ev.op}`, ev.op));
  const key = ev.key ? Object.entries(ev.key).map(([k, v]) => `${k}=${fmt(v)}`).join(', ') : '—';
  tr.append(time, op, el('td', '', `${ev.keyspace}.${ev.table}`), el('td', '', ev.shard), el('td', '', key), changedColumns(ev));
  addRow(tr);
}

function addControl(ev, text) {
  const tr = el('tr', 'ctl new');
  tr.dataset.cursor = ev.cursor || '';
  const td = el('td', '', `— ${text} —`);
  td.colSpan = 6;
  tr.append(td);
  addRow(tr);
}

function addRow(tr) {
  const body = $('changes').tBodies[0];
  body.prepend(tr);
  while (body.rows.length > MAX_ROWS) body.lastElementChild.remove();
  updateCount();
}

function clearRows() {
  $('changes').tBodies[0].replaceChildren();
  updateCount();
}

function updateCount() {
  const n = $('changes').tBodies[0].rows.length;
  $('count').textContent = n;
  $('empty').hidden = n > 0;
}

function notice(kind, text) {
  const box = $('notices');
  for (const n of box.children) if (n.dataset.text === text) n.remove(); // show each once, newest first
  const n = el('div', `notice ${kind}`);
  n.dataset.text = text;
  const close = el('button', '', '×');
  close.type = 'button';
  close.title = 'Dismiss';
  close.setAttribute('aria-label', 'Dismiss');
  close.onclick = () => n.remove();
  // Upstream errors can be long: show the start, keep the rest in the tooltip.
  const span = el('span', '', text.length > 300 ? `${text.slice(0, 299)}…` : text);
  span.title = text;
  n.append(span, close);
  box.prepend(n);
  while (box.children.length > 5) box.lastElementChild.remove();
}

function setState(state, detail = '') {
  $('dot').className = `dot ${state}`;
  const via = st.transport === 'ws' ? 'WebSocket' : 'SSE';
  const who = st.subscriber ? ` as ${st.subscriber}` : '';
  const text = { connected: `connected to ${st.stream} via ${via}${who}` }[state] || state;
  $('state').textContent = detail ? `${text} ${detail}` : text;
}

function showCursor() {
  const c = $('cursor');
  c.textContent = st.cursor ? `…${st.cursor.slice(-16)}` : 'none (stream start)';
  c.title = st.cursor ? `${st.cursor}\n(click to copy)` : '';
}

// ---- controls

function syncURL() {
  const q = new URLSearchParams({ view: 'stream', stream: st.stream });
  if (st.transport === 'ws') q.set('transport', 'ws');
  if (st.subscriber) q.set('subscriber', st.subscriber);
  history.replaceState(null, '', `?${q}`);
}

function start() {
  syncURL();
  loadCursor();
  connect();
  st.onStream(st.stream, st.defs.get(st.stream));
}

$('controls').addEventListener('submit', (e) => {
  e.preventDefault();
  const stream = $('stream').value;
  if (stream !== st.stream) clearRows();
  st.stream = stream;
  st.transport = document.querySelector('input[name=transport]:checked').value;
  st.subscriber = $('subscriber').value.trim();
  st.retry = 0;
  start();
});
$('stream').addEventListener('change', () => $('controls').requestSubmit());
for (const r of document.querySelectorAll('input[name=transport]')) r.addEventListener('change', () => $('controls').requestSubmit());

$('pause').addEventListener('click', () => {
  if (st.paused) { connect(); return; }
  disconnect(); // resuming continues from the cursor: nothing is missed
  st.paused = true;
  setState('paused');
  $('pause').textContent = 'Resume';
});
$('clear').addEventListener('click', () => { clearRows(); $('notices').replaceChildren(); });
$('reset').addEventListener('click', () => {
  disconnect();
  forgetCursor();
  clearRows();
  notice('info', st.subscriber
    ? `Cursor forgotten: reading from ${st.subscriber}'s stored cursor, or where the stream starts.`
    : 'Cursor forgotten: reading from where the stream starts.');
  if (st.stream) connect();
});
$('cursor-copy').addEventListener('click', () => {
  if (st.cursor && navigator.clipboard) navigator.clipboard.writeText(st.cursor).catch(() => {});
});

// Leaving the page closes the connection first, so its error callbacks do
// not mistake the unload for a failure and start probing the gateway.
window.addEventListener('pagehide', disconnect);
// A page restored from the back/forward cache keeps its table and cursor but
// not the connection closed on pagehide: resume from the cursor (unless the
// page was left paused).
window.addEventListener('pageshow', (e) => {
  if (e.persisted && st.stream && !st.paused) connect();
});

setInterval(() => { $('rate').textContent = st.changes; st.changes = 0; }, 1000);

// initLive starts the live table; onStream is told the stream shown (now
// and at every switch), for the panels beside the table.
export async function initLive(onStream) {
  st.onStream = onStream;
  st.transport = page.get('transport') === 'ws' ? 'ws' : 'sse';
  st.subscriber = page.get('subscriber') || '';
  if (st.subscriber && !NAME.test(st.subscriber)) {
    notice('error', `"${st.subscriber}" is not a valid subscriber name (${$('subscriber').title}); reading anonymously.`);
    st.subscriber = '';
  }
  document.querySelector(`input[name=transport][value=${st.transport}]`).checked = true;
  $('subscriber').value = st.subscriber;
  showCursor();
  let list;
  try {
    list = (await getJSON('v1/streams')).streams;
  } catch (e) {
    setState('error', `cannot list streams: ${e.message}`);
    return;
  }
  if (!list.length) {
    $('empty').textContent = 'No streams are defined yet: create one with POST /v1/streams (see the API link).';
    return;
  }
  $('stream').replaceChildren();
  for (const s of list) {
    st.defs.set(s.name, s);
    $('stream').append(new Option(`${s.name} (${s.keyspace})`, s.name));
  }
  const want = page.get('stream');
  st.stream = list.some((s) => s.name === want) ? want : list[0].name;
  if (want && want !== st.stream) notice('warn', `There is no stream named "${want}"; showing ${st.stream}.`);
  $('stream').value = st.stream;
  start();
}

// stopLive closes the connection (the page left the stream view).
export function stopLive() {
  disconnect();
}

// resumeLive reconnects after stopLive, from the saved cursor.
export function resumeLive() {
  if (st.stream && !st.paused && !st.conn) connect();
}
