// Package inspect is seqby's operator surface: list the halted partitions
// of a handler, inspect a partition (its halt record, lease, streams and
// pending entries, and the head's fields), and resolve a halted head by
// skipping it or moving it to the partition's dead-letter stream
// (ADR-0028 decision 6: moving past a poison message is an explicit
// action, never something the consumer does by itself).
//
// An Inspector needs only a Redis client, not an engine: cmd/seqbyctl is
// its command line, and a service can embed it in an admin page.
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
// its head.
package inspect
