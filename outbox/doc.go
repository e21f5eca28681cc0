// Package outbox is seqby's transactional outbox: the recommended way to
// publish from a service that keeps its state in a SQL database. A
// message is recorded in the same transaction as the business change
// that causes it, and a relay publishes it to Redis afterwards, so there
// is no dual write: either both the change and its message commit, or
// neither does. The full manual is docs/outbox.md; the package's Example
// runs it all on SQLite and an embedded Redis.
//
// The dialect and table are given once, to New: the Outbox creates its
// tables (Migrate, Schema) and makes the relays (NewRelay) with them.
//
// # Writing: Add
//
//	ob := outbox.New(outbox.Options{Dialect: outbox.Postgres})
//	tx, _ := db.BeginTx(ctx, nil)
//	defer tx.Rollback()
//	// ... the business change, through tx ...
//	if _, err := ob.Add(ctx, tx, &events.OrderPlaced{ClientID: "c-1"}); err != nil {
//		return err // a bad key (runtime.ErrInvalidKey): nothing is recorded
//	}
//	return tx.Commit()
//
// Add checks the message exactly as Publisher.Publish does, with the same
// generated key extractor and key rules (runtime.NewRecord): a key that
// breaks them fails with the *runtime.KeyError (errors.Is
// runtime.ErrInvalidKey) and inserts nothing, so the caller's operation
// fails and rolls back. Otherwise it inserts one PENDING record through
// the caller's transaction and returns its message id, the idempotency key
// the relay publishes it with. WithMessageID sets it (a second record
// with the same id fails with ErrDuplicateMessageID); AsBackfill applies.
//
// # Schema
//
// Nothing creates tables silently. Call Outbox.Migrate (idempotent, CREATE
// TABLE IF NOT EXISTS) at start, or run the SQL of Outbox.Schema in your
// own migrations. Add and Relay.Run against a missing table fail with
// ErrNoSchema. The records table (Options.Table, default "seqby_outbox")
// holds seq (insertion order), message_id (unique), category,
// partition_key, partitioned, backfill, type, payload, trace, created_at,
// status (PENDING, PUBLISHED, ABANDONED), published_at and reason; the
// lease table <table>_lease holds name, owner, generation and expires_at.
//
// # Relaying: one active relay through a lease
//
//	relay := ob.NewRelay(db, runtime.NewPublisher(client), outbox.RelayOptions{})
//	go relay.Run(ctx)
//
// Run as many relays as you like (one per service instance): they share
// one lease row, and only its holder publishes; the others wait to take
// over when it dies or stalls. The lease is taken with a conditional
// UPDATE that succeeds only once the row has expired on the database's
// clock, and every acquisition increments the row's generation, the
// fencing token. The holder renews every LeaseTTL/3. It is fenced three
// ways:
//
//   - every UPDATE that marks records PUBLISHED or ABANDONED also requires,
//     in the same statement, that the lease row still holds the relay's
//     owner and generation and has not expired: a relay that lost the
//     lease changes no record;
//   - before each publish the relay checks its local deadline: the start
//     of its last successful renewal + LeaseTTL − LeaseTTL/5, on its
//     monotonic clock. A relay that was paused (SIGSTOP, a GC or VM
//     freeze) past its lease publishes nothing when it resumes, even
//     before it has learnt that its renewal failed;
//   - each publish runs under a context that ends at that deadline. The
//     go-redis client honours it only with ContextTimeoutEnabled
//     (runtime.Connect sets it); without it a command already sent waits
//     for the client's own ReadTimeout (3s by default), so a publish may
//     outlive the deadline by that much. Order does not depend on it (see
//     below).
//
// # Order
//
// A record is never published before an earlier record of its partition
// (category and key; the backfill lane counts as its own). A round reads
// a batch of BatchSize PENDING records, chosen among the oldest
// 4×BatchSize by seq so that each partition gets its share: the first
// record of every partition, then the second of each, and so on. Each
// partition's records in a batch are always its oldest pending ones. The
// round groups them by partition and publishes each group in seq order
// (groups run concurrently, at most RelayOptions.Concurrency at once). A
// record whose publish fails stops its group: the partition's later
// records wait for it, and the partition backs off while the other
// partitions go on; a full batch is followed at once by the next round
// when something in it moved on (a record published or abandoned), even
// when other partitions failed, and so is a round in which a retried
// partition moved on. A round in which nothing moved on (Redis down)
// waits PollInterval (or a NOTIFY), however full its batch: an outage
// costs a batch of failed publishes per PollInterval, not the whole
// backlog's back to back; healthy records behind a full batch of
// failing partitions wait that long too. A partition that failed is left
// out of the fetch, in SQL, however many fail, until it moves on (its
// head published or abandoned) or has nothing pending; its head alone is
// retried once its step has ended (PollInterval, doubling at each
// further failure of its head, at most 30s), by a query of its own. A
// round retries at most its retry budget of such partitions: at first
// RelayOptions.Concurrency, doubled after each round whose retries all
// went through (an outage is over) up to 4×BatchSize, back to
// Concurrency after a retry that failed and at each new lease term. When
// more are due, half the budget goes to those whose step ended longest
// ago (none starves) and the rest to those with the fewest consecutive
// failures (a key that failed once is not held behind partitions that
// keep failing). So failing partitions never fill the fetch window again
// all at once, the healthy records behind a large failing backlog keep
// flowing, and after an outage the N partitions that failed come back
// in about log2(4×BatchSize/Concurrency) + N/(4×BatchSize) rounds (10
// for 2,000 with the defaults), not N/Concurrency (250). The
// cost: the set of excluded partitions is one JSON parameter that grows
// with their number (bounded by the number of pending partitions), and
// each round's statements grow with it; the pending index is ordered by
// seq only, so a round's fetch scans the excluded partitions' pending
// records ahead of the others (a stuck key with a large backlog makes
// rounds slower until it moves on), and the retry query scans every
// pending record (keeping the first of each retried partition). The
// records published
// are marked PUBLISHED 500 per statement; each partition's come in seq
// order, so a failed statement leaves a prefix of each partition marked.
// A record is marked PUBLISHED only after it was published (at-least-once),
// and is published with its message id as the idempotency key, so a
// record published again (by a relay that crashed before marking it, or
// by a successor) is stored once (runtime.PublisherOptions.DedupWindow,
// 24h by default).
//
// Why order holds even when a stalled relay's in-flight publish lands
// late: every relay publishes record n of a partition only after record
// n−1 was stored, either by its own publish (stored, or deduplicated
// because already stored) or because it was marked PUBLISHED, which
// happens only after it was stored. So whichever relay stores the first
// copy of record n, record n−1 is already in the stream; and a late copy
// of a record already stored stores nothing. A stale relay can therefore
// at worst re-send records that are already there, never put one before
// an earlier one of its partition. The lease is what keeps two relays
// from doing the work twice and from racing their marks; the order does
// not depend on timing.
//
// Seq order is commit order within a partition: on PostgreSQL, Add takes
// a transaction-scoped advisory lock on the partition (category and key)
// before the row gets its seq, so two transactions recording events of one
// key commit in seq order, and the relay can never see a later seq of a
// key before an earlier one (a transaction holding records of a key
// delays the next writer of that key until it ends). SQLite serializes
// all writers, so seq order is commit order there.
//
// Deadlocks (PostgreSQL): the lock is held until the transaction ends, so
// two transactions that add records of keys a then b, and b then a, can
// deadlock; PostgreSQL aborts one with SQLSTATE 40P01. Add the keys of a
// transaction in a consistent order (sorted, say) where you can, and retry
// the whole transaction when IsRetryable(err) says so (a deadlock, a
// serialization failure, 40001, or a busy SQLite), as PostgreSQL
// applications do for serialization failures anyway.
//
// Unpartitioned records of a category are one group (their partition_key
// and backfill columns are ignored: they all go to the category's one
// stream) and are published in seq order, and deduplicated by message id
// on the category's stream like partitioned ones. But Add takes no lock
// for them, so on PostgreSQL unpartitioned records added by concurrent
// transactions have no defined order: a later seq can commit, and be
// published, before an earlier one. Only partitioned records follow
// commit order, per key; a consumer that needs an order needs a key.
//
// # The ABANDONED backstop
//
// A record whose key (or category, type or message id) can never be
// published, because older code or a hand-written INSERT put it there, is
// refused by PublishRecord with runtime.ErrInvalidKey or
// runtime.ErrInvalidRecord. The relay marks it ABANDONED at once with the
// error as its reason (fenced like every mark), logs a warning, counts
// seqby.outbox.abandoned, and goes on with the records behind it: an
// invalid key names no partition, so nothing is ordered behind it. It is
// never retried. Operators list abandoned records with Outbox.Abandoned
// (or SQL: SELECT ... WHERE status = 'ABANDONED') and delete them with
// Outbox.DeleteAbandoned once dealt with; nothing else deletes them.
//
// # PostgreSQL and SQLite
//
// Postgres (pgx through database/sql, driver "pgx") is the production
// target. Add notifies the relays (pg_notify, delivered at commit) and
// the relay LISTENs on a dedicated connection, so a record is picked up
// at once; PollInterval is the fallback. The NOTIFY has a cost at very
// high write rates: committing transactions that notified serialize on
// PostgreSQL's notification queue lock. Table names are limited to
// MaxTableLen bytes (63 with a schema) so that derived names fit
// PostgreSQL's identifiers; RelayOptions.LeaseTTL is at least
// MinLeaseTTL. FOR UPDATE SKIP LOCKED is used
// where it helps: in cleanup batches, which must never wait behind (or
// block) another transaction on old rows. It is deliberately not used to
// fetch pending records: with one active relay there is no contention to
// skip, and skipping a locked earlier record of a key would let a later
// one overtake it.
//
// SQLite (modernc.org/sqlite, pure Go, no cgo, driver "sqlite") is the
// embedded default, for one process, or a few sharing a database file:
// open it with ?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL). The
// relay polls every PollInterval.
//
// # Retention, metrics and logs
//
// The active relay deletes PUBLISHED records older than
// RelayOptions.Retention (default 7 days) when it takes the lease and
// every CleanupInterval (default 10m), 1000 per statement, on a goroutine
// of its own so that a long cleanup never holds publishing up;
// Relay.Cleanup runs it on demand. PENDING records
// are the backlog; ABANDONED ones are kept for operators. Nothing else
// grows: the lease table has one row per relay Name.
//
// Metrics (RelayOptions.MeterProvider, OpenTelemetry, no-op by default):
// seqby.outbox.published and seqby.outbox.abandoned (counters),
// seqby.outbox.lag (seconds since the oldest PENDING record was added, 0
// when none), seqby.outbox.pending and seqby.outbox.abandoned.records
// (the ABANDONED backlog: alert on it; gauges read from the database when
// collected). Outbox.Stats reads the same. Logs (RelayOptions.Logger,
// log/slog): lease acquired, released and lost (Info, Warn), publish
// failures and abandoned records (Warn), the relay's lag while it exceeds
// RelayOptions.LagWarning (Warn), one Debug line per publish, and one per
// partition and backoff step.
package outbox
