// Compiled by `npm run typecheck`: the published types let an application
// read transactions and narrow control events without casts.
import { StreamClient, StreamError, type ChangeEvent, type ResyncEvent } from '@vstream-gateway/client';
import { FileStore } from '@vstream-gateway/client/node';

const client = new StreamClient({
  url: 'http://127.0.0.1:8080', stream: 'customers', transport: 'sse', subscriber: 'billing',
  cursorStore: new FileStore('/tmp/cursors.json'),
  getToken: async () => 'token',
  parser: { bigint: (d) => BigInt(d) },
  onResync: async (e: ResyncEvent) => { console.log(e.reason, e.missing?.length); },
});
client.on('reshard', (e) => console.log(e.from.join(','), '->', e.to.join(',')));
client.on('error', (e: StreamError) => console.log(e.code, e.status, e.retryable));

async function main(): Promise<void> {
  for await (const txn of client) {
    for (const ev of txn.events) {
      if (ev.type === 'change') {
        const c: ChangeEvent = ev;
        console.log(c.op, c.table, c.after?.email, txn.cursor);
      } else if (ev.type === 'ddl') {
        console.log(ev.statement);
      }
    }
    const n: number = txn.changes.length;
    if (n > 100) break;
  }
  await client.close();
}
void main();
