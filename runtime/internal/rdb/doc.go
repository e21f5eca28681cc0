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
//	category:{key}:__lease__:handler     string      the partition's lease: "<owner_id>~<incarnation>:<generation>", PX TTL (released, or ends with it)
//	category:{key}:__lease__:handler:__meta__  hash    its control hash: gen (max(stored + 1, Redis time in µs) per acquire), halt (the halt record, JSON, while halted), attempt ("<token> <expiry ms>" while an owner retries the halted head, extended with the lease; it counts while the lease holds the token and it has not expired), resolved (an operator's resolve's note for the halted owner, JSON with its time and expiry; the reaper keeps the partition until the expiry or ReapAfter after the time, whichever is first), paused (the pause note, JSON) and resumed ("<expiry ms> <op> <note>" of the resume that ended it); one field each; deleted by the reaper (a paused partition is kept, and one resolved lately (see resolved)); a pm's is its state hash
//	category:{key}:__wake__              hash        owners to wake: handler or pm -> owner incarnation holding its lease ("": found cold); reaped
//	category:{key}:__msgid__:id          string      entry id of message id, for the dedup window (PX TTL)
//	{category}:__msgid__:id              string      the same for an unpartitioned category's stream
//	category                             stream      an unpartitioned category
//	{category}:__partitions__            set         the category's partition keys (the index)
//	{category}:__signal__                stream      wake-up signals: field k = partition key (capped, approximate)
//	{category}:__fanout__                string      set (TTL) while an engine runs an unkeyed handler on the category: every publish signals {category}:__signal__
//	{category}:__groups__                hash        the category's handlers (consumer groups) and where each new one starts
//	{category}:__reaping__               set         keys being reaped, read with the index (Reap, Partitions)
//	seqby:__maintenance__                string      the maintenance leader's lease (one engine reaps every category), <owner_id>~<incarnation>:<generation>, PX TTL
//	{seqby:__maintenance__}:__meta__     hash        its control hash: gen, the generation counter (max(stored + 1, Redis time in µs) per acquire); no TTL, one key
//	{seqby:__maintenance__}:__categories__  sorted set  the categories to reap: {"c":category,"a":ReapAfter ms,"b":backfill suffix} per engine setting, score = last announcement (Redis ms); dropped after 15 min, the set expires 15 min after the last
//	{value}:__pmlease__:pm               string      a sequential pm's lease on correlation value <value>, PX TTL; its control hash is the state hash
//	{value}:__pmstate__:pm               hash        pm state: version, data (JSON), applied:<stream> (last entry included), saved_by (the last save's nonce), and the fields of its lease's control hash (gen, halt, attempt, resolved, paused, resumed); kept (the reaper blanks its applied marks of reaped lanes and drops gen)
//	seqby:__members__:handler            sorted set  live instances, score = last announcement (Redis ms)
//	seqby:__owner__:owner                string      the incarnation of the live engine with OwnerID owner (TTL LeaseTTL)
//	seqby:__barrier__:{tag}:nonce        string      the strict mode's replica barrier: a fresh key per barrier (on a cluster, per slot: tag hashes to it), written before each WAIT, deleted after it, else expiring a minute after
//	seqby:__wake__:incarnation           stream      an engine incarnation's wake-ups: fields c = category, k = partition key (capped; made at Run, TTL 10 min renewed by its heartbeats)
//	seqby:__deploy__:handler             hash        deploy records: owner id -> kind, build, routes, deploy time (rolling deploys)
//	seqby:__marks__:handler              set         the control hashes of the handler's halted and paused partitions (and pm values), for operators; a member with neither is dropped by the listing
//	seqby:__control__:handler            hash        the handler's control hash: paused (JSON: who, when) while an operator pauses the whole handler, resumed ("<expiry ms> <op> <note>") after a resume, owned:<owner> ("<expiry ms> <count>": partitions owner held at its last heartbeat, dropped by a heartbeat once expired), admit:<age ms>|<incarnation> (when it ends, Redis ms: an admitted confirmation age raised above VerifyBound, which Pause waits out; each store drops the ended ones); faults:<owner> ("<expiry ms> <JSON>": the faults the instance reports of the handler, while it has any, 2 × LeaseTTL after its last heartbeat); no TTL: DEL it with the handler
//	seqby:__audit__                      stream      operator actions that changed something (who, when, what, op: a resent append finds its op there), capped at about 10,000
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
// One script breaks the KEYS rule, for a reason: round.lua (Round)
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
//
// # Every call may run twice
//
// Every command, script and pipeline that the engine, the publisher, the
// outbox relay and the operators' tools send may be run twice by Redis
// and must have the same outcome as running once, for Redis's state and
// for the caller's answer: go-redis resends a command or a pipeline whose
// reply it failed to read (io.EOF, a reset, a read timeout; MaxRetries, 3
// by default, and users pass their own clients), although Redis may have
// run it, and proxies and cluster redirects replay calls. A script that
// compares and acts, whose second run would see its own effect and
// refuse, keeps a nonce of the call with the effect, in the same slot,
// and answers its second run as the first. Why each is safe:
//
//	ack.lua                XACK is idempotent; the fence and pause checks only read
//	acquire.lua            a second run finds its own lease and says held by this incarnation, which the engine adopts (lease.Leases.Adopt; the maintenance leader too)
//	admit_age.lua          adds the same member again, its end no earlier: the age read is the same
//	admit_age_read.lua     reads only
//	append_once.lua        the second run finds the message id and appends nothing
//	audit.lua              writes the action's op in its entry: the second run finds it among the entries of the last 10 minutes, appends nothing and answers that id
//	begin_attempt.lua      sets the same attempt mark again, its expiry the lease's
//	check_head.lua         reads only
//	clear_halt.lua         deletes only the record it was given; a second run finds nothing and the listing drops the index member
//	clear_pause.lua        keeps the resume's op with the note it deleted for 10 minutes (the field resumed, with its expiry): the second run answers with that note
//	del_idle_consumer.lua  deletes an idle consumer; the second run finds none
//	deploy_read.lua        reads only
//	deploy_record.lua      writes the instance's own record again
//	dlq_delete.lua         keeps the drop's op with the entry for 10 minutes: the second run answers dropped
//	dlq_replay.lua         keeps the replay's op with the id it appended for 10 minutes: the second run answers with that id
//	end_attempt.lua        deletes the attempt mark only while it names the token: the second run finds none
//	live_members.lua       reads only
//	member.lua             the same member with a fresh score
//	migrate_field.lua      moves an old key's value into a field it keeps if there (HSETNX) and deletes the old key: the second run finds it gone
//	name.lua                names the owner where the name differs, under the fence: a second run writes nothing and replies the same
//	owned_read.lua         reads only
//	owner_claim.lua        the same incarnation may claim again
//	owner_state.lua        reads only
//	read.lua               the second run's pending pass hands back what the first delivered, one entry at a time
//	read_oldest.lua        the second run's pending pass hands back the one entry the first delivered
//	reap.lua               the second run finds the partition gone and answers as the first
//	reap_categories.lua    announces the same categories again: only their scores move, and the list is the same
//	reclaim.lua            claims the same entries again (JUSTID: no delivery counted)
//	record.lua             the same record with a later expiry, or the same delete
//	record_halt.lua        writes the same record again under the same fence
//	register_group.lua     HSETNX: the second run reads the start the first stored
//	release.lua            the second run is fenced (the lease is gone) and the caller ignores it
//	release_cold.lua       a second run over cold lanes with the lease gone answers released
//	renew.lua              the same PEXPIRE again under the same token
//	renew_many.lua         the same PEXPIREs, attempt marks and wake names again
//	resolve_head.lua       keeps the resolve's op in its note: the second run answers with the first's dead-letter id
//	round.lua              each op is its single script's (A ack, R read, O read_oldest, V verify); N names the last entry its owner holds and hands back its pending entries after it
//	save_state.lua         keeps the save's nonce (saved_by): the second run answers saved
//	trim.lua               trims below acked entries: the second run trims nothing more
//	verify.lua             reads only
//
// and the calls sent from Go:
//
//	Publish, one Redis    MULTI/EXEC of SADD, append_once and the wake reads and signals: stored once by message id; go-redis does not resend a MULTI/EXEC, so the publisher sends it again itself on a lost reply
//	Publish, cluster      SADD, append_once, then a pipeline of SADD and the wake reads: each idempotent
//	PublishBatch          the same per entry, each with its message id, resent whole by the publisher on a lost reply
//	DLQ replay            MULTI/EXEC of SADD and dlq_replay.lua, sent again by ReplayDLQ itself on a lost reply
//	signals               XADD to a wake-up stream: a duplicate wake-up costs one read
//	AcquireAll, RenewAll  pipelines of acquire and renew_many, each as above
//	the Batcher           pipelines of rounds, each as above, and of plain slices (plain.go): GET, HGET and XPENDING read; an XACK run twice acks fewer and an XREADGROUP's second run finds the first's entries pending (XPENDING), so the slice goes again as round.lua's, after an XCLAIM ... RETRYCOUNT 0 JUSTID (the same count again) gives back the delivery of what the read delivered
//	Barrier               SET of the same marker (on a cluster, a fresh key per slot, then DEL), WAIT and INFO: reads and idempotent writes
//	StoreAdmitAgeAcked    admit_age.lua and WAIT on one connection (the strict mode), both sent again on a new connection after a lost reply (Resend)
//	heartbeats            PEXPIRE, SET and DEL of the engine's own keys; an empty signal wakes nobody
//	indexes               SADD, SREM and SMOVE of set members (halts and pauses, reaping, the category index): idempotent
//	Reap, after reap.lua  SMOVE to the reaping set, EXISTS of the lanes, then SADD back or SREM (and EXISTS again: another reaper may have moved the key); EndLegacyReaper's PEXPIRE: each idempotent, and safe beside another reaper
//	pause                 SADD and HSETNX of the field paused: a second run finds its own note, byte for byte, and answers paused
//	resume                clear_pause.lua
//	audit                 audit.lua, by the action's op: one entry per action
//	outbox relay          PublishRecord, by the record's message id
//	unkeyed handlers      XREADGROUP, XACK and XCLAIM: a delivery lost to a resent read is claimed back after LeaseTTL; unkeyed handlers promise no order
//
// A read run twice counts one delivery more toward Options.MaxDeliveries
// (the pending pass reads again); the read-new op counts none. The
// resend suite (runtime/resend_test.go, redistest.LostReply) loses the
// reply of each kind of call after Redis ran it and checks the promise;
// docs/runtime.md holds the same list, and a test keeps both naming every
// script.
package rdb
