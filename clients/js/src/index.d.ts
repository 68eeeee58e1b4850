// The client's API. The event shapes (ChangeEvent, ResyncEvent, …) are
// generated from the gateway's openapi.yaml into events.d.ts.
import type {
  BlockedEvent, ChangeEvent, DDLEvent, Disconnect, Event, HeartbeatEvent, MovedEvent,
  ReshardEvent, ResyncEvent, SnapshotCompleteEvent,
} from './events.js';

export type * from './events.js';

/** Where a client keeps the cursor of the last transaction the application finished with. */
export interface CursorStore {
  get(key: string): string | null | undefined | Promise<string | null | undefined>;
  set(key: string, cursor: string): void | Promise<void>;
  delete?(key: string): void | Promise<void>;
}

export interface Parser {
  /** Maps an integer outside ±(2^53 − 1), given as its decimal text (default: kept as that text). */
  bigint?: (digits: string) => unknown;
  /** Maps every column value of key, before and after (e.g. a DECIMAL column's string to a decimal type). */
  value?: (value: unknown, column: string, event: ChangeEvent) => unknown;
}

export interface StreamClientOptions {
  /** The gateway's base URL, e.g. https://gateway.example.com (a path prefix is kept). */
  url: string | URL;
  /** The stream's name. */
  stream: string;
  /** ws (default): WebSocket; sse: Server-Sent Events; poll: HTTP long-poll. */
  transport?: 'ws' | 'sse' | 'poll';
  /** Start right after this cursor (else the cursor store's, else the subscriber's stored one, else `start`). */
  cursor?: string;
  /** Read as this named subscriber: the gateway keeps its cursor when it acks. */
  subscriber?: string;
  /** Where a reader with no cursor begins: now (the live end) or snapshot (current rows, then changes); default: the stream's. */
  start?: 'now' | 'snapshot';
  /** A bearer token. */
  token?: string;
  /** Called for a token before each connection and when one expired or was refused. */
  getToken?: () => string | Promise<string>;
  /** Where the cursor is kept across reloads and restarts (default: memory). */
  cursorStore?: CursorStore;
  /** The cursor store's key (default: the stream, and "@subscriber" for a named one). */
  storeKey?: string;
  /** Ack what the application finished with (default: true for a named subscriber). */
  autoAck?: boolean;
  /** Milliseconds between acks (default 250): each is a store write on the gateway. */
  ackInterval?: number;
  /** Reconnect back-off in ms, full jitter between 0 and a cap doubling from backoffMin to backoffMax (500, 20000). */
  backoffMin?: number;
  backoffMax?: number;
  /** Transactions received ahead of the application before reading pauses (default 1000). */
  maxQueue?: number;
  /** Long-poll wait (default "30s") and events per poll (default 1000). */
  pollWait?: string;
  pollLimit?: number;
  /** Typed values: exact integers past 2^53 and per-column mapping. */
  parser?: Parser;
  /** Called (and awaited) before a resync's transaction is handed over: discard state derived from earlier events; a fresh snapshot follows. */
  onResync?: (event: ResyncEvent) => void | Promise<void>;
  /** A WebSocket constructor where the runtime has none (Node 20: `import WebSocket from 'ws'`). */
  WebSocket?: unknown;
  /** With transport sse: read through this EventSource constructor instead of fetch (the token then travels in the URL). */
  EventSource?: unknown;
  /** A fetch to use instead of the global one. */
  fetch?: typeof fetch;
  /** Extra headers for HTTP requests (sse, poll, acks). */
  headers?: Record<string, string>;
  /** Aborting it closes the client. */
  signal?: AbortSignal;
}

/** One whole transaction: its events in commit order and the cursor after it. */
export declare class Transaction {
  readonly events: Event[];
  readonly cursor: string;
  /** The row changes (events of type "change"). */
  get changes(): ChangeEvent[];
}

export type ClientState = 'idle' | 'connecting' | 'connected' | 'reconnecting' | 'closed';

export interface ClientEvents {
  resync: (e: ResyncEvent) => void;
  reshard: (e: ReshardEvent) => void;
  moved: (e: MovedEvent) => void;
  blocked: (e: BlockedEvent) => void;
  snapshot_complete: (e: SnapshotCompleteEvent) => void;
  ddl: (e: DDLEvent) => void;
  heartbeat: (e: HeartbeatEvent) => void;
  /** The gateway's last message before it closed a WebSocket (code, reason, cursor). */
  disconnect: (e: Disconnect) => void;
  state: (state: ClientState, detail: string) => void;
  /** A failure: fatal ones also reject next(); others are retried. */
  error: (e: StreamError) => void;
}

export declare class StreamClient implements AsyncIterable<Transaction> {
  constructor(options: StreamClientOptions);
  /** The cursor after the last transaction the application finished with. */
  readonly cursor: string;
  readonly state: ClientState;
  readonly options: Readonly<StreamClientOptions>;
  /** Listens to a control event or a client event; returns a function that removes the listener. */
  on<K extends keyof ClientEvents>(type: K, fn: ClientEvents[K]): () => void;
  /** The next whole transaction; asking for it commits the one before. */
  next(): Promise<IteratorResult<Transaction, undefined>>;
  [Symbol.asyncIterator](): AsyncIterator<Transaction, undefined>;
  /** Calls fn with every transaction, one at a time; each is committed once fn is done. */
  subscribe(fn: (txn: Transaction) => void | Promise<void>): Promise<void>;
  /** Commits the last transaction handed over (as the next next() would). */
  commit(): void;
  /** Acknowledges everything up to cursor for the named subscriber (coalesced). */
  ack(cursor: string): void;
  /** Ends the connection after sending any pending ack. */
  close(): Promise<void>;
}

export declare class StreamError extends Error {
  /** The HTTP status, or 0 with no HTTP answer. */
  readonly status: number;
  /** The gateway's error code (openapi.yaml), or network, protocol, config. */
  readonly code: string;
  /** Milliseconds the gateway asked to wait (Retry-After). */
  readonly retryAfter: number;
  /** Trying again later can succeed. */
  readonly retryable: boolean;
  /** The stream cannot go on from this cursor (resume_impossible, tables_dropped, subscriber_scope_mismatch). */
  readonly cannotContinue: boolean;
}

export declare class MemoryStore implements CursorStore {
  get(key: string): string;
  set(key: string, cursor: string): void;
  delete(key: string): void;
}

export declare class WebStorageStore implements CursorStore {
  constructor(storage: Storage, prefix?: string);
  get(key: string): string;
  set(key: string, cursor: string): void;
  delete(key: string): void;
}

export declare function localStorageStore(prefix?: string): WebStorageStore;
export declare function sessionStorageStore(prefix?: string): WebStorageStore;
/** Parses JSON keeping integers past 2^53 exact (as text, or as bigint maps them). */
export declare function parseJSON(text: string, bigint?: (digits: string) => unknown): unknown;
/** A JWT's exp in seconds (read, not verified), or 0. */
export declare function jwtExp(token: string): number;
