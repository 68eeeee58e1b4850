// Compiled with ../../src/events.d.ts by TestTypeScript: the declarations
// must let a client narrow an Event by `type` and read each member's fields.
import type { Batch, Event, Stream, StreamDefinition, SubscriberStatus } from "../../src/events.js";

export function describe(e: Event): string {
  switch (e.type) {
    case "change": {
      const id: unknown = e.after === null ? undefined : e.after["id"];
      const ts: string | null = e.commit_ts;
      return `${e.op} ${e.keyspace}/${e.shard}.${e.table} ${String(id)} ${ts ?? "copy"} ${e.txn_end === true}`;
    }
    case "reshard":
      return `${e.from.join(",")} → ${e.to.join(",")} (${e.journal_id})`;
    case "resync":
      return `${e.reason ?? "?"} ${(e.missing ?? []).length}`;
    case "snapshot_complete":
      return e.keyspace;
    case "ddl":
      return e.statement;
    case "heartbeat":
      return e.cursor;
    case "moved":
      return `${e.from} → ${e.to}: ${e.tables.length}`;
    case "blocked":
      return e.reason;
  }
}

// Every member is handled above: a new one fails to compile here.
export function exhaustive(e: Event): never {
  switch (e.type) {
    case "change":
    case "reshard":
    case "resync":
    case "snapshot_complete":
    case "ddl":
    case "heartbeat":
    case "moved":
    case "blocked":
      throw new Error(e.cursor);
  }
}

export function lastCursor(b: Batch): string {
  return b.events.length > 0 ? b.events[b.events.length - 1].cursor : b.next_cursor;
}

export function lagSeconds(s: SubscriberStatus): number {
  return s.lag === null ? 0 : Math.max(0, ...Object.values(s.lag).map((l) => l.seconds));
}

// A stored stream is a definition with the gateway's fields filled in.
export const def: StreamDefinition = { name: "customers", keyspace: "customer", tables: ["customer"] };
export const stored: Stream = { ...def, start: "now", on_gap: "resync", created_at: "2026-12-02T15:00:00Z" };
export const back: StreamDefinition = stored;
