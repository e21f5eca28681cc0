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
// stream, once empty), reporting whether the entry was there.
func DeleteDLQEntry(ctx context.Context, c redis.UniversalClient, dlq, id string) (bool, error) {
	n, err := scriptDLQDelete.Run(ctx, c, []string{dlq}, id).Int64()
	if err != nil {
		return false, fmt.Errorf("delete %s from %s: %w", id, dlq, err)
	}
	return n == 1, nil
}

// MessageFields returns the fields of a dead-letter entry that belong to
// the message (its publisher's fields and a trace context), as name/value
// pairs in a stable order for Publish: everything but the dlq_* fields.
// A head that was deleted from its stream before it was moved left only
// dlq_* fields: the result is then empty.
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
