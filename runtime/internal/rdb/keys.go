package rdb

import "strings"

// DLQSuffix is the dead-letter lane token: category:{key}:dlq. The key
// rules reserve it as a key, so it never collides with a partition or a
// lane.
const DLQSuffix = "dlq"

// Every key one script touches shares one Redis Cluster hash tag (the
// text between the first "{" and the next "}"), so every deployment may be
// a cluster: a partition's keys are tagged with its partition key, a pm's
// with its correlation value, a category's index and signals with the
// category. Keys and categories may therefore not contain braces.

// PartitionStream is the stream of one key of a partitioned category:
// "category:{key}". The tag is the key alone, so the streams of one key in
// every category (a pm's, read together) share a slot.
func PartitionStream(category, key string) string { return category + ":{" + key + "}" }

// BackfillStream is a partition's backfill lane: "category:{key}:suffix".
func BackfillStream(category, key, suffix string) string {
	return SubStream(PartitionStream(category, key), suffix)
}

// SubStream is the key named by suffix next to a partition stream: its
// backfill lane, its dead-letter stream (DLQSuffix), or its bookkeeping.
// It shares the stream's slot.
func SubStream(stream, suffix string) string { return stream + ":" + suffix }

// DLQStream is a partition's dead-letter stream: "category:{key}:dlq".
func DLQStream(category, key string) string {
	return SubStream(PartitionStream(category, key), DLQSuffix)
}

// DLQOpKey holds, for OpTTL after an operator replayed or dropped entry id
// of the dead-letter stream dlq, that call's op and what it appended
// ("<op> <entry id>", "<op> " for a drop): "category:{key}:dlq:__op__:id",
// in the DLQ's slot. A replay or drop Redis ran twice finds the entry gone
// and its own op here, and answers as its first run did
// (dlq_replay.lua, dlq_delete.lua).
func DLQOpKey(dlq, id string) string { return SubStream(dlq, "__op__:"+id) }

// DedupKey remembers, for the publisher's dedup window (PX), that message
// id was appended to category's partition key, with the entry's id:
// "category:{key}:__msgid__:id", in the partition's slot.
func DedupKey(category, key, id string) string {
	return SubStream(PartitionStream(category, key), "__msgid__:"+id)
}

// PlainDedupKey is DedupKey for an unpartitioned category, whose stream
// "category" hashes to the slot of the tag {category}:
// "{category}:__msgid__:id".
func PlainDedupKey(category, id string) string { return "{" + category + "}:__msgid__:" + id }

// IndexKey is the set of a partitioned category's keys, in the category's
// slot: "{category}:__partitions__".
func IndexKey(category string) string { return "{" + category + "}:__partitions__" }

// ReapingKey is the set of a category's keys being reaped, in the
// category's slot: "{category}:__reaping__". The reaper moves a key there
// from the index before it checks the key's lanes, so a key is always in
// one of the two sets while its partition may hold entries; discovery
// reads both (Partitions).
func ReapingKey(category string) string { return "{" + category + "}:__reaping__" }

// MaintenanceLease is the lease of the maintenance leader, the one engine
// instance that reaps every category announced in ReapCategoriesKey:
// "seqby:__maintenance__", its generation in
// "{seqby:__maintenance__}:__gen__" (tagged to share the lease's slot, as
// acquire.lua writes both).
func MaintenanceLease() LeaseRef {
	return LeaseRef{Key: "seqby:__maintenance__", Generation: "{seqby:__maintenance__}:__gen__"}
}

// ReapCategoriesKey is the sorted set of the categories engines want
// reaped, each member an engine's announcement of one (JSON: category,
// ReapAfter in ms, backfill suffix) scored by its last time
// (Redis ms): "{seqby:__maintenance__}:__categories__", in the leader
// lease's slot. See AnnounceReap.
const ReapCategoriesKey = "{seqby:__maintenance__}:__categories__"

// legacyReaperGeneration is the generation counter of the per-category
// reaper lease ("{category}:__reaper__") of releases before the
// maintenance leader. It was written without a TTL; EndLegacyReaper gives
// it one.
func legacyReaperGeneration(category string) string { return "{" + category + "}:__reapergen__" }

// SignalKey is the category's wake-up stream, in the category's slot: the
// publisher appends the key of every partition it writes to, so idle
// consumers block on one stream per category instead of polling
// partitions: "{category}:__signal__".
func SignalKey(category string) string { return "{" + category + "}:__signal__" }

// WakeKey is the hash naming, per group (a handler or a pm) holding a
// lease on the partition of stream, the owner incarnation holding it:
// "category:{key}:__wake__", in the stream's slot. acquire.lua writes a
// group's field with the lease (or "" when it found the partition cold:
// wanted, unowned) once the stream exists, a release by its owner deletes
// it, and the reaper deletes the hash with the partition; a field
// outliving its lease (its owner was killed) is overwritten by the next
// acquire. A publisher reads it after appending and signals those owners
// alone (OwnerSignalKey).
func WakeKey(stream string) string { return SubStream(stream, "__wake__") }

// OwnerSignalKey is the wake-up stream of one engine incarnation:
// "seqby:__wake__:<owner_id>~<incarnation>", fields c (category) and k
// (partition key), capped like SignalKey. A publisher appends there for
// the partitions the incarnation owns (WakeKey), never creating it, so an
// instance wakes only for its own partitions. Its engine creates it at
// Run, renews it with each heartbeat (OwnerSignalTTL) and deletes it when
// Run returns.
func OwnerSignalKey(incarnation string) string { return "seqby:__wake__:" + incarnation }

// FanoutKey marks, while it exists, that an engine runs an unkeyed
// handler on the partitioned category (every instance reads every
// partition): "{category}:__fanout__", set with a TTL by each heartbeat
// of such an engine. While it exists a publisher signals the category's
// stream for every publish, as every instance may take the entry.
func FanoutKey(category string) string { return "{" + category + "}:__fanout__" }

// LeaseKey holds "<owner_id>~<incarnation>:<generation>" while group's
// partition stream is owned: "category:{key}:__lease__:group", in the
// stream's slot.
func LeaseKey(stream, group string) string { return SubStream(stream, "__lease__:"+group) }

// AttemptKey marks, while it holds the owner's token, that the owner of
// the lease at leaseKey is attempting the partition's halted head:
// "<lease key>:__attempt__", in the lease's slot (the lease key's hash
// tag comes first). An operator's resolve of the head refuses while it
// holds the lease's current token (lib/head.lua), so a skip or a DLQ move
// never runs beside a retry of the head. It is set by begin_attempt.lua
// with the lease's TTL, renewed with the lease while the attempt runs,
// and deleted when the attempt's outcome is settled; a crashed owner's
// mark ends with its TTL, and one whose lease is gone no longer refuses.
func AttemptKey(leaseKey string) string { return leaseKey + ":__attempt__" }

// ResolvedKey tells the owner of the lease at leaseKey that an operator
// resolved its halted head (a skip or a DLQ move) and deleted the lease:
// "<lease key>:__resolved__", holding JSON (Resolution: the token the
// lease held, the entry id, the command, the resolve's op and its
// dead-letter entry id), written by resolve_head.lua with a TTL of
// ResolvedTTL, so the halted owner reports the end of its lease as a
// resolution, not as a loss, and a resolve Redis ran twice answers as its
// first run did.
func ResolvedKey(leaseKey string) string { return leaseKey + ":__resolved__" }

// PauseKey is the pause mark of a lease's partition (or pm correlation
// value), in its slot: while it exists an operator has paused the
// partition, and no attempt starts under the lease (every fenced read,
// ack and verification refuses with SEQBY_PAUSED). It holds the pause's
// note (JSON: who, when) and has no TTL: Resume deletes it, and the
// reaper keeps a paused partition.
func PauseKey(leaseKey string) string { return leaseKey + ":__paused__" }

// PausedKey is the set of a handler's pause marks (PauseKey), for
// operators' listings; a member whose mark is gone is stale and is
// removed by the listing.
func PausedKey(group string) string { return "seqby:__paused__:" + group }

// HandlerPauseKey is the pause of a whole handler (every key): while it
// exists, engines start no attempt of the handler from their next
// discovery on. It holds the pause's note (JSON) and has no TTL.
func HandlerPauseKey(group string) string { return "seqby:__pause__:" + group }

// ResumedKey holds, for OpTTL after a resume ended the pause at mark (a
// PauseKey or HandlerPauseKey), the resume's op and the note it ended
// ("<op> <note>", clear_pause.lua), so a resume Redis ran twice answers
// with that pause. It shares the mark's slot: "<mark>:__resumed__" for a
// mark with a hash tag, "{<mark>}:__resumed__" for a handler's
// (seqby:__pause__:handler has none).
func ResumedKey(mark string) string {
	if i := strings.IndexByte(mark, '{'); i >= 0 && strings.IndexByte(mark[i+1:], '}') > 0 {
		return mark + ":__resumed__"
	}
	return "{" + mark + "}:__resumed__"
}

// OwnerKey holds the incarnation of the live engine instance running with
// an OwnerID: "seqby:__owner__:<owner id>", taken at Run with the lease
// TTL and renewed by every heartbeat, so a second live process given the
// same OwnerID is refused at start (ErrOwnerInUse). It is deleted when
// Run returns; a killed instance's key ends with its TTL.
func OwnerKey(ownerID string) string { return "seqby:__owner__:" + ownerID }

// GenerationKey is the last generation of group's partition lease:
// "category:{key}:__gen__:group". A fresh lease takes max(stored + 1, Redis
// time in microseconds), so generations keep increasing even if the key is
// lost.
func GenerationKey(stream, group string) string { return SubStream(stream, "__gen__:"+group) }

// HaltKey holds the halt record (JSON) of group's halted partition
// stream: "category:{key}:__halt__:group", in the stream's slot, so the
// operator's script checks it with the head, the lease and the DLQ.
func HaltKey(stream, group string) string { return SubStream(stream, "__halt__:"+group) }

// MembersKey is the sorted set of live engine instances consuming for
// group, scored by their last heartbeat (Redis time, ms).
func MembersKey(group string) string { return "seqby:__members__:" + group }

// OwnedKey is how many of group's partitions owner held at its last
// heartbeat, expiring with its membership: "seqby:__owned__:group:owner".
// The check for unowned partitions sums them before it looks at any
// partition.
func OwnedKey(group, owner string) string { return "seqby:__owned__:" + group + ":" + owner }

// AdmitAgeKey is the sorted set of the admitted confirmation ages of
// group's engines (package lease): "seqby:__admitage__:group".
func AdmitAgeKey(group string) string { return "seqby:__admitage__:" + group }

// A process manager's keys are per (pm, correlation value), never per
// stream: one lease covers the value's streams in every category the pm
// handles, and the names stay the same when the pm gains or drops a
// category, so two versions of a pm in a rolling deploy still exclude each
// other. Their hash tag is the correlation value, so the lease, counter
// and state of one value share a Redis Cluster slot.

// PMLeaseKey holds "<owner_id>~<incarnation>:<generation>" while a
// sequential pm's correlation value is owned.
func PMLeaseKey(pm, correlation string) string { return "{" + correlation + "}:__pmlease__:" + pm }

// PMGenerationKey is the generation counter of a pm correlation value's
// lease (see GenerationKey), deleted when the value's partitions are
// reaped.
func PMGenerationKey(pm, correlation string) string { return "{" + correlation + "}:__pmgen__:" + pm }

// PMHaltKey holds the halt record (JSON) of pm's halted correlation value:
// "{value}:__pmhalt__:pm".
func PMHaltKey(pm, correlation string) string { return "{" + correlation + "}:__pmhalt__:" + pm }

// StateKey is the hash holding a pm instance's state: fields "version",
// "data" and one AppliedField per stream.
func StateKey(pm, correlation string) string { return "{" + correlation + "}:__pmstate__:" + pm }

// AppliedField is the state hash's field holding the last entry of stream
// that the saved state includes.
func AppliedField(stream string) string { return "applied:" + stream }

// HaltedKey is the set of group's halt record keys (HaltKey, PMHaltKey):
// the index operators list halts from, in its own slot:
// "seqby:__halted__:group".
func HaltedKey(group string) string { return "seqby:__halted__:" + group }

// Field names of a stream entry written by the publisher.
const (
	FieldType        = "type"         // message type wire name (Route.Type)
	FieldID          = "id"           // message id, unique per publish
	FieldPayload     = "payload"      // codec-encoded message
	FieldPublishedAt = "published_at" // RFC 3339 with nanoseconds, UTC
)

// OwnField reports whether name is one of the fields the publisher
// writes itself, or a replay's (ReplayFieldPrefix): fields the engine reads
// as its own, never a trace context's (a trace propagator's field of such
// a name is left out).
func OwnField(name string) bool {
	switch name {
	case FieldType, FieldID, FieldPayload, FieldPublishedAt:
		return true
	}
	return strings.HasPrefix(name, ReplayFieldPrefix)
}

// DefaultBackfillSuffix names a partition's backfill lane unless the
// engine is configured otherwise.
const DefaultBackfillSuffix = "backfill"

// AuditKey is the stream of operator actions (skip, DLQ move, replay,
// drop, pause, resume) that changed something: fields who, when, command,
// handler, partition, stream, entry_id, result, op (the action's nonce,
// AuditOpKey). It is capped at about AuditMaxLen entries (XADD MAXLEN ~),
// so it has a documented end; in its own slot.
const AuditKey = "seqby:__audit__"

// AuditMaxLen is about how many entries AuditKey keeps: the oldest go
// first.
const AuditMaxLen = 10000

// AuditOpKey remembers, for OpTTL, that the operator action op was
// appended to AuditKey, with the entry's id: "{seqby:__audit__}:__op__:op",
// tagged with the audit stream's name so it shares its slot (audit.lua).
func AuditOpKey(op string) string { return "{" + AuditKey + "}:__op__:" + op }
