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
// "seqby:__maintenance__", its generation in the control hash
// "{seqby:__maintenance__}:__meta__" (tagged to share the lease's slot, as
// acquire.lua writes both).
func MaintenanceLease() LeaseRef {
	return LeaseRef{Key: "seqby:__maintenance__", Meta: MetaKey("seqby:__maintenance__"), Legacy: legacyMaintenanceGeneration}
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

// MetaKey is the control hash of the lease at leaseKey: everything kept
// per (partition, handler) beside the lease, in the lease's slot, one
// field each (the Meta* constants). For a keyed handler it is
// "<lease key>:__meta__"; for a sequential pm's lease it is the pm
// value's state hash (StateKey), so a pm has its lease and one hash; for
// a lease without a hash tag (the maintenance leader's) it is
// "{<lease key>}:__meta__". Redis 7.0 has no expiry per hash field: a
// field that must end by itself either carries its expiry (Redis ms,
// checked against TIME by the scripts that read it) or is valid only
// while the lease holds the token it names.
func MetaKey(leaseKey string) string {
	if rest, ok := strings.CutPrefix(leaseKey, "{"); ok {
		if value, pm, ok := strings.Cut(rest, "}:__pmlease__:"); ok {
			return StateKey(pm, value)
		}
	}
	if i := strings.IndexByte(leaseKey, '{'); i >= 0 && strings.IndexByte(leaseKey[i+1:], '}') > 0 {
		return leaseKey + ":__meta__"
	}
	return "{" + leaseKey + "}:__meta__"
}

// The fields of a control hash (MetaKey; a handler's ControlKey has
// the last two).
const (
	// MetaGen is the lease's last generation: a fresh lease takes
	// max(stored + 1, Redis time in µs) (acquire.lua), so a missing field
	// is safe.
	MetaGen = "gen"
	// MetaHalt is the halt record (JSON) of the halted partition or pm
	// value (RecordHalt).
	MetaHalt = "halt"
	// MetaAttempt is "<token> <expiry>" while the lease's owner attempts
	// the halted head (begin_attempt.lua): an operator's resolve refuses
	// while it names the token the lease holds now and its expiry (Redis
	// ms) has not passed (lib/head.lua), so a skip or a DLQ move never
	// runs beside a retry of the head. The owner renews it with the lease
	// (renew_many.lua) and deletes it once the attempt's outcome is
	// settled; one it failed to delete, or left by a crashed owner,
	// refuses nothing after a lease TTL.
	MetaAttempt = "attempt"
	// MetaResolved tells the halted owner that an operator resolved its
	// head (a skip or a DLQ move) and deleted the lease: JSON
	// (Resolution, with its expiry, ResolvedTTL after the resolve, in
	// Redis ms), written by resolve_head.lua, so a resolve Redis ran twice
	// answers as its first run did.
	MetaResolved = "resolved"
	// MetaPaused is the pause note (JSON: who, when) while an operator
	// pauses the partition (or the handler): no attempt starts under the
	// lease (every fenced read, ack and verification refuses with
	// SEQBY_PAUSED). It has no expiry: Resume deletes it, and the reaper
	// keeps a paused partition.
	MetaPaused = "paused"
	// MetaResumed is "<expiry ms> <op> <note>" after a resume ended the
	// pause (clear_pause.lua), for OpTTL, so a resume Redis ran twice
	// answers with that pause.
	MetaResumed = "resumed"
)

// MarksKey is the set of a handler's control hashes (MetaKey) holding a
// halt record or a pause note, for operators' listings:
// "seqby:__marks__:group". A writer adds the hash before and after it
// writes the field; a member whose hash holds neither is stale and is
// removed by the listing.
func MarksKey(group string) string { return "seqby:__marks__:" + group }

// ControlKey is the control hash of a whole handler:
// "seqby:__control__:group", no expiry. While its MetaPaused field
// exists, engines start no attempt of the handler (any key) from their
// next discovery on; MetaResumed as in a partition's (MetaKey); and each
// live instance's owned count, the field "owned:<owner>" holding
// "<expiry ms> <count>" (record.lua), which the unowned check sums before
// it looks at any partition; each instance's faults of the handler,
// "faults:<owner>" holding "<expiry ms> <JSON>" while it has any; and the admitted confirmation ages raised
// above Options.VerifyBound, "admit:<age ms>|<incarnation>" holding when
// each ends (admit_age.lua), which Pause waits out; and MetaGenGroups once
// the handler's lanes began to move to generation groups. (The earlier layout's string
// seqby:__pause__:group is moved here at Run: MigrateLayout.)
func ControlKey(group string) string { return "seqby:__control__:" + group }

// OwnerKey holds the incarnation of the live engine instance running with
// an OwnerID: "seqby:__owner__:<owner id>", taken at Run with the lease
// TTL and renewed by every heartbeat, so a second live process given the
// same OwnerID is refused at start (ErrOwnerInUse). It is deleted when
// Run returns; a killed instance's key ends with its TTL.
func OwnerKey(ownerID string) string { return "seqby:__owner__:" + ownerID }

// MembersKey is the sorted set of live engine instances consuming for
// group, scored by their last heartbeat (Redis time, ms).
func MembersKey(group string) string { return "seqby:__members__:" + group }

// A process manager's keys are per (pm, correlation value), never per
// stream: one lease covers the value's streams in every category the pm
// handles, and the names stay the same when the pm gains or drops a
// category, so two versions of a pm in a rolling deploy still exclude each
// other. Their hash tag is the correlation value, so the lease, counter
// and state of one value share a Redis Cluster slot.

// PMLeaseKey holds "<owner_id>~<incarnation>:<generation>" while a
// sequential pm's correlation value is owned.
func PMLeaseKey(pm, correlation string) string { return "{" + correlation + "}:__pmlease__:" + pm }

// StateKey is the hash holding a pm instance's state: fields "version",
// "data" and one AppliedField per stream.
func StateKey(pm, correlation string) string { return "{" + correlation + "}:__pmstate__:" + pm }

// AppliedField is the state hash's field holding the last entry of stream
// that the saved state includes.
func AppliedField(stream string) string { return "applied:" + stream }

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
// by which a resent append finds its entry: AppendAudit). It is capped at about AuditMaxLen entries (XADD MAXLEN ~),
// so it has a documented end; in its own slot.
const AuditKey = "seqby:__audit__"

// AuditMaxLen is about how many entries AuditKey keeps: the oldest go
// first.
const AuditMaxLen = 10000
