// Package rdb is seqby's Redis protocol: the key layout, every Lua script
// (in lua/, embedded), the functions that run them and the parsing of
// their replies. The engine, the publisher, the Redis state store and the
// operator package (runtime/inspect) call it; nothing outside the module
// can, so the protocol can change without breaking users.
//
// # Key layout
//
// Every name is built by the functions in keys.go and nowhere else. Braces
// are Redis Cluster hash tags: every key one script touches shares one, so
// the same layout works on a single Redis and on a cluster.
//
//	key                                  type        content
//	category:{key}                       stream      a partition's entries (fields type, id, payload, published_at)
//	category:{key}:backfill              stream      its backfill lane (the suffix is configurable)
//	category:{key}:dlq                   stream      its dead-letter stream, where an operator moves a halted head
//	category:{key}:dlq:__op__:id         string      "<op> <entry id>": the operator call that replayed (and what it appended) or dropped DLQ entry id, so a resent one answers alike (TTL 10 min)
//	category:{key}:__lease__:handler     string      the partition's lease: "<owner_id>~<incarnation>:<generation>", PX TTL
//	category:{key}:__lease__:handler:__attempt__   string  the token of an owner retrying a halted head (lease's TTL); a pm's: <pm lease>:__attempt__
//	category:{key}:__lease__:handler:__resolved__  string  the note of an operator's resolve for the halted owner (JSON, 10 min TTL)
//	category:{key}:__lease__:handler:__paused__    string  the partition's pause mark (JSON: who, when) while an operator pauses it; a pm's: <pm lease>:__paused__
//	category:{key}:__lease__:handler:__paused__:__resumed__  string  "<op> <note>": the op of the resume that ended the pause, and its note, so a resent resume answers alike (TTL 10 min); a pm's: <pm lease>:__paused__:__resumed__
//	category:{key}:__gen__:handler       string      its generation counter: max(stored + 1, Redis time in µs) per acquire; reaped
//	category:{key}:__halt__:handler      string      its halt record (JSON) while halted
//	category:{key}:__wake__              hash        owners to wake: handler or pm -> owner incarnation holding its lease ("": found cold); reaped
//	category:{key}:__msgid__:id          string      entry id of message id, for the dedup window (PX TTL)
//	{category}:__msgid__:id              string      the same for an unpartitioned category's stream
//	category                             stream      an unpartitioned category
//	{category}:__partitions__            set         the category's partition keys (the index)
//	{category}:__signal__                stream      wake-up signals: field k = partition key (capped, approximate)
//	{category}:__fanout__                string      set (TTL) while an engine runs an unkeyed handler on the category: every publish signals {category}:__signal__
//	{category}:__groups__                hash        the category's handlers (consumer groups) and where each new one starts
//	{category}:__reaping__               set         keys being reaped, read with the index (reap.go)
//	{category}:__reaper__                string      the category reaper's lease, <owner_id>~<incarnation>:<generation>
//	{category}:__reapergen__             string      its generation counter
//	{value}:__pmlease__:pm               string      a sequential pm's lease on correlation value <value>
//	{value}:__pmgen__:pm                 string      its generation counter: max(stored + 1, Redis time in µs) per acquire; reaped
//	{value}:__pmstate__:pm               hash        pm state: version, data (JSON), applied:<stream> (last entry included)
//	{value}:__pmhalt__:pm                string      its halt record (JSON) while halted
//	seqby:__members__:handler            sorted set  live instances, score = last announcement (Redis ms)
//	seqby:__owner__:owner                string      the incarnation of the live engine with OwnerID owner (TTL LeaseTTL)
//	seqby:__owned__:handler:owner        string      partitions owner held at its last heartbeat (expires with its membership)
//	seqby:__wake__:incarnation           stream      an engine incarnation's wake-ups: fields c = category, k = partition key (capped; made at Run, TTL 10 min renewed by its heartbeats)
//	seqby:__faults__:owner               string      the faults an engine instance reports (JSON), TTL 2 × LeaseTTL renewed by its heartbeats
//	seqby:__deploy__:handler             hash        deploy records: owner id -> kind, build, routes, deploy time (rolling deploys)
//	seqby:__halted__:handler             set         the handler's halt record keys, for operators
//	seqby:__paused__:handler             set         the handler's pause mark keys, for operators
//	seqby:__pause__:handler              string      the pause of the whole handler (JSON: who, when) while an operator pauses it
//	{seqby:__pause__:handler}:__resumed__  string    the same "<op> <note>" after a resume of the whole handler (TTL 10 min), in its pause's slot
//	seqby:__audit__                      stream      operator actions that changed something (who, when, what), capped at about 10,000
//	{seqby:__audit__}:__op__:op          string      the audit entry of operator action op (its nonce), so a resent append records it once (TTL 10 min)
//
// A partition's keys are tagged with its key, so a key's streams in every
// category, their lanes, lease, counter and halt record share a slot, and a
// pm correlated by that key reads all its streams in one script with its
// lease ({value} is the same tag). A category's index and signals are
// tagged with the category. Keys and categories may therefore not contain
// braces. Consumer groups are named after the handler
// (Registration.Name); a keyed owner's consumer name is its lease token, an
// unkeyed one's its owner id. docs/runtime.md holds the same table, and a
// test keeps the two and the functions in agreement.
//
// # Scripts
//
// Each script in lua/ starts with a comment giving its KEYS, its ARGV and
// its reply; helpers several scripts need (entry id comparison, the cold
// test) live in lua/lib/ and are prepended to them when they load. Keys go
// in KEYS and values in ARGV, never built into the script text, so Redis
// Cluster sees every key a script touches. A script
// that acts for a lease holder checks the lease first and fails with the
// error prefix SEQBY_FENCED when the token no longer holds; the Go side
// maps it to ErrFenced.
//
// One script breaks the KEYS rule, for a reason: round.lua (round.go)
// carries many partitions' fenced acks and reads in one call, each
// partition a slice replying on its own (applied, fenced, failed), since
// invoking a script costs more Redis time than a fenced read's commands.
// Redis 7.0 refuses a call whose KEYS span several slots even when the
// script is flagged allow-cross-slot-keys (the flag only lets it touch
// undeclared keys of other slots on its node), so on a cluster only the
// first slice's keys are declared and the others travel in ARGV; a slice
// whose keys are not served by the node now (another node's slot, or a
// key missing in a slot migrating or importing) replies so (ErrNotLocal)
// before doing anything. The cluster variant is also flagged allow-oom,
// as a flagged script is refused whole at maxmemory where the unflagged
// single scripts still ack and read.
package rdb
