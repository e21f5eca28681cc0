// Package seqbytest is seqby's test kit: run handlers the way the engine
// runs them, from a user's own tests.
//
// The snippets below test the README's quick start types (package billing,
// with Invoices{Seen}, and events.OrderPlaced). Importing this package adds
// an embedded Redis (miniredis) to go.mod: run go mod tidy once.
//
// Unit tests use NewBroker, an in-process broker (runtime.InlineBroker)
// with the handlers registered: every message runs synchronously inside
// Publish, encoded and decoded as on the wire, a keyed handler's or a
// sequential pm's message with a lease in its context (so a handler that
// fences its effects with runtime.LeaseFromContext runs as in
// production; b.UseRedis(client) also writes each lease in that Redis,
// for handlers whose fenced script checks GET(LeaseKey) == Token), retried
// at once up to its MaxRetries, and, when it still fails, halting its
// partition: the handler's later messages of that key are held until the
// test calls Skip or Retry, as an operator would.
//
//	func TestInvoices(t *testing.T) {
//		seen := make(chan string, 10) // buffered: the handler sends inside Publish
//		h := &billing.Invoices{Seen: seen}
//		b := seqbytest.NewBroker(t, h.SeqbyRegistration())
//		if err := b.Publish(context.Background(), events.OrderPlaced{ClientID: "c-1", OrderID: "o-1"}); err != nil {
//			t.Fatal(err) // the handler's error, or a *runtime.KeyError for a bad key
//		}
//		if got := <-seen; got != "c-1: placed o-1" {
//			t.Fatalf("saw %q", got)
//		}
//		// and b.Halts() after a failing handler
//	}
//
// NewBroker encodes as JSON, the engine's default; a service whose
// messages need another codec (protobuf) tests them with
// NewBrokerCodec(t, codec, regs...), the codec it gives its engine.
//
// Integration tests use StartEngine: a real engine with the handlers
// registered, running until the test ends, on an embedded Redis
// (miniredis, started for the test) or on the server of
// $SEQBYTEST_REDIS_URL, with timings short enough for tests (a 1s lease,
// a 50ms discovery cycle). Publish through it, then WaitDrained until
// every handler has handled everything, or Eventually for a condition of
// your own:
//
//	func TestBilling(t *testing.T) {
//		seen := make(chan string, 10)
//		e := seqbytest.StartEngine(t, []runtime.Registration{(&billing.Invoices{Seen: seen}).SeqbyRegistration()})
//		e.Publish(events.OrderPlaced{ClientID: "a-1", OrderID: "o-1"})
//		e.WaitDrained()
//		// assert on the effects: here, <-seen is "a-1: placed o-1"
//	}
//
// The engine's warnings and errors go to the test's output (shown when
// it fails, or with -v), each line naming the test's line that started
// the engine; nothing below a warning is logged. On the embedded Redis,
// which has no CONFIG command, the engine skips its maxmemory-policy
// check (runtime.Options.SkipEvictionCheck) instead of warning about it.
//
// Examples and programs without a testing.TB get an embedded Redis from
// EmbeddedRedis: its URL and a func to stop it.
//
// The embedded Redis is for tests of your handlers' logic through the
// engine. The engine's own guarantees (order across instances, failover)
// are tested on real Redis servers in seqby's suites; set
// SEQBYTEST_REDIS_URL to run your integration tests on a real server too
// (give each test its own server or database: the engine's keys are
// shared by everything on it).
package seqbytest
