package runtime

// The Redis key layout. Every name is built here and nowhere else, so the
// layout documented in docs/runtime.md has one source.
//
// A partition's own keys (lease, generation counter) are written
// "{<stream>}:__name__:<group>": the hash tag is the whole flat stream name,
// so they share the stream's Redis Cluster slot (a key without braces hashes
// as a whole, and only the first {...} of a key counts).

// PartitionStream is the stream of one key of a partitioned category:
// "{category}:{key}".
func PartitionStream(category, key string) string { return category + ":" + key }

// BackfillStream is a partition's backfill lane: "{category}:{key}:{suffix}".
func BackfillStream(category, key, suffix string) string {
	return category + ":" + key + ":" + suffix
}

// IndexKey is the set of a partitioned category's keys:
// "{category}:__partitions__".
func IndexKey(category string) string { return category + ":__partitions__" }

// SignalKey is the category's wake-up stream: the publish script appends
// the key of every partition it writes to, so idle consumers block on one
// stream per category instead of polling partitions.
func SignalKey(category string) string { return category + ":__signal__" }

// LeaseKey holds "{owner_id}:{generation}" while a consumer group's
// partition is owned: "{<stream>}:__lease__:<group>".
func LeaseKey(stream, group string) string { return "{" + stream + "}:__lease__:" + group }

// GenerationKey is the counter a fresh lease takes its generation from. It
// is never deleted with the lease, so generations never go backwards:
// "{<stream>}:__gen__:<group>".
func GenerationKey(stream, group string) string { return "{" + stream + "}:__gen__:" + group }

// MembersKey is the sorted set of live engine instances consuming for
// group, scored by their last heartbeat (Redis time, ms):
// "seqby:__members__:<group>".
func MembersKey(group string) string { return "seqby:__members__:" + group }

// A process manager's keys are per (pm, correlation value), never per
// stream: one lease covers the value's streams in every category the pm
// handles, and the key names stay the same when the pm gains or drops a
// category, so two versions of a pm in a rolling deploy still exclude each
// other. Their hash tag is the correlation value, so the lease, counter and
// state of one value share a Redis Cluster slot (the flat streams
// {category}:{value} do not: see docs/runtime.md, "Process managers").

// PMLeaseKey holds "{owner_id}:{generation}" while a sequential pm's
// correlation value is owned: "{<value>}:__pmlease__:<pm>".
func PMLeaseKey(pm, correlation string) string { return "{" + correlation + "}:__pmlease__:" + pm }

// PMGenerationKey is the generation counter of a pm correlation value's
// lease (never deleted): "{<value>}:__pmgen__:<pm>".
func PMGenerationKey(pm, correlation string) string { return "{" + correlation + "}:__pmgen__:" + pm }

// StateKey is the hash holding a pm instance's state (fields "version"
// and "data") in the Redis state store: "{<value>}:__pmstate__:<pm>".
func StateKey(pm, correlation string) string { return "{" + correlation + "}:__pmstate__:" + pm }

// HaltsKey is the hash of a handler's halted partitions, written by the
// engine when a partition halts so operators see halts across processes:
// field = the partition (a keyed handler's partition stream, or a pm's
// correlation value), value = a JSON HaltRecord. "seqby:__halts__:<group>".
// It hashes to its own Redis Cluster slot (see docs/runtime.md,
// "Operating").
func HaltsKey(group string) string { return "seqby:__halts__:" + group }

// DLQStream is a partition's dead-letter stream, where an operator moves
// a halted head: "{category}:{key}:dlq". The key rules reserve "dlq" as a
// key, so it never collides with a partition or a lane.
func DLQStream(category, key string) string { return category + ":" + key + ":" + DLQSuffix }
