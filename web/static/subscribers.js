// A stream's named subscribers (admin): the stored cursor decoded per
// shard, lag behind the head per shard, last ack, connected or not; delete.
import { $, el, ago, gtid, request, getJSON, confirmButton, keepFocus } from './api.js';

let stream = '';
let timer = 0;

export function subscribersFor(name, admin) {
  stream = name;
  clearTimeout(timer);
  $('subscribers').hidden = !admin;
  if (admin && name) refresh();
}

export function stopSubscribers() { clearTimeout(timer); }

async function refresh() {
  clearTimeout(timer);
  const name = stream;
  try {
    const b = await getJSON(`v1/streams/${encodeURIComponent(name)}/subscribers`);
    if (name === stream) keepFocus($('subscriber-list'), () => render(b.subscribers));
    $('subscribers-error').textContent = '';
  } catch (e) {
    $('subscribers-error').textContent = `Cannot list subscribers: ${e.message}`;
  }
  timer = setTimeout(refresh, 5000);
}

function render(list) {
  // Keep a row whose deletion awaits confirmation as it is.
  if ($('subscriber-list').querySelector('.confirm')) return;
  const body = $('subscriber-list').tBodies[0];
  body.replaceChildren();
  $('subscribers-empty').hidden = list.length > 0;
  for (const s of list) {
    const tr = el('tr');
    tr.dataset.subscriber = s.subscriber;
    const who = el('td');
    const dot = el('span', `dot ${s.connected ? 'connected' : 'idle'}`);
    dot.title = s.connected ? `connected (${s.connected})` : 'not connected to this replica';
    who.append(dot, s.subscriber, s.webhook ? el('span', 'muted', ' webhook') : '');
    const state = el('td', '', s.connected ? 'connected' : (s.last_seen ? `seen ${ago(s.last_seen)}` : 'offline'));
    state.className = 'conn';
    const pos = el('td');
    for (const [shard, g] of Object.entries(s.positions)) {
      const p = el('div', 'pos');
      p.append(`${shard}: `, gtid(g));
      pos.append(p);
    }
    if (s.copying) pos.append(el('div', 'muted', 'inside a snapshot copy'));
    if (s.bridges) pos.append(el('div', 'warn', `${s.bridges} reshard bridge(s) to replay`));
    const lag = el('td', 'lag');
    if (!s.lag) lag.append(el('span', 'muted', 'unknown (behind the ring, or no tail here)'));
    else {
      for (const [shard, l] of Object.entries(s.lag)) {
        lag.append(el('div', l.transactions ? 'behind' : 'caught-up', `${shard}: ${l.transactions} txns${l.transactions ? `, ${l.seconds.toFixed(0)} s` : ''}`));
      }
    }
    const acked = el('td', '', ago(s.acked_at));
    acked.title = s.acked_at;
    const act = el('td');
    if (!s.webhook) {
      act.append(confirmButton('Delete', `Forget ${s.subscriber}'s cursor?`, async () => {
        await request('DELETE', `v1/streams/${encodeURIComponent(stream)}/subscribers/${encodeURIComponent(s.subscriber)}`);
        refresh();
      }));
    }
    tr.append(who, state, pos, lag, acked, act);
    body.append(tr);
  }
}
