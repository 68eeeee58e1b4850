// Webhooks (admin): state, owner replica, the batch being retried with its
// attempts and next retry, dead letters with their last error; pause,
// resume, rotate secret, replay a dead letter, purge — each confirmed.
import { $, el, ago, getJSON, request, confirmButton } from './api.js';

let stream = '';
let timer = 0;

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
    const list = (await getJSON(base())).webhooks;
    const dls = await Promise.all(list.map((w) => (w.dead_letters ? getJSON(`${base(w.id)}/dead-letters`).then((b) => b.dead_letters) : [])));
    if (name === stream) render(list, dls);
    $('webhooks-error').textContent = '';
  } catch (e) {
    $('webhooks-error').textContent = `Cannot list webhooks: ${e.message}`;
  }
  timer = setTimeout(refresh, 3000);
}

function render(list, dls) {
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
      pend.append(el('b', '', `Retrying a batch of ${p.events} events: attempt ${p.attempts}`),
        ` — last answer ${p.last_status || 'none'}: ${p.last_error}`,
        p.next_attempt_at ? ` · next attempt ${new Date(p.next_attempt_at).toLocaleTimeString()}` : '');
      card.append(pend);
    }
    const actions = el('div', 'actions');
    if (w.state === 'active') actions.append(confirmButton('Pause', `Pause ${w.id}? Delivery stops until resumed.`, () => post(w.id, 'pause')));
    else actions.append(confirmButton('Resume', `Resume ${w.id}?`, () => post(w.id, 'resume')));
    actions.append(confirmButton('Rotate', `Rotate ${w.id}'s signing secret? The old one keeps signing for 24 h.`, async () => {
      const v = await request('POST', `${base(w.id)}/rotate-secret`, { body: {} });
      const s = el('div', 'notice info');
      s.append('New secret (shown once): ', el('code', 'secret', v.secret));
      card.append(s);
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

async function post(id, what) {
  await request('POST', `${base(id)}/${what}`);
  refresh();
}
