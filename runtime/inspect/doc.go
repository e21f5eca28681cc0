// Package inspect is seqby's operator surface: list the handlers known to
// Redis and their partitions (owner, generation, pending, lag, halted,
// idle), list the halted partitions of a handler, inspect a partition (its
// halt record, lease, streams and pending entries, and the head's fields),
// resolve a halted head by skipping it or moving it to the partition's
// dead-letter stream (moving past a poison message is an operator's
// explicit action, never something the consumer does by itself: a keyed
// partition stays halted on it, in order, until someone decides), list,
// replay and drop dead-letter entries, keep an audit trail of the actions
// that changed something, and read a process manager's stored state
// (PMState, or typed with PMStateOf).
//
// An Inspector needs only a Redis client, not an engine: cmd/seqbyctl is
// its command line, and a service can embed it in an admin page, where it
// can also read a pm's state into the pm's own type:
//
//	st, meta, err := inspect.PMStateOf[billing.FlowState](ctx, in, "example.com/shop/billing.Flow", "o-1")
//	fmt.Println(st.Paid, meta.Version)
//
//	in := inspect.New(client)
//	halts, err := in.Halts(ctx, "example.com/shop/billing.Billing")
//	for _, h := range halts {
//		res, err := in.MoveToDLQ(ctx, h.Handler, h.Partition, h.EntryID)
//		...
//	}
//
// A partition is named by its halt record's field (a keyed handler's
// partition stream, or a pm's correlation value) or by the stream holding
// its head. CheckPartition and Handler turn a typo into an error that
// suggests the nearest name (ErrNoPartition, ErrUnknownHandler).
//
// Every action that changes something has a Check variant (CheckSkip,
// CheckMoveToDLQ, CheckReplayDLQ, CheckDropDLQ) that runs its checks and
// reports what it would do, changing nothing. The actions do not write
// the audit stream themselves: call Audit after one succeeds, as
// seqbyctl does, with who did it.
package inspect
