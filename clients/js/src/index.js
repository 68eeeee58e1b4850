// vstream-gateway's client: read a stream of Vitess row changes over
// WebSocket, SSE or HTTP long-poll, each transaction exactly once.
export { StreamClient, Transaction, jwtExp } from './client.js';
export { StreamError } from './errors.js';
export { MemoryStore, WebStorageStore, localStorageStore, sessionStorageStore } from './stores.js';
export { parseJSON } from './json.js';
