// Package client reads a stream of a vstream-gateway from Go: whole
// transactions, in commit order, each exactly once, across reconnects,
// gateway restarts and reshards.
//
//	c, err := client.Dial(ctx, "https://gateway.example.com", "orders",
//		client.WithSubscriber("billing"),
//		client.WithToken(tokenSource),
//		client.WithCursorStore(client.NewFileStore("/var/lib/billing/cursor")))
//	if err != nil {
//		return err // an *Error: errors.Is(err, client.ErrStreamNotFound), …
//	}
//	defer c.Close()
//	for txn, err := range c.Transactions(ctx) {
//		if err != nil {
//			return err
//		}
//		for _, ev := range txn.Events {
//			switch e := ev.(type) {
//			case *client.Change:
//				apply(e.Table, e.Op, e.Row())
//			case *client.Resync:
//				reset() // a fresh snapshot follows
//			}
//		}
//	}
//
// # Cursors and commits
//
// Every Txn carries the cursor right after it. The client commits a
// transaction when the application asks for the next one (Next, or the
// next round of Transactions), or when it calls Commit (with
// WithManualCommit only then): the cursor is saved in the CursorStore
// and, for a named subscriber, acked to the gateway. A new Client with
// the same store starts right after the last committed transaction; the
// one it was processing when the process died comes again.
//
// Within one Client nothing comes twice: a connection that breaks, a
// gateway that restarts or sheds a slow reader (WebSocket 4008), a token
// that expires, are all resumed from the cursor after the last whole
// transaction received, and the transactions queued for the application
// are kept. Reconnects wait a full-jitter backoff (0.5 s, doubling up to
// 20 s) unless the gateway said to come back at once. There is never more
// than one connection per Client. A WebSocket or SSE client that has no
// cursor yet (none given, none stored) first asks a pull page for one:
// those transports send none before the first transaction or heartbeat,
// and a connection that broke before either could not be resumed
// exactly.
//
// # Transports
//
// WebSocket (the default) reads /ws a transaction per message and acks
// over the connection; SSE reads /sse and Poll long-polls /changes, both
// acking with HTTP POSTs. All three deliver the same transactions. Acks
// are coalesced (the newest wins, at most one per 250 ms), and Close
// posts the last one.
//
// # Errors
//
// What retrying cannot fix ends the client with an *Error (Status, Code,
// Message as the gateway sent them), matched by code with errors.Is:
// ErrStreamNotFound, ErrInvalidCursor, ErrForbidden, ErrUnauthorized
// (after the TokenSource was asked again once), ErrScopeMismatch,
// ErrResumeImpossible, ErrTablesDropped. Dial returns it when the first
// connection is refused; afterwards Next returns it, once every
// transaction received before it was handed over. Network failures, 5xx
// and 429 are retried.
//
// # Resync
//
// A Resync event means the stream could not resume exactly (its shards
// were resharded away with no journal to bridge them, the gateway's store
// lost the subscriber's cursor, the tables moved or were dropped). Unless
// its Reason is tables_dropped, a fresh snapshot follows (Snapshot
// changes, then SnapshotComplete): the application must throw away what
// it derived from earlier events and rebuild from the snapshot. Handle
// the event in the transaction, or register WithOnResync, which Next
// calls before it returns the transaction holding it.
//
// Reshard and Moved events are informational: nothing was lost. Blocked
// says a MoveTables cutover moved some of the stream's tables away.
package client
