// Code generated from openapi.yaml by `go run ./clients/js/gen`; DO NOT EDIT.

export interface AckRequest {
  cursor: Cursor;
}

export interface AckResponse {
  cursor: Cursor;
  subscriber: Name;
}

export interface Batch {
  /** Whole transactions, in commit order (a huge one in pages of `limit` events). */
  events: Event[];
  next_cursor: Cursor;
  /** The reader has caught up with the live end of the binlog (see the operation). */
  up_to_date: boolean;
}

/**
 * Its `tables` are those of the token's `tables` scope; a reader whose scope has none of
 * them does not get the event.
 * A MoveTables cutover moved only some of the stream's tables (`reason: partial_move`), which
 * the stream cannot follow: it reads keyspace `from` on, where the moved `tables` get no new
 * rows. Sent once per reader that crosses the cutover, after its last transaction before it;
 * the stream definition shows the same as `blocked`.
 */
export interface BlockedEvent {
  cursor: Cursor;
  from: string;
  /** The gateway's key of the cutover's journal. */
  journal?: string;
  /** The keyspace the stream reads (the moved tables left it). */
  keyspace: string;
  message?: string;
  reason: "partial_move";
  /** The stream's tables that moved. */
  tables: string[];
  to: string;
  type: "blocked";
}

/**
 * One row change. Column values are typed from the column's MySQL type:
 *
 * | column type | JSON |
 * |---|---|
 * | TINYINT … BIGINT (signed or unsigned), YEAR | number, exact digits, also beyond 2^53 (JavaScript's `JSON.parse` rounds those: use a reviver that reads the source text) |
 * | DECIMAL | string with all its fraction digits (`"12.30"`) |
 * | FLOAT | number, 6 significant digits as the database shows it; FLOAT(M,D): D decimals |
 * | DOUBLE | number, the shortest form that reads back exactly |
 * | TIMESTAMP | string, RFC 3339 in UTC (`"2024-06-01T07:34:56.789Z"`); zero → null |
 * | DATETIME | string, ISO 8601 local time without zone (`"2024-06-01T12:34:56.000120"`); zero → null |
 * | DATE | string (`"2024-06-01"`); zero → null |
 * | TIME | string, may be negative or past 24 h (`"-838:59:59"`) |
 * | CHAR, VARCHAR, TEXT, ENUM (any character set) | string, UTF-8 |
 * | BINARY, VARBINARY, BLOB | string, standard base64 |
 * | GEOMETRY | string, base64 of SRID + WKB |
 * | JSON | the JSON value itself |
 * | SET | array of member names |
 * | BIT | number |
 * | UUID, INET4, INET6 (MariaDB) | string, text form |
 * | NULL | null |
 *
 * An `update` carries both images in full, changed columns or not.
 * The same row gives the same JSON in the copy phase (`op: snapshot`) and the binlog.
 */
export interface ChangeEvent {
  /** The row after the change (insert, update, snapshot); else null. */
  after: { [column: string]: unknown } | null;
  /** The row before the change (update, delete); else null. */
  before: { [column: string]: unknown } | null;
  /**
   * The transaction's commit time, whole seconds, UTC; null for copy-phase rows.
   * @format date-time
   */
  commit_ts: string | null;
  /**
   * Where to resume after this event's transaction. In a WebSocket `batch=txn` array, only on the
   * array's last event (the others share it).
   */
  cursor: Cursor;
  /**
   * The primary-key columns (of `before` for a delete, else of `after`); null if the table has no
   * primary key.
   */
  key: { [column: string]: unknown } | null;
  keyspace: string;
  /** `snapshot` is a row read by the copy phase of a `start: snapshot` stream or a resync. */
  op: "insert" | "update" | "delete" | "snapshot";
  shard: string;
  table: string;
  /**
   * WebSocket only: present on the last event of each transaction. Acknowledge only
   * cursors seen with it: the transaction arrived whole.
   */
  txn_end?: true;
  type: "change";
}

/**
 * Opaque, URL-safe, signed cursor token. Store and send back as is. A `next_cursor` that
 * starts with `2` lies inside a huge transaction (pull): a reader opened with it resumes
 * exactly there; an ack of it, or a webhook created at it, takes the position before that
 * transaction.
 */
export type Cursor = string;

/** A schema change on one shard. Later change events use the new columns. */
export interface DDLEvent {
  cursor: Cursor;
  keyspace?: string;
  shard?: string;
  statement: string;
  type: "ddl";
}

/** The last WebSocket message before the server closes the connection with `code`. */
export interface Disconnect {
  code: 4000 | 4001 | 4003 | 4008 | 4010 | 4011;
  cursor?: Cursor;
  message: string;
  reason: string;
  type: "disconnect";
}

/**
 * Every error response. Codes: `invalid_body`, `invalid_stream`, `invalid_cursor`,
 * `invalid_subscriber`, `invalid_limit`, `invalid_wait`, `invalid_webhook`,
 * `webhook_url_forbidden`, `invalid_after`, `invalid_interval`, `invalid_restart` (400);
 * `stream_not_found`,
 * `subscriber_not_found`, `webhook_not_found`, `dead_letter_not_found`, `not_found` (404);
 * `method_not_allowed` (405); `stream_exists`, `subscriber_scope_mismatch`,
 * `resume_impossible`, `tables_dropped`, `spool_gone` (409); `body_too_large` (413);
 * `upgrade_required` (426); `unauthorized` (401); `forbidden`, `scope_mismatch` (403);
 * `rate_limited` (429);
 * `internal` (500); `upstream_failed`, `replay_failed` (502); `upstream_unavailable`,
 * `store_unavailable`, `webhooks_unavailable` (503).
 */
export interface Error {
  error: {
    code: string;
    message: string;
    /** On a pull's `409 resume_impossible` without a subscriber, the URL to start again from. */
    restart?: string;
  };
}

/** One event, told apart by `type`. */
export type Event =
  | ChangeEvent
  | ReshardEvent
  | ResyncEvent
  | SnapshotCompleteEvent
  | DDLEvent
  | HeartbeatEvent
  | MovedEvent
  | BlockedEvent;

/**
 * Sent to idle SSE and WebSocket clients: the current cursor (it moves even when every row
 * is filtered out). Store it like any other cursor.
 */
export interface HeartbeatEvent {
  cursor: Cursor;
  type: "heartbeat";
}

/**
 * Its `tables` are those of the token's `tables` scope (in `from` or `to`); a reader whose
 * scope has none of them does not get the event.
 * The stream's tables moved to another keyspace (a MoveTables cutover, followed with
 * `--vtctld`): what follows comes from keyspace `to`. Informational: the stream goes on
 * without loss. Sent once per reader and move.
 */
export interface MovedEvent {
  cursor: Cursor;
  from: string;
  /** The gateway's key of the cutover's journal. */
  journal?: string;
  /** The keyspace the tables left. */
  keyspace: string;
  tables: string[];
  to: string;
  type: "moved";
}

/** 1-64 letters, digits, `_`, `.`, `-`, starting with a letter or digit. */
export type Name = string;

/**
 * The keyspace was resharded and the stream moved from the `from` shards to the `to` shards
 * (a Vitess reshard journal). Informational: the stream goes on without loss.
 */
export interface ReshardEvent {
  cursor: Cursor;
  from: string[];
  /** The Vitess journal id (a decimal number, as a string to keep all 64 bits). */
  journal_id: string;
  keyspace: string;
  to: string[];
  type: "reshard";
}

/**
 * Exact resume was impossible: the cursor's shards are gone and no journal bridges them
 * (`reason: shards_gone`), the store lost data the resume needed (`reason: store_lost`:
 * a named subscriber's cursor, or the journals of a reshard), or the cursor is behind a
 * MoveTables cutover whose source tables `complete` dropped (`reason: tables_moved`;
 * `missing` names the source shards). What follows is a fresh
 * snapshot (`op: snapshot` rows, then `snapshot_complete`): discard everything derived
 * from earlier events. Without `--vtctld`, a reader that sees the stream's tables
 * dropped (the `DROP TABLE` of a MoveTables `complete` the gateway did not follow) gets
 * `reason: tables_dropped` with `tables` right after the `ddl` event; no snapshot follows
 * (the tables are gone), and with `on_gap: fail` the stream ends with 409 `tables_dropped`
 * instead, before the `ddl` event. A cursor from before the `DROP` read where the gateway
 * no longer holds the stream gets the same: vttablet refuses to stream the dropped table's
 * rows (after the resync the stream reads on from the live end).
 */
export interface ResyncEvent {
  cursor: Cursor;
  /** With `tables_moved`, the keyspace the tables left. */
  from?: string;
  keyspace?: string;
  /**
   * With `store_lost`, when the gateway found that the store had lost data.
   * @format date-time
   */
  lost_at?: string;
  message?: string;
  /** The shards the cursor needed that are gone. */
  missing?: string[];
  reason?: "shards_gone" | "store_lost" | "tables_moved" | "tables_dropped";
  /** With `store_lost`, the named subscriber that had no stored cursor. */
  subscriber?: string;
  /**
   * With `reason: tables_dropped`, the stream's tables that were dropped; with
   * `tables_moved`, those that moved. Only the tables of the token's `tables` scope are
   * listed: a `tables_dropped` resync about none of them is not sent to the reader, a
   * `tables_moved` one (a fresh snapshot follows) is, with an empty list.
   */
  tables?: string[];
  /** With `tables_moved`, the keyspace the tables moved to. */
  to?: string;
  type: "resync";
}

export interface Rule {
  /**
   * For a table name: `select <columns | *> from <table> [where …]`, where the WHERE
   * clause is AND-ed comparisons of a column with a literal (`=`, `!=`, `<`, `<=`, `>`,
   * `>=`), `IN (…)`, `BETWEEN`, `IS [NOT] NULL` or `in_keyrange(…)`. For a regex: empty
   * or one key range such as `-80`.
   */
  filter?: string;
  /** A table name, or a `/regular expression/` over table names. */
  match: string;
}

/** The `data` of the final `event: error` of an SSE stream that failed. */
export interface SSEError {
  code: string;
  cursor?: Cursor;
  message: string;
  type: "error";
}

/** The `data` of the final `event: token_expired` of an SSE stream whose token expired. */
export interface SSETokenExpired {
  cursor?: Cursor;
  message: string;
  type: "token_expired";
}

/** The copy phase finished; live changes follow. */
export interface SnapshotCompleteEvent {
  cursor: Cursor;
  keyspace: string;
  type: "snapshot_complete";
}

/** A stored stream definition. */
export interface Stream {
  /**
   * Why the stream cannot follow its tables (with `--vtctld`): a MoveTables cutover moved
   * only some of them (`reason: partial_move`; `tables` are the stream's tables that moved,
   * to keyspace `to`). One stream reads one keyspace: it stays on `from`, where the moved
   * tables get no new rows; define a stream on `to` for them. Its readers got a `blocked`
   * event. Set by the gateway; ignored on input.
   */
  blocked?: {
    /** @format date-time */
    at?: string;
    from: string;
    journal: string;
    local_positions?: { [key: string]: string };
    reason: "partial_move";
    tables: string[];
    to: string;
  };
  /**
   * Set by the gateway; ignored on input.
   * @format date-time
   */
  created_at: string;
  keyspace: string;
  /**
   * The MoveTables cutovers the stream followed (with `--vtctld`), oldest first;
   * `keyspace` is where its tables are now. Set by the gateway; ignored on input.
   */
  moves?: {
    /** @format date-time */
    at?: string;
    from?: string;
    journal?: string;
    local_positions?: { [key: string]: string };
    tables?: string[];
    target_positions?: { [key: string]: string };
    to?: string;
  }[];
  name: Name;
  /**
   * What a reader gets when its cursor cannot be resumed exactly (its shards were resharded
   * away and no journal bridges them): `resync` (a `resync` event, then a fresh snapshot)
   * or `fail` (an error naming the missing shards).
   * @default "resync"
   */
  on_gap: "resync" | "fail";
  /** Vitess filter rules. */
  rules?: Rule[];
  /**
   * Where a reader without a cursor starts: `now` (changes from now on) or `snapshot` (a
   * copy of the current rows as `op: snapshot` events, then `snapshot_complete`, then live
   * changes).
   * @default "now"
   */
  start: "now" | "snapshot";
  /** Plain table names; every column, every row. */
  tables?: string[];
}

/** What a stream reads. Give `tables`, `rules`, or both (at most 256 entries in all). */
export interface StreamDefinition {
  /**
   * Why the stream cannot follow its tables (with `--vtctld`): a MoveTables cutover moved
   * only some of them (`reason: partial_move`; `tables` are the stream's tables that moved,
   * to keyspace `to`). One stream reads one keyspace: it stays on `from`, where the moved
   * tables get no new rows; define a stream on `to` for them. Its readers got a `blocked`
   * event. Set by the gateway; ignored on input.
   */
  blocked?: {
    /** @format date-time */
    at?: string;
    from: string;
    journal: string;
    local_positions?: { [key: string]: string };
    reason: "partial_move";
    tables: string[];
    to: string;
  };
  /**
   * Set by the gateway; ignored on input.
   * @format date-time
   */
  created_at?: string;
  keyspace: string;
  /**
   * The MoveTables cutovers the stream followed (with `--vtctld`), oldest first;
   * `keyspace` is where its tables are now. Set by the gateway; ignored on input.
   */
  moves?: {
    /** @format date-time */
    at?: string;
    from?: string;
    journal?: string;
    local_positions?: { [key: string]: string };
    tables?: string[];
    target_positions?: { [key: string]: string };
    to?: string;
  }[];
  name: Name;
  /**
   * What a reader gets when its cursor cannot be resumed exactly (its shards were resharded
   * away and no journal bridges them): `resync` (a `resync` event, then a fresh snapshot)
   * or `fail` (an error naming the missing shards).
   * @default "resync"
   */
  on_gap?: "resync" | "fail";
  /** Vitess filter rules. */
  rules?: Rule[];
  /**
   * Where a reader without a cursor starts: `now` (changes from now on) or `snapshot` (a
   * copy of the current rows as `op: snapshot` events, then `snapshot_complete`, then live
   * changes).
   * @default "now"
   */
  start?: "now" | "snapshot";
  /** Plain table names; every column, every row. */
  tables?: string[];
}

export interface Subscriber {
  /** @format date-time */
  acked_at: string;
  cursor: Cursor;
  subscriber: Name;
}

export interface SubscriberStatus {
  /** @format date-time */
  acked_at: string;
  /** Reshard spools still to replay before the new shards. */
  bridges: number;
  /** Open connections on this replica (a webhook: 1 while a replica delivers it). */
  connected: number;
  /** The cursor is inside a snapshot copy. */
  copying: boolean;
  cursor: Cursor;
  /** Per shard, behind this replica's tail; null when its ring does not reach back to the cursor. */
  lag: {
    [shard: string]: {
      seconds: number;
      transactions: number;
    };
  } | null;
  /** @format date-time */
  last_seen?: string;
  /** Shard → GTID set of the stored cursor. */
  positions: { [shard: string]: string };
  subscriber: string;
  webhook: boolean;
}
