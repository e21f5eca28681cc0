package inspect

import (
	"encoding/json"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// HaltRecord describes a halted partition's head, as the engine that
// halted wrote it. The partition stays stuck on that entry until it is
// resolved.
type HaltRecord struct {
	Handler string `json:"handler"` // Registration.Name (a pm's name), its consumer group
	// PM is true for a sequential process manager's correlation value.
	PM bool `json:"pm,omitempty"`
	// Partition names the partition: a keyed handler's partition stream
	// (category:{key}) or a pm's correlation value.
	Partition string `json:"partition"`
	Category  string `json:"category"` // category of the head's stream
	Key       string `json:"key"`      // partition key or correlation value
	// Stream is the lane holding the head; Streams all lanes read under
	// the lease (primary streams first, then backfill lanes).
	Stream      string    `json:"stream"`
	Streams     []string  `json:"streams"`
	EntryID     string    `json:"entry_id"`             // the head's entry id in Stream: what skip and dlq take as -id
	MessageType string    `json:"type,omitempty"`       // the head's message type ("" when its fields are gone)
	MessageID   string    `json:"message_id,omitempty"` // the head's message id
	Reason      string    `json:"reason"`               // why it halted ("handler failed 4 times", "handler failed permanently", ...)
	Error       string    `json:"error,omitempty"`      // the last error's text
	Owner       string    `json:"owner"`                // OwnerID of the instance that halted it
	Token       string    `json:"token"`                // lease token of the halting owner
	LeaseKey    string    `json:"lease_key"`            // the partition's (or pm value's) lease key
	At          time.Time `json:"at"`                   // when it halted
}

// The conversion breaks the build if the wire record and this view drift
// apart: they must keep the same fields.
var _ = HaltRecord(rdb.HaltRecord{})

// DLQ is the dead-letter stream the head moves to: the primary stream of
// the head's category and key, plus ":dlq".
func (r HaltRecord) DLQ() string { return rdb.DLQStream(r.Category, r.Key) }

// Entry is a stream entry.
type Entry struct {
	Stream string            `json:"stream"` // stream holding the entry
	ID     string            `json:"id"`     // stream entry id
	Fields map[string]string `json:"fields"` // nil (JSON null) when the entry was deleted while pending
}

// PendingEntry is one entry of a consumer group's pending list. In JSON,
// Idle is a Go duration string ("idle": "1.5s").
type PendingEntry struct {
	ID       string        `json:"id"`       // stream entry id
	Consumer string        `json:"consumer"` // the lease token of the owner holding it
	Idle     time.Duration `json:"-"`        // time since it was last delivered
	// Deliveries is the group's delivery count of the entry: how many
	// owners read it (the runtime's Options.MaxDeliveries halts past
	// that). A graceful release (a handover, a shutdown) gives the count
	// back for the entries it hands on, so owners that crashed or stalled
	// count and handovers do not: a head retried across handovers can show
	// fewer deliveries than it had attempts.
	Deliveries int64 `json:"deliveries"`
}

// MarshalJSON encodes Idle as a duration string.
func (p PendingEntry) MarshalJSON() ([]byte, error) {
	type plain PendingEntry
	return json.Marshal(struct {
		plain
		Idle string `json:"idle"`
	}{plain(p), durationText(p.Idle)})
}

// durationText is d for JSON: a Go duration string to the millisecond.
func durationText(d time.Duration) string { return d.Round(time.Millisecond).String() }

// LaneInfo is one stream of a partition as the group sees it.
type LaneInfo struct {
	Stream  string         `json:"stream"`  // the stream's name
	Exists  bool           `json:"exists"`  // false when the stream is not in Redis (never written, or reaped)
	Length  int64          `json:"length"`  // entries in the stream (XLEN)
	Pending []PendingEntry `json:"pending"` // the group's pending entries, oldest first (at most 100); never nil
}

// Inspection is what an operator looks at before resolving a head. In
// JSON, LeaseTTL is a Go duration string ("lease_ttl": "850ms").
type Inspection struct {
	Handler string `json:"handler"` // Registration.Name (a pm's name)
	// Partition names the partition as a halt record does: a keyed
	// handler's partition stream, or a pm's correlation value.
	Partition string `json:"partition"`
	// Halt is the halt record; nil when the partition is not halted (a
	// keyed handler's partition stream can be inspected anyway).
	Halt *HaltRecord `json:"halt"`
	// PM reports a sequential process manager's correlation value: its
	// lease (LeaseKey, {value}:__pmlease__:pm) covers the value's streams
	// in every category the pm reads, all listed in Lanes.
	PM       bool          `json:"pm,omitempty"`
	LeaseKey string        `json:"lease_key"` // the key holding the lease (a pm's: its correlation value's)
	Lease    string        `json:"lease"`     // current lease token, "" when free
	LeaseTTL time.Duration `json:"-"`         // remaining, 0 when free
	Lanes    []LaneInfo    `json:"streams"`
	Head     *Entry        `json:"head"` // the halted head, else the first pending entry; nil when none
	// Stale reports a halt record whose head was no longer pending: the
	// partition had moved past it, so Halt is nil and the record was
	// removed (left, by a ReadOnly Inspector).
	Stale bool `json:"stale,omitempty"`
}

// MarshalJSON encodes LeaseTTL as a duration string.
func (in Inspection) MarshalJSON() ([]byte, error) {
	type plain Inspection
	return json.Marshal(struct {
		plain
		LeaseTTL string `json:"lease_ttl"`
	}{plain(in), durationText(in.LeaseTTL)})
}

// Resolution reports a resolved head (or, from CheckSkip and
// CheckMoveToDLQ, one that would be resolved).
type Resolution struct {
	Record     HaltRecord `json:"record"`                 // the halt record that was resolved (and removed)
	DLQ        string     `json:"dlq,omitempty"`          // the dead-letter stream, "" for Skip
	DLQEntryID string     `json:"dlq_entry_id,omitempty"` // id of the copy in DLQ ("" on a check)
}

// HandlerInfo is a handler known to Redis: a registration whose group an
// engine recorded for the categories it reads.
type HandlerInfo struct {
	Name       string   `json:"name"`       // Registration.Name, its consumer group
	Categories []string `json:"categories"` // categories it reads, sorted; never nil
}

// PartitionInfo is one partition of a handler, as Partitions lists it. In
// JSON, Idle is a Go duration string ("idle": "4m2.5s"), or null when
// no entry was ever appended to the partition's streams; HeadAge is
// "head_age", null when nothing waits.
type PartitionInfo struct {
	Category string `json:"category"` // the category of the partition's streams
	// Key is the partition key; "" for an unpartitioned category, whose
	// one stream is listed as a row of its own.
	Key string `json:"key"`
	// Stream is the partition stream (category:{key}), or the
	// unpartitioned category's stream.
	Stream string `json:"stream"`
	// Owner and Generation are the lease holder's, from its token
	// "<owner_id>~<incarnation>:<generation>" (Owner is the owner id, without
	// the incarnation); "" and 0 when the lease is free. For a pm the lease
	// is the correlation value's (a key of its categories).
	Owner      string `json:"owner"`
	Generation int64  `json:"generation"`
	// Pending counts entries delivered to the handler's group and not
	// acked; Lag entries not delivered to it yet (the whole stream
	// while the group does not exist on it). Both add up the partition
	// stream and its backfill lane (suffix "backfill", or the
	// Inspector's WithBackfillSuffix).
	Pending int64 `json:"pending"`
	Lag     int64 `json:"lag"`
	// Halted reports that a halt record exists for the partition (for a
	// pm: for its correlation value); inspect it for the head.
	Halted bool `json:"halted"`
	// Paused reports that an operator paused the partition, or the whole
	// handler (Pause, PauseHandler): nothing of it starts until resumed.
	Paused bool `json:"paused"`
	// Idle is the time since the newest entry was appended to the
	// partition (from its entry id, on Redis's clock; trimmed entries
	// count); -1 when none ever was.
	Idle time.Duration `json:"-"`
	// HeadAge is how long the partition's head has waited: the age of
	// its oldest entry the handler has not acked (from its entry id, on
	// Redis's clock; the older of the stream's and the backfill lane's
	// heads); -1 when nothing waits.
	HeadAge time.Duration `json:"-"`
}

// MarshalJSON encodes Idle and HeadAge as duration strings ("idle",
// "head_age"), or null when unknown.
func (p PartitionInfo) MarshalJSON() ([]byte, error) {
	type plain PartitionInfo
	text := func(d time.Duration) *string {
		if d < 0 {
			return nil
		}
		s := durationText(d)
		return &s
	}
	return json.Marshal(struct {
		plain
		Idle    *string `json:"idle"`
		HeadAge *string `json:"head_age"`
	}{plain(p), text(p.Idle), text(p.HeadAge)})
}

// DLQEntry is an entry of a dead-letter stream (category:{key}:dlq): a
// copy of a halted head an operator moved there, with the dlq_* fields
// MoveToDLQ added.
type DLQEntry struct {
	DLQ     string    `json:"dlq"`      // the dead-letter stream
	ID      string    `json:"id"`       // the entry's id in it
	MovedAt time.Time `json:"moved_at"` // from ID: when it was moved
	// From the dlq_* fields: where the head was and why it halted.
	Stream    string `json:"stream"`    // dlq_stream: the lane holding the head
	EntryID   string `json:"entry_id"`  // dlq_entry_id: its id there
	Handler   string `json:"handler"`   // dlq_handler
	Partition string `json:"partition"` // dlq_partition: as HaltRecord.Partition
	Reason    string `json:"reason"`    // dlq_reason: the halt's reason
	Error     string `json:"error"`     // dlq_error: the halt's last error
	// From the message's fields.
	MessageType string `json:"type"`       // the message's type field
	MessageID   string `json:"message_id"` // the message's id field
	// Fields are the message's own fields (type, id, payload,
	// published_at, a trace context): what a replay publishes, before
	// the replay_* fields it adds. A head that was itself a replay also
	// has its replay_* fields here; a replay of this entry replaces
	// them. Empty when the head had been deleted from its stream before
	// it was moved.
	Fields map[string]string `json:"fields"`
}

// Replay reports a DLQ entry re-published to its partition (or, from
// CheckReplayDLQ, one that would be).
type Replay struct {
	Entry DLQEntry `json:"entry"` // the dead-letter entry replayed
	// Stream is the partition stream the message was appended to, at its
	// end: category:{key} of the DLQ category:{key}:dlq.
	Stream string `json:"stream"`
	// Published reports that the message was appended (even when the
	// error says something went wrong afterwards).
	Published bool `json:"published"`
}

// AuditEntry is an operator action recorded in the audit stream
// (seqby:__audit__). Who, Command and Result are free text.
type AuditEntry struct {
	ID        string    `json:"id"`        // its id in the audit stream ("" until recorded)
	Who       string    `json:"who"`       // the operator, as given ("alice@host")
	When      time.Time `json:"when"`      // RFC 3339 in the stream
	Command   string    `json:"command"`   // the seqbyctl command ("skip", "dlq replay", ...)
	Handler   string    `json:"handler"`   // the handler it was for ("" when none)
	Partition string    `json:"partition"` // the partition, as HaltRecord.Partition
	Stream    string    `json:"stream"`    // the stream the entry was on
	EntryID   string    `json:"entry_id"`  // the entry acted on
	Result    string    `json:"result"`    // what was done
	// Op names the action: Audit appends one entry per Op (a resent
	// append is recorded once). Audit sets a random one when it is "";
	// entries older than the field have none.
	Op string `json:"op,omitempty"`
}
