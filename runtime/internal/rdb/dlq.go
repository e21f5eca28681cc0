package rdb

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The fields ResolveHead's callers append to a dead-letter copy, after the
// head's own fields. Every name starts with DLQFieldPrefix, which the
// publisher never writes, so a replay can tell them from the message's.
const (
	DLQFieldPrefix    = "dlq_"
	DLQFieldStream    = "dlq_stream"    // the lane the head was on
	DLQFieldEntryID   = "dlq_entry_id"  // its entry id there
	DLQFieldHandler   = "dlq_handler"   // the halted handler
	DLQFieldPartition = "dlq_partition" // its partition (stream or pm value)
	DLQFieldReason    = "dlq_reason"    // the halt reason
	DLQFieldError     = "dlq_error"     // the handler's last error
)

// The fields a replay (an operator's dlq replay) adds to the message it
// appends back to the partition, after the message's own fields, saying
// what the entry originally was. Every name starts with
// ReplayFieldPrefix, which the publisher never writes (OwnField), so a
// trace context cannot fake them, and a replayed entry that halts and is
// dead-lettered again is replayed with fresh ones (MessageFields leaves the
// old ones out). The message keeps its own fields, its message id (FieldID)
// included.
const (
	ReplayFieldPrefix  = "replay_"
	ReplayFieldOf      = "replay_of"      // the original entry's id (the DLQ entry's dlq_entry_id)
	ReplayFieldStream  = "replay_stream"  // the lane the original was on (dlq_stream)
	ReplayFieldDLQ     = "replay_dlq"     // the dead-letter stream it was replayed from
	ReplayFieldDLQID   = "replay_dlq_id"  // the dead-letter entry's id there
	ReplayFieldHandler = "replay_handler" // the handler that halted on the original (dlq_handler)
)

var scriptDLQDelete = script("dlq_delete")

// StreamEntries returns every entry of stream, oldest first, reading it
// in pages so a long stream does not come back in one reply.
func StreamEntries(ctx context.Context, c redis.UniversalClient, stream string) ([]Entry, error) {
	var out []Entry
	start := "-"
	for {
		msgs, err := c.XRangeN(ctx, stream, start, "+", 1000).Result()
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", stream, err)
		}
		out = append(out, entries(stream, msgs)...)
		if len(msgs) < 1000 {
			return out, nil
		}
		start = "(" + msgs[len(msgs)-1].ID
	}
}

// DeleteDLQEntry deletes entry id from the dead-letter stream dlq (and the
// stream, once empty), reporting whether the entry was there. A delete
// whose reply was lost and that Redis ran again reports the entry it
// deleted (dlq_delete.lua keeps the call's op at DLQOpKey).
func DeleteDLQEntry(ctx context.Context, c redis.UniversalClient, dlq, id string) (bool, error) {
	// One op per call, made here so that every resend carries it.
	n, err := scriptDLQDelete.Run(ctx, c, []string{dlq, DLQOpKey(dlq, id)}, id, NewOp(), OpTTL.Milliseconds()).Int64()
	if err != nil {
		return false, fmt.Errorf("delete %s from %s: %w", id, dlq, err)
	}
	return n == 1, nil
}

// MessageFields returns the fields of a dead-letter entry that belong to
// the message (its publisher's fields and a trace context), as name/value
// pairs in a stable order for Publish: everything but the dlq_* fields
// and the replay_* ones of an earlier replay. A head that was deleted from
// its stream before it was moved left only dlq_* fields: the result is
// then empty.
func MessageFields(fields map[string]string) []any {
	var out []any
	// The publisher's own fields first, in the order it writes them.
	for _, k := range []string{FieldType, FieldID, FieldPayload, FieldPublishedAt} {
		if v, ok := fields[k]; ok {
			out = append(out, k, v)
		}
	}
	var rest []string
	for k := range fields {
		if !OwnField(k) && !strings.HasPrefix(k, DLQFieldPrefix) {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	for _, k := range rest {
		out = append(out, k, fields[k])
	}
	return out
}

// Replayed is what a replayed entry originally was: the replay_* fields.
type Replayed struct {
	Of, Stream string // the original entry's id and the lane it was on
	DLQ, DLQID string // the dead-letter entry it was replayed from
	Handler    string // the handler that halted on the original
}

// Fields are r as the replay_* field/value pairs a replay appends after
// the message's fields.
func (r Replayed) Fields() []any {
	return []any{ReplayFieldOf, r.Of, ReplayFieldStream, r.Stream, ReplayFieldDLQ, r.DLQ,
		ReplayFieldDLQID, r.DLQID, ReplayFieldHandler, r.Handler}
}

// ParseReplayed reads the replay_* fields of a stream entry; ok is false
// when the entry is no replay (it has no replay_dlq_id).
func ParseReplayed(fields map[string]string) (r Replayed, ok bool) {
	if fields[ReplayFieldDLQID] == "" {
		return Replayed{}, false
	}
	return Replayed{Of: fields[ReplayFieldOf], Stream: fields[ReplayFieldStream], DLQ: fields[ReplayFieldDLQ],
		DLQID: fields[ReplayFieldDLQID], Handler: fields[ReplayFieldHandler]}, true
}
