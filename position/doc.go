// Package position is the gateway's one notion of a stream position: a
// Vitess VGtid, the list of per-shard entries (keyspace, shard, GTID set,
// copy progress) vtgate sends after every transaction and accepts to
// resume a VStream.
//
// A Position wraps a *binlogdatapb.VGtid and never modifies it. Rewrites
// return a new Position that shares the entries they leave alone, so a
// position handed out by a reader can be kept, compared and rewritten
// without copying; Clone gives a private deep copy to code that must
// modify one.
//
// # Entries
//
// vtgate accepts four kinds of entry, and the gateway stores all of them:
//
//   - a GTID set on a named shard, encoded by vstreamer as flavor/set:
//     "MariaDB/0-1-123" (one GTID per replication domain, several domains
//     comma-separated) or "MySQL56/<server uuid>:1-123" (intervals per
//     server, possibly with gaps);
//   - the same with TablePKs: the shard is in a copy phase, the GTID is the
//     copy's snapshot and TablePKs the last row copied per table;
//   - an empty GTID on a named shard: the shard's copy phase has not
//     started, so resuming starts it from the beginning;
//   - a keyspace without a shard, or the GTID "current": vtgate picks the
//     shards, or each shard's position, when the stream opens.
//
// The first three resume exactly where they were taken; the last does
// not (see Concrete).
//
// # Order
//
// Positions are compared per shard as GTID sets, with Vitess's own
// replication package, never as text: as text "0-1-9" sorts after
// "0-1-10". GTID sets need not be ordered at all: two MariaDB positions
// in different domains, two MySQL sets each holding a transaction the
// other lacks, or two flavors, contain neither one the other. So a
// comparison answers Before, Equal, After or Incomparable, and each
// caller decides what Incomparable means for it (usually: do nothing
// that depends on the order).
package position
