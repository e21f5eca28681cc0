// Package rdb is seqby's Redis protocol: the key layout, every Lua script
// (in lua/, embedded), the functions that run them and the parsing of
// their replies. The engine, the publisher, the Redis state store and the
// operator package (runtime/inspect) call it; nothing outside the module
// can, so the protocol can change without breaking users.
//
// # Key layout
//
// Every name is built by the functions in keys.go and nowhere else.
//
//	key                                        type        content
//	{category}:{key}                           stream      a partition's entries (fields type, id, payload, published_at)
//	{category}:{key}:{suffix}                  stream      its backfill lane ("backfill" by default)
//	{category}                                 stream      an unpartitioned category
//	{category}:__partitions__                  set         the category's partition keys (the index)
//	{category}:__signal__                      stream      wake-up signals: field k = partition key (capped, approximate)
//	{<category>:<key>}:__lease__:<handler>     string      a partition's lease: "{owner_id}:{generation}", PX TTL
//	{<category>:<key>}:__gen__:<handler>       string      its generation counter (never deleted)
//	seqby:__members__:<handler>                sorted set  live instances, score = last announcement (Redis ms)
//	{<value>}:__pmlease__:<pm>                 string      a sequential pm's lease on correlation value <value>
//	{<value>}:__pmgen__:<pm>                   string      its generation counter (never deleted)
//	{<value>}:__pmstate__:<pm>                 hash        pm state: version, data (JSON), applied:<stream> (last entry included)
//	seqby:__halts__:<handler>                  hash        halt records: field = partition stream (or pm value), value = JSON HaltRecord
//	{category}:{key}:dlq                       stream      dead-letter stream a halted head is moved to by an operator
//
// Consumer groups are named after the handler (Registration.Name); a keyed
// owner's consumer name is its lease token, an unkeyed one's its owner id.
// A partition's lease and counter carry the partition stream as their hash
// tag, so they share its Redis Cluster slot; a pm's lease, counter and
// state carry the correlation value. docs/runtime.md and the README hold
// the same table.
//
// # Scripts
//
// Each script in lua/ starts with a comment giving its KEYS, its ARGV and
// its reply. Keys go in KEYS and values in ARGV, never built into the
// script text, so Redis Cluster sees every key a script touches. A script
// that acts for a lease holder checks the lease first and fails with the
// error prefix SEQBY_FENCED when the token no longer holds; the Go side
// maps it to ErrFenced.
package rdb
