// Command seqbyctl is the operator tool for seqby's halted partitions.
//
// A partition of a keyed handler (or a sequential process manager's
// correlation value) halts on a message it cannot process: the message
// stays pending as the partition's head and nothing later for that key is
// applied, until an operator inspects the head and skips it or moves it to
// the dead-letter stream. The engine records every halt in Redis (a record
// per partition, indexed in seqby:__halted__:<handler>), so seqbyctl sees
// the halts of every engine process.
//
// Usage:
//
//	seqbyctl [-redis URL] [-timeout D] [-json] COMMAND [flags]
//
//	seqbyctl halted [-handler NAME]
//	    List halted partitions (all handlers without -handler): handler,
//	    partition, the stream holding the head, its entry id, type, reason,
//	    the halting owner's lease token, when, and the error. Only records
//	    whose head is still pending are listed; stale ones are removed.
//
//	seqbyctl inspect -handler NAME -stream STREAM
//	    Show the partition's halt record, its lease (token and remaining
//	    TTL), each of its streams with length and the group's pending
//	    entries (consumer, idle time, deliveries), and the head entry with
//	    all its fields.
//
//	seqbyctl skip -handler NAME -stream STREAM -id ID
//	    Acknowledge the head ID without applying it.
//
//	seqbyctl dlq -handler NAME -stream STREAM -id ID
//	    Copy the head ID to the partition's dead-letter stream
//	    (category:{key}:dlq, fields of the entry plus dlq_stream,
//	    dlq_entry_id, dlq_handler, dlq_partition, dlq_reason, dlq_error),
//	    then acknowledge it.
//
// NAME is the handler's registration name (its consumer group; for a pm,
// the pm's name). STREAM names the partition: a keyed handler's partition
// stream (order:{client-1}: the braces are part of the name), a pm's
// correlation value (o-1), or the stream holding the head as halted lists
// it (payment:{o-1}).
//
// skip and dlq are compare-and-skip: one Redis script checks that the
// partition is still halted with the same record, that no other owner is
// retrying the head, and that ID is still the first pending entry of the
// group on the head's stream; otherwise nothing changes and seqbyctl says
// why (exit 1). Then it acknowledges the entry, removes the halt record
// and deletes the partition's lease: the halted owner's next renewal
// fails, it abandons the partition, and the next owner (any engine, within
// one discovery cycle) claims it at a new generation and continues with
// the entry after the head, in order. Inspect first and pass the head's
// id, so you never skip another message than the one you looked at.
//
// Caveats: delivery stays at-least-once. A skipped head may have run (and
// failed) any number of times, with whatever side effects its handler made
// before failing; the skip does not undo them. A moved head is a copy in
// the DLQ: nothing replays it; to apply it later, publish it again (it
// then runs after everything published before). Halts of unkeyed handlers
// (no order, the consumer moves on) are not recorded.
//
// -redis defaults to $REDIS_URL (redis://[user:password@]host:port[/db],
// or rediss://... for TLS). When the URL names a node of a Redis Cluster,
// seqbyctl works on the whole cluster. Run it as a user with the seqbyctl
// ACL rules of the README.
//
// Exit status: 0 on success, 1 when an operation is refused or fails
// (including Redis errors), 2 on a usage error.
package main

import "os"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
