package guarantee

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/generator"
	"github.com/seqby/seqby/runtime"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// These tests need no engine process: registration and publishing fail in
// the caller, against a real private redis-server.

func newRedis(t *testing.T) (redis.UniversalClient, context.Context) {
	t.Helper()
	rdb := newClient(startRedis(t))
	t.Cleanup(func() { rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return rdb, ctx
}

// stepRoute is the generated route of Step, for hand-written registrations.
func stepRoute() runtime.Route { return (&Recorder{}).SeqbyRegistration().Routes[0] }

// noteRoute is a hand-written route of Note, which has no client_id.
func noteRoute() runtime.Route {
	return runtime.Route{
		Category: "note",
		Type:     "Note",
		Decode: func(c runtime.Codec, p []byte) (any, error) {
			var m Note
			err := c.Unmarshal(p, &m)
			return m, err
		},
		Invoke: func(context.Context, any, any) error { return nil },
	}
}

// keyedBy returns a keyed handler registration named name on Step's
// category, partitioned by field.
func keyedBy(name, field string) runtime.Registration {
	rt := stepRoute()
	rt.PartitionField = field
	return runtime.Registration{Name: name, Kind: runtime.EventHandler, Key: field, Sequential: true, Routes: []runtime.Route{rt}}
}

// TestRegistrationValidationFailsLoud: a handler declaring a key its message
// type cannot yield is refused when it is built (seqgen) or registered (the
// engine, for hand-written or stale registration values), never at publish.
func TestRegistrationValidationFailsLoud(t *testing.T) {
	t.Run("seqgen refuses the missing field", func(t *testing.T) {
		dir := t.TempDir()
		files := map[string]string{
			"go.mod": "module example.com/m\n\ngo 1.26\n",
			"m.go": `package m

import "context"

//seqby:event=note
type Note struct{ Text string }

//seqby:handler
//seqby:key=client_id
type H struct{}

func (H) OnNote(context.Context, Note) error { return nil }
`,
		}
		for name, body := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		_, err := generator.Generate(generator.Config{Dir: dir})
		var errs generator.Errors
		if !errors.As(err, &errs) || !strings.Contains(err.Error(), "Note has no field client_id") {
			t.Fatalf("seqgen on a handler keyed by a missing field: %v, want an error naming the missing field", err)
		}
		if _, err := os.Stat(filepath.Join(dir, generator.GenFile)); !os.IsNotExist(err) {
			t.Fatalf("seqgen wrote %s despite the error (stat: %v)", generator.GenFile, err)
		}
	})

	stale := (&Recorder{}).SeqbyRegistration()
	stale.Routes = slices.Clone(stale.Routes)
	stale.Routes[0].PartitionField, stale.Routes[0].PartitionKey = "", nil
	halfStale := (&Recorder{}).SeqbyRegistration()
	halfStale.Routes = slices.Clone(halfStale.Routes)
	halfStale.Routes[0].PartitionKey = nil
	tests := []struct {
		name string
		reg  runtime.Registration
	}{
		{"hand-written, keyed by client_id on Note", runtime.Registration{
			Name: "example.com/hand.Written", Kind: runtime.EventHandler, Key: "client_id", Sequential: true,
			Routes: []runtime.Route{noteRoute()}}},
		// What seqgen wrote before the key marker was added to the handler
		// and the event: the route knows no partition field.
		{"stale generated, route without partition field", stale},
		{"stale generated, route without PartitionKey", halfStale},
	}
	for _, tc := range tests {
		t.Run("engine refuses "+tc.name, func(t *testing.T) {
			rdb, ctx := newRedis(t)
			e, err := runtime.NewEngine(rdb, runtime.Options{OwnerID: "reg"})
			if err != nil {
				t.Fatal(err)
			}
			err = e.Register(tc.reg)
			if !errors.Is(err, runtime.ErrRegistration) {
				t.Fatalf("Register: %v, want an error matching ErrRegistration", err)
			}
			if n := len(e.Registrations()); n != 0 {
				t.Fatalf("the refused registration was kept (%d registrations)", n)
			}
			// Refused before anything ran or was published.
			if ks, _ := keys(ctx, rdb, "*"); len(ks) > 0 {
				t.Fatalf("Redis holds %v after a refused registration", ks)
			}
		})
	}
	t.Run("engine accepts the generated registration", func(t *testing.T) {
		rdb, _ := newRedis(t)
		e, err := runtime.NewEngine(rdb, runtime.Options{OwnerID: "reg"})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Register((&Recorder{Redis: rdb}).SeqbyRegistration()); err != nil {
			t.Fatalf("Register of the generated registration: %v", err)
		}
	})
}

// plainBroker is a broker with consumer groups but without partitioning.
type plainBroker struct{ *runtime.Registry }

func newPlainBroker() plainBroker {
	return plainBroker{runtime.NewRegistry("plain", runtime.ConsumerGroups)}
}

func (plainBroker) Name() string                       { return "plain" }
func (plainBroker) Capabilities() runtime.Capabilities { return runtime.ConsumerGroups }
func (b plainBroker) Register(regs ...runtime.Registration) error {
	return b.Add(regs...)
}

var _ runtime.Broker = plainBroker{}

// TestCapabilityGating: a broker that does not advertise StreamPartitioning
// refuses a keyed handler at registration; the inline broker accepts it and
// runs its events in submission order.
func TestCapabilityGating(t *testing.T) {
	t.Run("broker without partitioning refuses", func(t *testing.T) {
		b := newPlainBroker()
		err := b.Register((&Recorder{}).SeqbyRegistration())
		if !errors.Is(err, runtime.ErrCapability) || !errors.Is(err, runtime.ErrRegistration) {
			t.Fatalf("Register: %v, want ErrCapability (and ErrRegistration)", err)
		}
		// The gate is about keys: an unkeyed handler is fine there.
		unkeyed := runtime.Registration{Name: "example.com/plain.Notes", Kind: runtime.EventHandler, Routes: []runtime.Route{noteRoute()}}
		if err := b.Register(unkeyed); err != nil {
			t.Fatalf("unkeyed handler on the plain broker: %v", err)
		}
	})
	t.Run("inline broker accepts and runs in order", func(t *testing.T) {
		rdb, ctx := newRedis(t)
		b := runtime.NewInlineBroker()
		b.UseRedis(rdb) // the Recorder fences its commits with the lease, in Redis
		if !b.Capabilities().Has(runtime.StreamPartitioning) {
			t.Fatal("the inline broker does not advertise StreamPartitioning")
		}
		if err := b.Register((&Recorder{Redis: rdb, Instance: "inline"}).SeqbyRegistration()); err != nil {
			t.Fatalf("Register on the inline broker: %v", err)
		}
		const n = 8
		for _, s := range interleave(steps("client-A", 1, n), steps("client-B", 1, n)) {
			if err := b.Publish(ctx, s); err != nil {
				t.Fatalf("Publish %+v: %v", s, err)
			}
		}
		c := &cluster{t: t, ctx: ctx, rdb: rdb}
		for _, k := range []string{"client-A", "client-B"} {
			if got := c.appliedSeqs(k); !slices.Equal(got, []int{1, 2, 3, 4, 5, 6, 7, 8}) {
				t.Errorf("%s applied %v under the inline broker, want 1..%d", k, got, n)
			}
			c.checkExclusive(k, nil)
		}
	})
}

// TestOneKeyPerCategory: two registrations that partition one category by
// different fields conflict at registration, in whichever order and
// whichever call they come; nothing of the refused call is kept.
func TestOneKeyPerCategory(t *testing.T) {
	recorder := (&Recorder{}).SeqbyRegistration()
	byTenant := keyedBy("example.com/other.ByTenant", "tenant_id")
	sameKey := keyedBy("example.com/other.AlsoByClient", "client_id")
	pmRoute := stepRoute()
	pmRoute.PartitionField, pmRoute.CorrelateField = "order_id", "order_id"
	pmRoute.Correlate = func(any) (string, error) { return "o-1", nil }
	pm := runtime.Registration{Name: "example.com/other.Flow", Kind: runtime.ProcessManager, Sequential: true,
		NewState: func() any { return new(struct{}) }, Routes: []runtime.Route{pmRoute}}

	type broker interface {
		Register(...runtime.Registration) error
		Registrations() []runtime.Registration
	}
	brokers := []struct {
		name string
		new  func(t *testing.T) broker
	}{
		{"engine", func(t *testing.T) broker {
			rdb, _ := newRedis(t)
			e, err := runtime.NewEngine(rdb, runtime.Options{OwnerID: "reg"})
			if err != nil {
				t.Fatal(err)
			}
			return e
		}},
		{"inline", func(*testing.T) broker { return runtime.NewInlineBroker() }},
	}
	tests := []struct {
		name          string
		first, second []runtime.Registration
		conflict      bool
	}{
		{"keyed handlers, different keys", []runtime.Registration{recorder}, []runtime.Registration{byTenant}, true},
		{"keyed handlers, different keys, reverse order", []runtime.Registration{byTenant}, []runtime.Registration{recorder}, true},
		{"keyed handlers, different keys, one call", nil, []runtime.Registration{recorder, byTenant}, true},
		{"sequential pm correlated by another field", []runtime.Registration{recorder}, []runtime.Registration{pm}, true},
		{"keyed handler after a sequential pm", []runtime.Registration{pm}, []runtime.Registration{recorder}, true},
		{"keyed handlers, same key", []runtime.Registration{recorder}, []runtime.Registration{sameKey}, false},
	}
	for _, b := range brokers {
		for _, tc := range tests {
			t.Run(b.name+"/"+tc.name, func(t *testing.T) {
				br := b.new(t)
				if len(tc.first) > 0 {
					if err := br.Register(tc.first...); err != nil {
						t.Fatalf("first Register: %v", err)
					}
				}
				err := br.Register(tc.second...)
				if !tc.conflict {
					if err != nil {
						t.Fatalf("Register of an agreeing key: %v", err)
					}
					return
				}
				if !errors.Is(err, runtime.ErrKeyConflict) || !errors.Is(err, runtime.ErrRegistration) {
					t.Fatalf("Register: %v, want ErrKeyConflict (and ErrRegistration)", err)
				}
				if got := len(br.Registrations()); got != len(tc.first) {
					t.Fatalf("%d registrations after the refused call, want %d: nothing of it may be kept", got, len(tc.first))
				}
			})
		}
	}
}

// TestUnsafeKeysFailPublish: a nil, empty, colon-bearing, lane-token or
// sentinel key fails the publish call and writes nothing: no stream entry,
// no index entry, no signal.
func TestUnsafeKeysFailPublish(t *testing.T) {
	str := func(s string) *string { return &s }
	tests := []struct {
		name string
		msg  runtime.Message
		opts runtime.PublisherOptions
		rule error
	}{
		{"nil", Tagged{TagID: nil}, runtime.PublisherOptions{}, runtime.ErrNullKey},
		{"empty", Step{ClientID: "", Seq: 1}, runtime.PublisherOptions{}, runtime.ErrEmptyKey},
		{"empty through a pointer", Tagged{TagID: str("")}, runtime.PublisherOptions{}, runtime.ErrEmptyKey},
		{"colon", Step{ClientID: "client:A", Seq: 1}, runtime.PublisherOptions{}, runtime.ErrKeyColon},
		{"brace", Step{ClientID: "{client-A}", Seq: 1}, runtime.PublisherOptions{}, runtime.ErrKeyBrace},
		{"dlq", Step{ClientID: "dlq", Seq: 1}, runtime.PublisherOptions{}, runtime.ErrReservedKey},
		{"backfill", Step{ClientID: "backfill", Seq: 1}, runtime.PublisherOptions{}, runtime.ErrReservedKey},
		{"configured backfill suffix", Step{ClientID: "replay", Seq: 1}, runtime.PublisherOptions{BackfillSuffix: "replay"}, runtime.ErrReservedKey},
		{"__partitions__", Step{ClientID: "__partitions__", Seq: 1}, runtime.PublisherOptions{}, runtime.ErrSentinelKey},
		{"__partitions__ through a pointer", Tagged{TagID: str("__partitions__")}, runtime.PublisherOptions{}, runtime.ErrSentinelKey},
		{"other sentinel", Step{ClientID: "__signal__", Seq: 1}, runtime.PublisherOptions{}, runtime.ErrSentinelKey},
	}
	client, ctx := newRedis(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := runtime.NewPublisher(client, tc.opts).Publish(ctx, tc.msg)
			if !errors.Is(err, runtime.ErrInvalidKey) || !errors.Is(err, tc.rule) {
				t.Fatalf("Publish: %v, want ErrInvalidKey and %v", err, tc.rule)
			}
			cat := tc.msg.StreamCategory()
			for _, k := range []string{rdb.IndexKey(cat), rdb.SignalKey(cat), cat} {
				if client.Exists(ctx, k).Val() != 0 {
					t.Errorf("%s exists after a refused publish", k)
				}
			}
			if ks, _ := keys(ctx, client, "*"); len(ks) > 0 {
				t.Fatalf("Redis holds %v after a refused publish", ks)
			}
		})
	}
	// The same keys are refused by the inline broker before any handler
	// runs.
	t.Run("inline broker", func(t *testing.T) {
		b := runtime.NewInlineBroker()
		if err := b.Register((&Recorder{Redis: client, Instance: "inline"}).SeqbyRegistration()); err != nil {
			t.Fatal(err)
		}
		for _, tc := range tests {
			if tc.opts.BackfillSuffix != "" {
				continue
			}
			if err := b.Publish(ctx, tc.msg); !errors.Is(err, runtime.ErrInvalidKey) {
				t.Errorf("inline Publish of %s key: %v, want ErrInvalidKey", tc.name, err)
			}
		}
		if ks, _ := keys(ctx, client, "*"); len(ks) > 0 {
			t.Fatalf("the handler ran for a refused key: Redis holds %v", ks)
		}
	})
}
