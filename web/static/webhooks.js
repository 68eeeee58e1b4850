// Webhooks (admin): state, owner replica, the batch being retried with its
// attempts and next retry, latency and failure charts (this replica's
// numbers, from GET /v1/stats), dead letters with their last error; pause,
// resume, rotate secret, replay a dead letter, purge — each confirmed.
import { $, el, ago, getJSON, request, confirmButton, keepFocus } from './api.js';
import { chart } from './charts.js';

let stream = '';
let timer = 0;
const chartBoxes = new Map(); // webhook id → its charts, kept across refreshes
const secrets = new Map(); // webhook id → the secret a rotation returned, shown until dismissed

export function showWebhooks(streams) {
  const sel = $('webhook-stream');
  const want = new URLSearchParams(location.search).get('stream') || stream;
  sel.replaceChildren(...streams.map((s) => new Option(s.name, s.name)));
  stream = streams.some((s) => s.name === want) ? want : (streams[0] ? streams[0].name : '');
  sel.value = stream;
  refresh();
}

export function hideWebhooks() { clearTimeout(timer); }

$('webhook-stream').addEventListener('change', (e) => {
  stream = e.target.value;
  history.replaceState(null, '', `?view=webhooks&stream=${encodeURIComponent(stream)}`);
  refresh();
});

const base = (id) => `v1/streams/${encodeURIComponent(stream)}/webhooks${id ? `/${encodeURIComponent(id)}` : ''}`;

async function refresh() {
  clearTimeout(timer);
  if (!stream) return;
  const name = stream;
  try {
    const [list, stats] = await Promise.all([getJSON(base()).then((b) => b.webhooks), getJSON('v1/stats').catch(() => null)]);
    const dls = await Promise.all(list.map((w) => (w.dead_letters ? getJSON(`${base(w.id)}/dead-letters`).then((b) => b.dead_letters) : [])));
    const st = stats && stats.streams.find((x) => x.name === name);
    if (name === stream) keepFocus($('webhook-list'), () => render(list, dls, (st && st.webhook_history) || {}));
    $('webhooks-error').textContent = '';
  } catch (e) {
    $('webhooks-error').textContent = `Cannot list webhooks: ${e.message}`;
  }
  timer = setTimeout(refresh, 3000);
}

function render(list, dls, hist) {
  const box = $('webhook-list');
  $('webhooks-empty').hidden = list.length > 0;
  // Keep a card whose action is awaiting confirmation as it is.
  if (box.querySelector('.confirm')) return;
  box.replaceChildren();
  list.forEach((w, i) => {
    const card = el('article', 'card webhook');
    card.dataset.webhook = w.id;
    const head = el('h2');
    head.append(el('span', `state ${w.state}`, w.state), ` ${w.id} `, el('code', 'muted', w.url));
    const facts = el('dl', 'nums');
    const add = (k, v) => { facts.append(el('dt', '', k), el('dd', '', v)); };
    add('owner', w.owner || 'none');
    add('last confirmed', ago(w.acked_at));
    add('dead letters', String(w.dead_letters));
    add('batch', `${w.batch_max_events} events, ${w.max_attempts} attempts`);
    if (w.disabled_reason) add('disabled', w.disabled_reason);
    card.append(head, facts);
    if (w.pending) {
      const p = w.pending;
      const pend = el('div', 'pending');
      pend.dataset.attempts = String(p.attempts);
      const next = p.next_attempt_at ? el('time', 'next', new Date(p.next_attempt_at).toLocaleTimeString()) : null;
      if (next) next.dateTime = p.next_attempt_at;
      pend.append(el('b', '', `Retrying a batch of ${p.events} event${p.events === 1 ? '' : 's'}: attempt ${p.attempts} of ${w.max_attempts}`),
        ` — last answer ${p.last_status || 'none'}: ${p.last_error}`);
      if (next) pend.append(' · next attempt at ', next, ` (${until(p.next_attempt_at)})`);
      if (p.first_attempt_at) pend.append(` · failing since ${ago(p.first_attempt_at)}`);
      card.append(pend);
    }
    card.append(charts(w.id, hist[w.id], w.owner));
    const secret = secrets.get(w.id);
    if (secret) {
      const s = el('div', 'notice info secret-notice');
      const text = el('span');
      text.append('New signing secret (shown once, copy it now): ', el('code', 'secret', secret));
      const close = el('button', '', '×');
      close.type = 'button';
      close.setAttribute('aria-label', 'Dismiss the new secret');
      close.onclick = () => { secrets.delete(w.id); s.remove(); };
      s.append(text, close);
      card.append(s);
    }
    const actions = el('div', 'actions');
    if (w.state === 'active') actions.append(confirmButton('Pause', `Pause ${w.id}? Delivery stops until resumed.`, () => post(w.id, 'pause')));
    else actions.append(confirmButton('Resume', `Resume ${w.id}?`, () => post(w.id, 'resume')));
    actions.append(confirmButton('Rotate', `Rotate ${w.id}'s signing secret? The old one keeps signing for 24 h.`, async () => {
      const v = await request('POST', `${base(w.id)}/rotate-secret`, { body: {} });
      secrets.set(w.id, v.secret);
      refresh();
    }));
    if (w.dead_letters) actions.append(confirmButton('Purge', `Delete all ${w.dead_letters} dead letters of ${w.id}?`, () => request('DELETE', `${base(w.id)}/dead-letters`).then(refresh)));
    card.append(actions);

    if (dls[i].length) {
      const t = el('table', 'dead-letters');
      t.innerHTML = '<caption>Dead letters</caption><thead><tr><th>#</th><th>failed</th><th>events</th><th>attempts</th><th>last error</th><th>replayed</th><th></th></tr></thead><tbody></tbody>';
      for (const d of dls[i]) {
        const tr = el('tr');
        tr.dataset.seq = String(d.seq);
        const act = el('td');
        act.append(confirmButton('Replay', `Send dead letter ${d.seq} again?`, async () => {
          await request('POST', `${base(w.id)}/dead-letters/${d.seq}/replay`);
          refresh();
        }));
        tr.append(el('td', '', String(d.seq)), el('td', '', ago(d.failed_at)), el('td', '', String(d.events)), el('td', '', String(d.attempts)),
          el('td', 'err', `${d.last_status ? `${d.last_status} ` : ''}${d.last_error}`), el('td', 'replayed', d.replayed ? 'yes' : 'no'), act);
        t.tBodies[0].append(tr);
      }
      card.append(t);
    }
    box.append(card);
  });
}

// charts draws a webhook's latency and failures over the last minutes.
function charts(id, h, owner) {
  let box = chartBoxes.get(id);
  if (!box) {
    box = el('div', 'charts');
    box.append(el('div', 'chart latency'), el('div', 'chart failures'));
    chartBoxes.set(id, box);
  }
  let note = box.querySelector('.chart-note');
  if (!note) { note = el('p', 'muted chart-note'); box.prepend(note); }
  const has = h && h.t.length > 0;
  for (const c of box.querySelectorAll('.chart')) c.hidden = !has;
  note.textContent = has ? '' : `No delivery numbers on this replica${owner ? ` (${owner} delivers this webhook)` : ''}.`;
  if (!has) return box;
  chart(box.querySelector('.latency'), 'delivery latency (s)', h.t, { 'mean latency': h.latency_seconds }, { unit: 's' });
  chart(box.querySelector('.failures'), 'attempts/s', h.t, { failed: h.failures_per_s, delivered: h.delivered_per_s });
  return box;
}

function until(iso) {
  const s = Math.round((new Date(iso).getTime() - Date.now()) / 1000);
  return s <= 0 ? 'due now' : `in ${s} s`;
}

async function post(id, what) {
  await request('POST', `${base(id)}/${what}`);
  refresh();
}
