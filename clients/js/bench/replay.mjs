// The JavaScript client's replay benchmark: it reads a stream from a
// cursor with the client until it has seen WANT row changes, and does so
// 1 + WARMUP times in one process (default WARMUP=1). It prints
// {"rows": n, "ms": t, "cold_ms": c}: t is the last read, c the first,
// each from the first connection to the last row. The gateway's replay
// benchmark (e2e TestReplayThroughput, make bench) runs it beside a plain
// VStream client in a Go process that is warm by then: the first read of
// a fresh Node process also measures V8 sizing its heap and compiling,
// which a long-running consumer did long before.
//
//   VSG_URL=http://127.0.0.1:8080 STREAM=s CURSOR=… WANT=200000 [TRANSPORT=ws] [TOKEN=…] [WARMUP=1] node bench/replay.mjs
import WebSocket from 'ws';
import { StreamClient } from '../src/index.js';

const env = process.env;
const want = Number(env.WANT);
const warmup = env.WARMUP === undefined ? 1 : Number(env.WARMUP);

async function read() {
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
  await client.close();
  return { rows, ms: Number((performance.now() - start).toFixed(1)) };
}

const cold = await read();
let last = cold;
for (let i = 0; i < warmup; i++) last = await read();
console.log(JSON.stringify({ rows: last.rows, ms: last.ms, cold_ms: cold.ms }));
