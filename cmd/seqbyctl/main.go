// Command seqbyctl is the operator tool for seqby: it shows handlers'
// partitions, resolves halted partitions, handles dead-letter entries, and
// pauses and resumes keys.
//
// A partition of a keyed handler (or a sequential process manager's
// correlation value) halts on a message it cannot process: the message
// stays pending as the partition's head and nothing later for that key is
// applied, until an operator inspects the head and skips it or moves it to
// the dead-letter stream. The engine records every halt in Redis (a record
// per partition, indexed in seqby:__marks__:<handler>), so seqbyctl sees
// the halts of every engine process.
//
// Usage:
//
//	seqbyctl COMMAND [flags]
//
// Flags go before or after the command words, in any order: "seqbyctl
// -json halted" and "seqbyctl halted -json" are the same.
//
//	seqbyctl halted [-handler NAME]
//	    List halted partitions (all handlers without -handler): handler,
//	    partition, the stream holding the head, its entry id, type, reason,
//	    the halting owner's lease token, when, and the error. Only records
//	    whose head is still pending are listed; stale ones are removed.
//	    Exits 1 when it lists at least one halt, 0 when there is none, so
//	    "seqbyctl -q halted" is a check.
//
//	seqbyctl partitions -handler NAME [-backfill SUFFIX]
//	    One row per partition of every category the handler reads (an
//	    unpartitioned category's stream is one row, key "-"): key, stream,
//	    owner and generation (from the lease token
//	    "<owner_id>~<incarnation>:<generation>"; "-" when the lease is
//	    free; a pm's lease is its correlation value's), pending (entries
//	    delivered to the handler and not acked), lag (entries not delivered to it yet; a stream its group has not
//	    read yet counts whole), halted (a halt record exists), paused (an
//	    operator paused it or the whole handler) and idle (time
//	    since the newest entry was appended, from its entry id, on Redis's
//	    clock; "-" when none ever was). Pending and lag add up the partition
//	    stream and its backfill lane (-backfill: the engines'
//	    Options.BackfillSuffix, "backfill" by default).
//
//	seqbyctl inspect -handler NAME -stream STREAM [-category CATEGORY] [-backfill SUFFIX]
//	    Show the partition's halt record, its lease (token and remaining
//	    TTL), each of its streams with length and the group's pending
//	    entries (consumer, idle time, deliveries), and the head entry with
//	    all its fields. For a sequential pm's partition stream, halted or
//	    not, the lease is the pm's on the correlation value
//	    ({value}:__pmlease__:NAME) and the streams are the value's in every
//	    category the pm reads. (Redis does not record a handler's kind:
//	    inspect tells a pm's value by the pm's lease, generation counter or
//	    state; a partition no owner ever leased reads as a keyed one.)
//
//	seqbyctl state -handler NAME -value VALUE
//	    Show the state the process manager NAME stored for the
//	    correlation value VALUE (o-1, the key of its partition streams
//	    order:{o-1}): the hash holding it ({VALUE}:__pmstate__:NAME), its
//	    version (the number of saves), for a sequential pm the last entry
//	    of each stream the state includes, and the state as indented JSON
//	    (the engine stores a pm's state as JSON whatever its messages'
//	    codec). seqbyctl cannot know the pm's Go type; a Go program reads
//	    the state into it with inspect.PMStateOf. It reads the engines'
//	    default state store, Redis, not one set in Options.StateStore.
//
//	seqbyctl skip -handler NAME -stream STREAM [-category CATEGORY] -id ID [-dry-run] [-as WHO]
//	    Acknowledge the head ID without applying it.
//
//	seqbyctl dlq [move] -handler NAME -stream STREAM [-category CATEGORY] -id ID [-dry-run] [-as WHO]
//	    Copy the head ID to the partition's dead-letter stream
//	    (category:{key}:dlq, fields of the entry plus dlq_stream,
//	    dlq_entry_id, dlq_handler, dlq_partition, dlq_reason, dlq_error),
//	    then acknowledge it. "dlq" and "dlq move" are the same command.
//
//	seqbyctl dlq list [-handler NAME]
//	    List the entries of every dead-letter stream (of those NAME moved
//	    there, with -handler): the DLQ and the entry's id in it, when it
//	    was moved (from that id), and from its dlq_* fields the handler,
//	    partition, stream and entry id the head had, its reason and error,
//	    with the message's type (and, with -json, its message id and all
//	    its own fields).
//
//	seqbyctl dlq replay -stream DLQSTREAM -id ID [-dry-run] [-as WHO]
//	    Re-publish the message of entry ID of DLQSTREAM (category:{key}:dlq)
//	    to the end of its partition, category:{key}, as a replay (see
//	    below), then delete the entry from the DLQ (and the DLQ with its
//	    last entry).
//
//	seqbyctl dlq drop -stream DLQSTREAM -id ID [-dry-run] [-as WHO]
//	    Delete entry ID from DLQSTREAM (and the DLQ with its last entry).
//
//	seqbyctl pause -handler NAME (-stream STREAM [-category CATEGORY] | -all) [-verify-bound D] [-dry-run] [-as WHO]
//	    Pause the partition STREAM of NAME (a bare key names the
//	    partition when NAME reads one category, or is a sequential pm):
//	    the event in flight, if any,
//	    finishes, and no later event of the key starts on any engine until
//	    resume. The partition stays owned and costs nothing while paused;
//	    the pause (a mark in the partition's slot,
//	    category:{key}:__lease__:NAME:__meta__) outlives handovers,
//	    restarts and the reaper. The command returns once no attempt can
//	    start. With -all, every partition of NAME (seqby:__control__:NAME),
//	    from the engines' next discovery cycle on (within two cycles on
//	    an engine that cannot read it). A pause in force is left as it is.
//
//	seqbyctl resume -handler NAME (-stream STREAM [-category CATEGORY] | -all) [-dry-run] [-as WHO]
//	    End the pause and wake the partition's owner, which goes on with
//	    the next event within one wake-up (-all: the handler's pause; its
//	    engines go on from their next discovery cycle; pauses of single
//	    partitions stay). Exits 1 when it was not paused.
//
//	seqbyctl paused [-handler NAME]
//	    List the pauses (of every handler without -handler): handler,
//	    partition ("*" for the whole handler), who paused it, since when,
//	    and the key holding the pause. Exits 1 when it lists one, as halted
//	    does.
//
//	seqbyctl serve [-addr HOST:PORT] [-write] [-verify-bound D] [-backfill SUFFIX]
//	    Serve the operator console (package runtime/inspect/console), a
//	    web page of handlers, partitions, halts, dead letters, pauses and
//	    the audit log, on -addr (127.0.0.1:8080 by default) until SIGINT or
//	    SIGTERM. Read-only unless -write, which needs the token of write
//	    access in $SEQBY_CONSOLE_TOKEN: the browser then asks for a user
//	    name (recorded as console:NAME) and the token as password before an
//	    action, and every action is previewed with its dry run first.
//
//	seqbyctl audit [-n N]
//	    The newest N (default 20) entries of the audit stream, newest
//	    first: id, when, who, command, handler, partition, stream, entry id
//	    and result.
//
//	seqbyctl help [COMMAND]
//	    The command list, or a command's help (all of dlq's for "help
//	    dlq"), on stdout. -h or -help anywhere on a line does the same for
//	    its command.
//
// Global flags, accepted by every command:
//
//	-redis URL   Redis URL (default $REDIS_URL)
//	-timeout D   bound of the whole command (default 10s)
//	-json        print JSON (see below)
//	-q           print nothing on stdout; errors still go to stderr
//	-version     print "seqbyctl <version>" (the release in the source,
//	             seqby.Version, followed by "(module <version>)" when the
//	             build recorded another module version, such as a
//	             pseudo-version) and exit 0
//	-h, -help    print help and exit 0
//
// NAME is the handler's registration name (its consumer group; for a pm,
// the pm's name). A NAME no engine registered with this Redis (through
// the groups registry {category}:__groups__, or a halt record) is an
// error, exit 1, that suggests the nearest known name and lists them:
//
//	seqbyctl halted: unknown handler "ordres" (did you mean "orders"?); known handlers: orders, payments
//
// STREAM names the partition: a partition stream (order:{client-1}: the
// braces are part of the name), or, while it is halted, a pm's
// correlation value (o-1) or any stream of it (payment:{o-1}). With
// -category CATEGORY, STREAM may be the bare key: "-category order
// -stream client-1" is "-stream order:{client-1}" (a STREAM of another
// category is a usage error). A STREAM that names no partition of NAME
// (not in the index of a category NAME reads, no halt record) is an
// error, exit 1, that suggests the nearest partition stream (for a bare
// key, its stream, and -category). DLQSTREAM
// must be an existing dead-letter stream; otherwise the error suggests
// the nearest one.
//
// skip and dlq move are compare-and-skip: one Redis script checks that
// the partition is still halted with the same record, that no other owner
// is retrying the head, and that ID is still the first pending entry of
// the group on the head's stream; otherwise nothing changes and seqbyctl
// says why (exit 1). Then it acknowledges the entry, removes the halt
// record and deletes the partition's lease: the halted owner's next
// renewal fails, it abandons the partition, and the next owner (any
// engine, within one discovery cycle) claims it at a new generation and
// continues with the entry after the head, in order. Inspect first and
// pass the head's id, so you never skip another message than the one you
// looked at.
//
// dlq replay appends the message's fields (type, id, payload,
// published_at, a trace context; not the dlq_* ones) the way the
// publisher does: the key joins the category's index, the entry is
// appended, and a wake-up signal follows, so engines pick it up (a
// reaped partition is recreated). It keeps the message id but skips the
// publisher's dedup of message ids, so a message published with
// WithMessageID is not dropped as a duplicate of itself. The message then
// runs after everything published to the key before, for every handler
// of the category, not only the one that halted (at-least-once, once
// more). The append and the delete from the DLQ are one script, so a
// replay runs at most once: two replays of one entry at once publish it
// once (the other is refused), and a replay that failed or timed out can
// be run again (it refuses if the first one moved the entry).
//
// A replay says what it is: after the message's fields come replay_of
// and replay_stream (the original entry and its lane), replay_dlq and
// replay_dlq_id (the dead-letter entry) and replay_handler (the handler
// that halted on it), which handlers read as runtime.MessageInfo.Replay.
// A handler that skips an entry whose per-key sequence it has already
// passed (the usual guard against an entry re-run after a crash) would
// drop the replay, which comes after the key's later entries with its old
// sequence. The rule: the handler that halted on it (Replay.Handler) never
// applied it, so it applies the replay out of sequence, once (by
// Replay.DLQEntryID), without moving its sequence back; every other
// handler had the original in its place and treats the replay as a
// duplicate of it. A handler that deduplicates by message id alone gets
// both right: the replay keeps the original's message id. The demo's
// journal (examples/orders/billing) does it.
//
// -dry-run, on skip, dlq move, dlq replay, dlq drop, pause and resume, runs every check
// the command would run (for skip and dlq move the same checks, in one
// script) and prints what would be done; it changes nothing of the
// partitions and dead-letter streams, writes no audit entry, and exits 0
// when the command would succeed, 1 when it would be refused. (Like
// halted, it may remove a halt-index member whose halt record is gone:
// bookkeeping only.)
//
// Audit: after skip, dlq move, dlq replay, dlq drop, pause or resume
// changed something,
// seqbyctl appends an entry to the stream seqby:__audit__ with the fields
// who (-as, default "$USER@hostname"), when (RFC 3339, UTC), command,
// handler, partition, stream and entry_id (the stream and entry acted on:
// the head for skip and dlq move, the DLQ entry for replay and drop) and
// result (what was done). The stream is capped at about 10,000 entries
// (XADD MAXLEN ~): the oldest go first. Refusals and dry runs are not
// recorded. If the action succeeded but the audit write failed, seqbyctl
// prints the action and the error and exits 1.
//
// JSON (-json): every command prints JSON on stdout, with snake_case
// field names; a list prints [] when empty, never null. halted prints the
// halt records; partitions a list with category, key, stream, owner,
// generation, pending, lag, halted, paused and idle; paused a list of
// handler, partition ("" for a whole handler), mark, by and at; inspect an object whose
// durations (lease_ttl, and idle of each pending entry) are Go duration
// strings such as "1.5s" (they were nanosecond numbers, lease_ttl_ns and
// idle_ns, before); dlq list a list of dlq, id, moved_at, stream,
// entry_id, handler, partition, reason, error, type, message_id and
// fields; audit a list of audit entries (id, who, when, command, handler,
// partition, stream, entry_id, result); skip, dlq move, dlq replay, dlq
// drop, pause and resume print their audit entry (pause of something
// paused already prints the pause in force) with "dry_run" (id "" on a dry run).
// A partition's idle is a duration string, or null when no entry was
// ever appended. Times are RFC 3339.
//
// Caveats: delivery stays at-least-once. A skipped head may have run (and
// failed) any number of times, with whatever side effects its handler made
// before failing; the skip does not undo them. A moved head is a copy in
// the DLQ until it is replayed or dropped. Halts of unkeyed handlers
// (no order, the consumer moves on) are not recorded. halted without
// -handler, dlq list, and the handler check of every command find their
// keys with SCAN (on every primary of a cluster); partitions reads the
// categories' indexes whole: operator commands, off the consumers' path.
//
// -redis defaults to $REDIS_URL (redis://[user:password@]host:port[/db],
// or rediss://... for TLS). When the URL names a node of a Redis Cluster,
// seqbyctl works on the whole cluster. Run it as a user with the seqbyctl
// ACL rules of docs/operating.md.
//
// When Redis cannot be reached, seqbyctl prints one line on stderr, its
// own error, and exits 1: the Redis client library's own log lines (its
// connection pool's dial failures) are silenced.
//
// Exit status: 0 on success (halted, paused: none listed), 1 when an operation is
// refused or fails, including Redis errors and unknown handlers,
// partitions and dead-letter entries (halted: halts listed), 2 on a usage
// error (unknown command or flag, a missing flag, a stray argument, no
// Redis URL).
package main

import "os"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
