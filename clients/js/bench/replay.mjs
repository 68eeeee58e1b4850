// replay reads a stream from a cursor with the client until it has seen
// WANT row changes, then prints {"rows": n, "ms": t} (t from the first
// connection to the last row). The gateway's replay benchmark (e2e
// TestReplayThroughput, make bench) runs it beside a plain VStream client.
//
//   VSG_URL=http://127.0.0.1:8080 STREAM=s CURSOR=… WANT=200000 [TRANSPORT=ws] [TOKEN=…] node bench/replay.mjs
import WebSocket from 'ws';
import { StreamClient } from '../src/index.js';

const env = process.env;
const want = Number(env.WANT);
const client = new StreamClient({
  url: env.VSG_URL, stream: env.STREAM, cursor: env.CURSOR, transport: env.TRANSPORT || 'ws',
  token: env.TOKEN || '', WebSocket, pollLimit: 5000, pollWait: '5s',
});
const start = performance.now();
let rows = 0;
for await (const txn of client) {
  for (const ev of txn.events) if (ev.type === 'change') rows++;
  if (rows >= want) break;
}
console.log(JSON.stringify({ rows, ms: Math.round(performance.now() - start) }));
