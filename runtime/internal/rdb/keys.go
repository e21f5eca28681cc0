package rdb

// DLQSuffix is the dead-letter lane token: {category}:{key}:dlq. The key
// rules reserve it as a key, so it never collides with a partition or a
// lane.
const DLQSuffix = "dlq"

// PartitionStream is the stream of one key of a partitioned category.
func PartitionStream(category, key string) string { return category + ":" + key }

// BackfillStream is a partition's backfill lane.
func BackfillStream(category, key, suffix string) string {
	return SubStream(PartitionStream(category, key), suffix)
}

// SubStream is the lane of a partition stream named by suffix: its backfill
// lane, or its dead-letter stream with DLQSuffix.
func SubStream(stream, suffix string) string { return stream + ":" + suffix }

// DLQStream is a partition's dead-letter stream.
func DLQStream(category, key string) string {
	return SubStream(PartitionStream(category, key), DLQSuffix)
}

// IndexKey is the set of a partitioned category's keys.
func IndexKey(category string) string { return category + ":__partitions__" }

// SignalKey is the category's wake-up stream: the publish script appends
// the key of every partition it writes to, so idle consumers block on one
// stream per category instead of polling partitions.
func SignalKey(category string) string { return category + ":__signal__" }

// LeaseKey holds "{owner_id}:{generation}" while group's partition stream
// is owned. The hash tag is the whole flat stream name, so the lease shares
// the stream's Redis Cluster slot (a key without braces hashes as a whole,
// and only the first {...} of a key counts).
func LeaseKey(stream, group string) string { return "{" + stream + "}:__lease__:" + group }

// GenerationKey is the counter a fresh partition lease takes its generation
// from. It is never deleted with the lease, so generations never go
// backwards.
func GenerationKey(stream, group string) string { return "{" + stream + "}:__gen__:" + group }

// MembersKey is the sorted set of live engine instances consuming for
// group, scored by their last heartbeat (Redis time, ms).
func MembersKey(group string) string { return "seqby:__members__:" + group }

// A process manager's keys are per (pm, correlation value), never per
// stream: one lease covers the value's streams in every category the pm
// handles, and the names stay the same when the pm gains or drops a
// category, so two versions of a pm in a rolling deploy still exclude each
// other. Their hash tag is the correlation value, so the lease, counter
// and state of one value share a Redis Cluster slot.

// PMLeaseKey holds "{owner_id}:{generation}" while a sequential pm's
// correlation value is owned.
func PMLeaseKey(pm, correlation string) string { return "{" + correlation + "}:__pmlease__:" + pm }

// PMGenerationKey is the generation counter of a pm correlation value's
// lease (never deleted).
func PMGenerationKey(pm, correlation string) string { return "{" + correlation + "}:__pmgen__:" + pm }

// StateKey is the hash holding a pm instance's state: fields "version",
// "data" and one AppliedField per stream.
func StateKey(pm, correlation string) string { return "{" + correlation + "}:__pmstate__:" + pm }

// AppliedField is the state hash's field holding the last entry of stream
// that the saved state includes.
func AppliedField(stream string) string { return "applied:" + stream }

// HaltsKey is the hash of a handler's halted partitions, written by the
// engine when a partition halts so operators see halts across processes:
// field = the partition (a keyed handler's partition stream, or a pm's
// correlation value), value = a JSON HaltRecord.
func HaltsKey(group string) string { return "seqby:__halts__:" + group }

// Field names of a stream entry written by the publisher.
const (
	FieldType        = "type"         // message type wire name (Route.Type)
	FieldID          = "id"           // message id, unique per publish
	FieldPayload     = "payload"      // codec-encoded message
	FieldPublishedAt = "published_at" // RFC 3339 with nanoseconds, UTC
)

// DefaultBackfillSuffix names a partition's backfill lane unless the
// engine is configured otherwise.
const DefaultBackfillSuffix = "backfill"
