package inspect

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// replaySignalMaxLen caps the category's wake-up stream when a replay
// signals it: the publisher's default (PublisherOptions.SignalMaxLen).
const replaySignalMaxLen = 10000

// DLQEntries lists the entries of every dead-letter stream, by stream and
// then oldest first; of those handler moved there when handler is not ""
// (an unknown handler is an error matching ErrUnknownHandler). It finds
// the streams with SCAN (on every primary of a cluster): an operator's
// call.
func (i *Inspector) DLQEntries(ctx context.Context, handler string) ([]DLQEntry, error) {
	if handler != "" {
		if _, err := i.Handler(ctx, handler); err != nil {
			return nil, err
		}
	}
	streams, err := rdb.DLQStreams(ctx, i.c)
	if err != nil {
		return nil, err
	}
	out := []DLQEntry{}
	for _, s := range streams {
		ds, err := i.DLQEntriesOf(ctx, s)
		if err != nil {
			return nil, err
		}
		for _, d := range ds {
			if handler == "" || d.Handler == handler {
				out = append(out, d)
			}
		}
	}
	return out, nil
}

// DLQEntriesOf lists the entries of one dead-letter stream (a partition's
// category:{key}:dlq, as HaltRecord.DLQ names it), oldest first;
// none when it does not exist. It reads that stream alone.
func (i *Inspector) DLQEntriesOf(ctx context.Context, dlq string) ([]DLQEntry, error) {
	es, err := rdb.StreamEntries(ctx, i.c, dlq)
	if err != nil {
		return nil, err
	}
	out := make([]DLQEntry, 0, len(es))
	for _, e := range es {
		out = append(out, dlqEntry(e))
	}
	return out, nil
}

func dlqEntry(e rdb.Entry) DLQEntry {
	f := e.Fields
	d := DLQEntry{DLQ: e.Stream, ID: e.ID, Stream: f[rdb.DLQFieldStream], EntryID: f[rdb.DLQFieldEntryID],
		Handler: f[rdb.DLQFieldHandler], Partition: f[rdb.DLQFieldPartition], Reason: f[rdb.DLQFieldReason],
		Error: f[rdb.DLQFieldError], MessageType: f[rdb.FieldType], MessageID: f[rdb.FieldID], Fields: map[string]string{}}
	if ms, ok := idMillis(e.ID); ok {
		d.MovedAt = time.UnixMilli(ms).UTC()
	}
	for k, v := range f {
		if !strings.HasPrefix(k, rdb.DLQFieldPrefix) {
			d.Fields[k] = v
		}
	}
	return d
}

// dlqEntryAt reads entry id of the dead-letter stream dlq, checking that
// dlq is one (ErrNoDLQ, suggesting the nearest) and holds id
// (ErrNoDLQEntry).
func (i *Inspector) dlqEntryAt(ctx context.Context, dlq, id string) (DLQEntry, error) {
	_, _, ok := rdb.ParseDLQStream(dlq)
	if ok {
		n, err := i.c.Exists(ctx, dlq).Result()
		if err != nil {
			return DLQEntry{}, err
		}
		ok = n == 1
	}
	if !ok {
		all, err := rdb.DLQStreams(ctx, i.c)
		if err != nil {
			return DLQEntry{}, err
		}
		return DLQEntry{}, fmt.Errorf("%w %q%s: a dead-letter stream is category:{key}:dlq; list them with seqbyctl dlq list", ErrNoDLQ, dlq, DidYouMean(dlq, all))
	}
	e, err := rdb.EntryAt(ctx, i.c, dlq, id)
	if err != nil {
		return DLQEntry{}, fmt.Errorf("read %s of %s: %w", id, dlq, err)
	}
	if e.Fields == nil {
		return DLQEntry{}, fmt.Errorf("%s of %s: %w", id, dlq, ErrNoDLQEntry)
	}
	return dlqEntry(e), nil
}

// ReplayDLQ re-publishes the message of entry id of the dead-letter stream
// dlq (category:{key}:dlq) to the end of its partition, category:{key},
// the way the publisher does (the key joins the category's index, the
// entry is appended while it is deleted from the DLQ, a wake-up signal
// follows). The message keeps its fields (type, id, payload,
// published_at, trace context), its message id included; it is appended
// without the publisher's dedup of message ids, so a message published
// with WithMessageID is not dropped as a duplicate of itself. After them
// come the replay_* fields (rdb.ReplayFieldPrefix), which a handler reads
// as runtime.MessageInfo.Replay: the original entry's id and lane, this
// dead-letter entry (dlq, id) and the handler that halted on it.
//
// Every handler of the category gets the message again, not only the one
// that halted on it, and gets it after the entries published since the
// original. The handler that halted never applied the original: it must
// apply the replay even when it deduplicates by a per-key sequence that
// has moved past the original's. The other handlers had the original in
// its place and should treat the replay as a duplicate of it (see
// runtime.ReplayInfo). When the append fails nothing is deleted and the replay
// can be tried again. Replay.Published reports whether the message was
// appended; the append and the delete from the DLQ are one script, so
// replays racing on one entry publish it once, and the others are refused
// with ErrNoDLQEntry. A replay whose reply was lost is sent again, and
// reports the move its first run made (the script keeps the call's op with
// the move for 10 minutes). One that failed otherwise can be run again: it
// refuses if the first one moved the entry. Other refusals: ErrNoDLQ,
// ErrNothingToReplay.
func (i *Inspector) ReplayDLQ(ctx context.Context, dlq, id string) (Replay, error) {
	return i.replay(ctx, dlq, id, false)
}

// CheckReplayDLQ runs ReplayDLQ's checks and reports what it would do,
// changing nothing.
func (i *Inspector) CheckReplayDLQ(ctx context.Context, dlq, id string) (Replay, error) {
	return i.replay(ctx, dlq, id, true)
}

func (i *Inspector) replay(ctx context.Context, dlq, id string, check bool) (Replay, error) {
	d, err := i.dlqEntryAt(ctx, dlq, id)
	if err != nil {
		return Replay{}, fmt.Errorf("replay %s: %w", id, err)
	}
	cat, key, _ := rdb.ParseDLQStream(dlq)
	rep := Replay{Entry: d, Stream: rdb.PartitionStream(cat, key)}
	fields := rdb.MessageFields(d.Fields)
	if len(fields) == 0 {
		return rep, fmt.Errorf("replay %s of %s: %w", id, dlq, ErrNothingToReplay)
	}
	// The replay says what it is (MessageInfo.Replay): a handler that
	// deduplicates by a per-key sequence would otherwise drop it as older
	// than the entries applied after the original.
	fields = append(fields, rdb.Replayed{Of: d.EntryID, Stream: d.Stream, DLQ: dlq, DLQID: id, Handler: d.Handler}.Fields()...)
	if check {
		return rep, nil
	}
	// The append and the delete from the DLQ are one script: the entry
	// moves once, however many replays race. Its op is this call's: when
	// the reply is lost (go-redis does not resend the MULTI/EXEC it goes
	// in on a single Redis), the replay is sent again with it, and the
	// script answers as its first run did if that one moved the entry.
	once := rdb.Once{DLQ: dlq, DLQID: id, DLQOp: rdb.NewOp()}
	err = rdb.Resend(ctx, func() error {
		return rdb.Publish(ctx, i.c, cat, key, rep.Stream, replaySignalMaxLen, fields, once)
	})
	switch {
	case err == nil || errors.Is(err, rdb.ErrUnsignalled):
		// Unsignalled: moved; idle engines find it at their next re-check.
		rep.Published = true
		return rep, nil
	case errors.Is(err, rdb.ErrAppended):
		rep.Published = true
		return rep, fmt.Errorf("replay %s of %s: moved to %s, but %w", id, dlq, rep.Stream, err)
	case errors.Is(err, rdb.ErrDLQEntryMissing):
		return rep, fmt.Errorf("replay %s of %s (replayed or dropped by someone else meanwhile; nothing was appended): %w", id, dlq, ErrNoDLQEntry)
	}
	// The move is one script: if a timeout hid that it ran, the entry is
	// gone from the DLQ and replaying again is refused; else it runs now.
	return rep, fmt.Errorf("replay %s of %s to %s (safe to run again: it refuses if this one moved the entry): %w", id, dlq, rep.Stream, err)
}

// DropDLQ deletes entry id from the dead-letter stream dlq (and the
// stream with its last entry) and returns it. Errors: ErrNoDLQ,
// ErrNoDLQEntry (also when someone else removed it meanwhile; a drop that
// Redis ran twice, its reply lost, reports its own delete).
func (i *Inspector) DropDLQ(ctx context.Context, dlq, id string) (DLQEntry, error) {
	return i.drop(ctx, dlq, id, false)
}

// CheckDropDLQ runs DropDLQ's checks and returns the entry it would
// delete, changing nothing.
func (i *Inspector) CheckDropDLQ(ctx context.Context, dlq, id string) (DLQEntry, error) {
	return i.drop(ctx, dlq, id, true)
}

func (i *Inspector) drop(ctx context.Context, dlq, id string, check bool) (DLQEntry, error) {
	d, err := i.dlqEntryAt(ctx, dlq, id)
	if err != nil || check {
		if err != nil {
			err = fmt.Errorf("drop %s: %w", id, err)
		}
		return d, err
	}
	deleted, err := rdb.DeleteDLQEntry(ctx, i.c, dlq, id)
	if err != nil {
		return d, fmt.Errorf("drop %s of %s: %w", id, dlq, err)
	}
	if !deleted {
		return d, fmt.Errorf("drop %s of %s (removed by someone else meanwhile): %w", id, dlq, ErrNoDLQEntry)
	}
	return d, nil
}
