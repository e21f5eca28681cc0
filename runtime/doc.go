// Package runtime runs the handlers seqgen registers, on Redis Streams,
// with per-key sequential processing: the events of one key value of a
// handler are processed strictly one at a time, in publish order, across
// any number of engine processes; different keys run in parallel.
// Delivery is at-least-once: after a crash or a stall only the one
// in-flight event of a partition can run again, and nothing is reordered.
//
// # Publishing
//
// A Publisher writes messages (the types seqgen marks, which implement
// Message, and Partitioned when their category is keyed) to Redis:
//
//	client := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
//	pub := runtime.NewPublisher(client)
//	err := pub.Publish(ctx, events.OrderPlaced{ClientID: "client-123", OrderID: "o-1"})
//
// Connect(ctx, url) builds the client from one redis:// or rediss:// URL
// instead, and returns a cluster client when the server is a cluster
// node, so one setting (REDIS_URL) serves a single Redis and a cluster.
//
// The partition key is checked before anything is written: a bad key
// fails with a *KeyError matching ErrInvalidKey and one rule (ErrNullKey,
// ErrEmptyKey, ErrKeyColon, ErrReservedKey, ErrSentinelKey). Other
// failures match ErrPublish. AsBackfill publishes to the partition's
// backfill lane, read after its live entries.
//
// # Consuming
//
// An Engine consumes for the registrations seqgen writes
// (SeqbyRegistration methods). Run any number of engines, in any number
// of processes:
//
//	eng, err := runtime.NewEngine(client, runtime.Options{})
//	err = eng.Register(invoices.SeqbyRegistration()) // a bad registration fails here
//	err = eng.Run(ctx)                               // blocks; hands its partitions over when ctx ends
//
// Each partition (one key of a category, per handler) is owned by one
// instance through a lease with a generation; every read and ack checks
// the lease in Redis, and the handler's context is cancelled (cause
// ErrLeaseLost) when the lease is lost. A handler that commits effects of
// its own fences them with LeaseFromContext. A message that keeps failing
// halts its partition only: the message stays the partition's head,
// nothing later for that key is applied, the halt is logged, passed to
// Options.OnHalt, shown in Engine.Status and recorded in Redis, where an
// operator resolves it with the runtime/inspect package or cmd/seqbyctl.
//
// Process managers (seqgen's //seqby:pm) keep state in a StateStore
// (RedisStateStore by default); a sequential one processes the events of
// one correlation value (Correlation) one at a time across the
// categories it reads.
//
// # Testing handlers
//
// An InlineBroker runs registrations in process, one message at a time in
// submission order, encoding and decoding each message as on the wire,
// with a lease in the context of a keyed message, retries, and halts that
// hold a key's later messages until Skip or Retry, as the engine would;
// Publish returns the handlers' errors. The runtime/seqbytest package
// wraps it for tests, and starts real engines on an embedded Redis:
//
//	b := runtime.NewInlineBroker()
//	err := b.Register(h.SeqbyRegistration())
//	err = b.Publish(ctx, events.OrderPlaced{ClientID: "c-1", OrderID: "o-1"})
//
// Both *Publisher and *InlineBroker implement MessagePublisher.
//
// The Redis key layout and the engine's protocol are described in
// docs/runtime.md ("Redis key layout") of the seqby repository.
package runtime
