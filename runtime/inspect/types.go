package inspect

import (
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// HaltRecord describes a halted partition's head, as the engine that
// halted wrote it. The partition stays stuck on that entry until it is
// resolved.
type HaltRecord struct {
	Handler string `json:"handler"`
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
	EntryID     string    `json:"entry_id"`
	MessageType string    `json:"type,omitempty"`
	MessageID   string    `json:"message_id,omitempty"`
	Reason      string    `json:"reason"`
	Error       string    `json:"error,omitempty"`
	Owner       string    `json:"owner"`
	Token       string    `json:"token"` // lease token of the halting owner
	LeaseKey    string    `json:"lease_key"`
	At          time.Time `json:"at"`
}

// The conversion breaks the build if the wire record and this view drift
// apart: they must keep the same fields.
var _ = HaltRecord(rdb.HaltRecord{})

// DLQ is the dead-letter stream the head moves to: the primary stream of
// the head's category and key, plus ":dlq".
func (r HaltRecord) DLQ() string { return rdb.DLQStream(r.Category, r.Key) }

// Entry is a stream entry.
type Entry struct {
	Stream string            // stream holding the entry
	ID     string            // stream entry id
	Fields map[string]string // nil when the entry was deleted while pending
}

// PendingEntry is one entry of a consumer group's pending list.
type PendingEntry struct {
	ID         string        `json:"id"`
	Consumer   string        `json:"consumer"` // the lease token of the owner holding it
	Idle       time.Duration `json:"idle_ns"`
	Deliveries int64         `json:"deliveries"`
}

// LaneInfo is one stream of a partition as the group sees it.
type LaneInfo struct {
	Stream  string         `json:"stream"`
	Exists  bool           `json:"exists"`
	Length  int64          `json:"length"`
	Pending []PendingEntry `json:"pending"` // the group's pending entries, oldest first (at most 100)
}

// Inspection is what an operator looks at before resolving a head.
type Inspection struct {
	Handler   string `json:"handler"`
	Partition string `json:"partition"`
	// Halt is the halt record; nil when the partition is not halted (a
	// keyed handler's partition stream can be inspected anyway).
	Halt     *HaltRecord   `json:"halt"`
	LeaseKey string        `json:"lease_key"`
	Lease    string        `json:"lease"`        // current lease token, "" when free
	LeaseTTL time.Duration `json:"lease_ttl_ns"` // remaining, 0 when free
	Lanes    []LaneInfo    `json:"streams"`
	Head     *Entry        `json:"head"` // the halted head, else the first pending entry; nil when none
	// Stale reports a halt record whose head was no longer pending: the
	// partition had moved past it, so Halt is nil and the record was
	// removed.
	Stale bool `json:"stale,omitempty"`
}

// Resolution reports a resolved head.
type Resolution struct {
	Record     HaltRecord // the halt record that was resolved (and removed)
	DLQ        string     // the dead-letter stream, "" for Skip
	DLQEntryID string     // id of the copy in DLQ
}
