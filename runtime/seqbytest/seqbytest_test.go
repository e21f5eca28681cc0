package seqbytest_test

import (
	"bytes"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/seqby/seqby/internal/redistest"
	"github.com/seqby/seqby/runtime"
	"github.com/seqby/seqby/runtime/seqbytest"
)

// deposited is a message of the partitioned category "account".
type deposited struct {
	Account string `json:"account"`
	Seq     int    `json:"seq"`
	Bad     bool   `json:"bad,omitempty"`
}

func (*deposited) StreamCategory() string { return "account" }
func (d *deposited) PartitionKey() (string, error) {
	return runtime.Key("account", "Account", d.Account)
}

// ledger is a handler that applies deposits only under a lease, fenced
// in Redis when it has one (docs/runtime.md's advice for effects that must
// not land late).
type ledger struct {
	mu      sync.Mutex
	applied map[string][]int
	redis   redis.UniversalClient // nil: the fence is only the lease's presence
}

var errBad = errors.New("bad deposit")

// fencedIncr applies an effect only while the lease is the caller's.
var fencedIncr = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return redis.error_reply('FENCED') end
return redis.call('INCR', KEYS[2])`)

func (l *ledger) handle(ctx context.Context, d *deposited) error {
	li, ok := runtime.LeaseFromContext(ctx)
	if !ok {
		return errors.New("no lease: refusing an unfenced effect")
	}
	if d.Bad {
		return errBad
	}
	l.mu.Lock()
	rc := l.redis
	l.mu.Unlock()
	if rc != nil {
		// The count key shares the lease key's hash tag (the account).
		if err := fencedIncr.Run(ctx, rc, []string{li.LeaseKey, "applied:{" + d.Account + "}"}, li.Token).Err(); err != nil {
			return err
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.applied[d.Account] = append(l.applied[d.Account], d.Seq)
	return nil
}

func (l *ledger) seqs(account string) []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.applied[account])
}

// registration is what seqgen would generate for ledger.
func (l *ledger) registration() runtime.Registration {
	return runtime.Registration{Name: "ledger", Kind: runtime.EventHandler, Key: "Account", Sequential: true,
		Retry: &runtime.RetryPolicy{MaxRetries: 1},
		Routes: []runtime.Route{{
			Category: "account", Type: "deposited", PartitionField: "Account",
			Decode: func(c runtime.Codec, p []byte) (any, error) {
				var d deposited
				return &d, c.Unmarshal(p, &d)
			},
			PartitionKey: func(m any) (string, error) { return m.(*deposited).PartitionKey() },
			Invoke:       func(ctx context.Context, _ any, m any) error { return l.handle(ctx, m.(*deposited)) },
		}}}
}

func TestBrokerRunsFencedHandlersAndHalts(t *testing.T) {
	l := &ledger{applied: map[string][]int{}}
	b := seqbytest.NewBroker(t, l.registration())
	ctx := context.Background()
	for _, d := range []*deposited{{Account: "a", Seq: 1}, {Account: "a", Seq: 2, Bad: true}, {Account: "a", Seq: 3}, {Account: "b", Seq: 1}} {
		err := b.Publish(ctx, d)
		if want := d.Bad; (err != nil) != want || (want && !errors.Is(err, errBad)) {
			t.Fatalf("publish %+v: %v", d, err)
		}
	}
	if got := fmt.Sprint(l.seqs("a"), l.seqs("b")); got != "[1] [1]" {
		t.Fatalf("applied %s, want a's third held behind its halted second", got)
	}
	if hs := b.Halts(); len(hs) != 1 || hs[0].Key != "a" {
		t.Fatalf("halts %+v", hs)
	}
	if err := b.Skip(ctx, "ledger", "a"); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(l.seqs("a")); got != "[1 3]" {
		t.Fatalf("a applied %s after the skip, want [1 3]", got)
	}
}

// TestBrokerWritesLeasesInRedis: with UseRedis, a handler that fences
// its effect in Redis (GET(LeaseKey) == Token) commits under the broker.
func TestBrokerWritesLeasesInRedis(t *testing.T) {
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { c.Close() })
	l := &ledger{applied: map[string][]int{}, redis: c}
	b := seqbytest.NewBroker(t, l.registration())
	b.UseRedis(c)
	ctx := context.Background()
	if err := b.Publish(ctx, &deposited{Account: "a", Seq: 1}); err != nil {
		t.Fatal(err)
	}
	if n, _ := c.Get(ctx, "applied:{a}").Int(); n != 1 || fmt.Sprint(l.seqs("a")) != "[1]" {
		t.Fatalf("fenced count %d, applied %v", n, l.seqs("a"))
	}
}

// TestStartEngine runs the handler through a real engine on the embedded
// Redis, fenced there for real.
func TestStartEngine(t *testing.T) {
	l := &ledger{applied: map[string][]int{}}
	e := seqbytest.StartEngine(t, []runtime.Registration{l.registration()})
	l.mu.Lock()
	l.redis = e.Client
	l.mu.Unlock()
	for i := 1; i <= 5; i++ {
		e.Publish(&deposited{Account: "a", Seq: i}, &deposited{Account: "b", Seq: i})
	}
	e.WaitDrained()
	for _, acc := range []string{"a", "b"} {
		if got := fmt.Sprint(l.seqs(acc)); got != "[1 2 3 4 5]" {
			t.Errorf("%s applied %s", acc, got)
		}
	}
}

// TestStartEngineOnRedisServer runs on a real redis-server given by URL.
func TestStartEngineOnRedisServer(t *testing.T) {
	s := redistest.New(t)
	l := &ledger{applied: map[string][]int{}}
	e := seqbytest.StartEngine(t, []runtime.Registration{l.registration()}, seqbytest.Options{RedisURL: "redis://" + s.Addr})
	l.mu.Lock()
	l.redis = e.Client
	l.mu.Unlock()
	e.Publish(&deposited{Account: "a", Seq: 1}, &deposited{Account: "a", Seq: 2})
	e.WaitDrained()
	if got := fmt.Sprint(l.seqs("a")); got != "[1 2]" {
		t.Errorf("applied %s", got)
	}
	e.Publish(&deposited{Account: "a", Seq: 3, Bad: true})
	e.Eventually("the bad deposit to halt its account", func() bool { return len(e.Status().Halted()) == 1 })
}

// gobCodec is a non-JSON codec (a protobuf codec in a real service) that
// counts what it encodes.
type gobCodec struct{ marshalled *atomic.Int64 }

func (c gobCodec) Marshal(v any) ([]byte, error) {
	c.marshalled.Add(1)
	var b bytes.Buffer
	err := gob.NewEncoder(&b).Encode(v)
	return b.Bytes(), err
}

func (c gobCodec) Unmarshal(data []byte, v any) error {
	return gob.NewDecoder(bytes.NewReader(data)).Decode(v)
}

// TestNewBrokerCodec: the broker encodes and decodes with the codec it is
// given, and with JSON when it is nil or NewBroker's.
func TestNewBrokerCodec(t *testing.T) {
	var n atomic.Int64
	for _, tc := range []struct {
		name      string
		codec     runtime.Codec // nil: NewBroker
		marshaled int64
	}{
		{"NewBroker", nil, 0},
		{"nil codec", runtime.Codec(nil), 0},
		{"gob", gobCodec{&n}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n.Store(0)
			l := &ledger{applied: map[string][]int{}}
			var b *runtime.InlineBroker
			if tc.name == "NewBroker" {
				b = seqbytest.NewBroker(t, l.registration())
			} else {
				b = seqbytest.NewBrokerCodec(t, tc.codec, l.registration())
			}
			for i := 1; i <= 2; i++ {
				if err := b.Publish(context.Background(), &deposited{Account: "a", Seq: i}); err != nil {
					t.Fatal(err)
				}
			}
			if got := fmt.Sprint(l.seqs("a")); got != "[1 2]" {
				t.Errorf("applied %s, want [1 2]", got)
			}
			if got := n.Load(); got != tc.marshaled {
				t.Errorf("the gob codec encoded %d messages, want %d", got, tc.marshaled)
			}
		})
	}
}

// TestEmbeddedRedis: a server to connect to until stop.
func TestEmbeddedRedis(t *testing.T) {
	url, stop := seqbytest.EmbeddedRedis()
	ctx := context.Background()
	c, err := runtime.Connect(ctx, url)
	if err != nil {
		stop()
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	stop()
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	if conn, err := net.Dial("tcp", opts.Addr); err == nil {
		conn.Close()
		t.Fatal("the embedded Redis still listens after stop")
	}
}

// captureTB is a test whose log lines, through Log or Output, are kept.
type captureTB struct {
	testing.TB
	mu  sync.Mutex
	out bytes.Buffer
}

func (c *captureTB) Log(args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprintln(&c.out, args...)
}

func (c *captureTB) Logf(format string, args ...any) { c.Log(fmt.Sprintf(format, args...)) }

func (c *captureTB) Output() io.Writer { return writerFunc(c.write) }

func (c *captureTB) write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.Write(p)
}

func (c *captureTB) lines() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Split(strings.TrimSpace(c.out.String()), "\n")
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// nextLine is the line after its caller's.
func nextLine() string {
	_, file, line, _ := goruntime.Caller(1)
	return fmt.Sprintf("%s:%d", filepath.Base(file), line+1)
}

// startThroughHelper is a user's helper around StartEngine.
func startThroughHelper(t testing.TB, reg runtime.Registration) *seqbytest.Engine {
	t.Helper()
	return seqbytest.StartEngine(t, []runtime.Registration{reg})
}

// TestEngineLogsNameTheTest: StartEngine on the embedded Redis logs only
// what matters (no warning that it could not check the maxmemory-policy:
// that Redis has no CONFIG), and every line it logs, from the engine's
// goroutines, names the line of the test (here the t.Run closure) that
// started the engine, not the kit's log sink, as t.Log does for a test
// whose helpers call t.Helper: through the user's own functions too.
func TestEngineLogsNameTheTest(t *testing.T) {
	t.Setenv("SEQBYTEST_REDIS_URL", "") // the embedded Redis
	for _, tc := range []struct {
		name  string
		start func(t testing.TB, reg runtime.Registration) *seqbytest.Engine
	}{
		{"direct", func(t testing.TB, reg runtime.Registration) *seqbytest.Engine {
			return seqbytest.StartEngine(t, []runtime.Registration{reg})
		}},
		{"through a helper", startThroughHelper},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ct := &captureTB{TB: t}
			l := &ledger{applied: map[string][]int{}}
			pos := nextLine()
			e := tc.start(ct, l.registration())
			e.Publish(&deposited{Account: "a", Seq: 1}, &deposited{Account: "a", Seq: 2, Bad: true})
			e.Eventually("the bad deposit to halt its account", func() bool { return len(e.Status().Halted()) == 1 })
			e.Stop()
			lines := ct.lines()
			var halted bool
			for _, line := range lines {
				if !strings.HasPrefix(line, pos+": ") {
					t.Errorf("a log line does not start with the test's position %s:\n%s", pos, line)
				}
				if strings.Contains(line, "maxmemory") {
					t.Errorf("the embedded Redis's missing CONFIG was logged:\n%s", line)
				}
				halted = halted || strings.Contains(line, "ERROR seqby: partition halted")
			}
			if !halted {
				t.Errorf("no line logs the halt; logged:\n%s", strings.Join(lines, "\n"))
			}
		})
	}
}
