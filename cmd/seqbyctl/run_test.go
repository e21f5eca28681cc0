package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	waitpoll "github.com/seqby/seqby/internal/poll"
	"github.com/seqby/seqby/internal/redistest"
	"github.com/seqby/seqby/runtime"
	"github.com/seqby/seqby/runtime/inspect"
)

// placed is a message of the partitioned category "shop".
type placed struct {
	Client string `json:"client"`
	Seq    int    `json:"seq"`
	Poison bool   `json:"poison,omitempty"`
}

func (*placed) StreamCategory() string { return "shop" }
func (m *placed) PartitionKey() (string, error) {
	return runtime.Key("shop", "Client", m.Client)
}

// applied records the seqs the handler applied, per client.
type applied struct {
	mu   sync.Mutex
	seqs map[string][]int
}

func (a *applied) get(client string) []int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.seqs[client])
}

// haltingRegistration is handler name on category "shop": it applies
// placed messages in order per client and fails (no retries with
// haltingOptions) on a poison one, until cured is set: a fix deployed.
func haltingRegistration(name string, a *applied, cured *atomic.Bool) runtime.Registration {
	return runtime.Registration{Name: name, Kind: runtime.EventHandler, Key: "Client", Sequential: true,
		Routes: []runtime.Route{{
			Category: "shop", Type: "placed", PartitionField: "Client",
			Decode: func(cd runtime.Codec, p []byte) (any, error) {
				var m placed
				return &m, cd.Unmarshal(p, &m)
			},
			PartitionKey: func(m any) (string, error) { return m.(*placed).PartitionKey() },
			Invoke: func(_ context.Context, _ any, m any) error {
				p := m.(*placed)
				if p.Poison && !cured.Load() {
					return errors.New("poison")
				}
				a.mu.Lock()
				a.seqs[p.Client] = append(a.seqs[p.Client], p.Seq)
				a.mu.Unlock()
				return nil
			},
		}}}
}

// haltingOptions halt a partition on its first failure and move fast.
func haltingOptions() runtime.Options {
	return runtime.Options{OwnerID: "w1", LeaseTTL: time.Second,
		HeartbeatInterval: 150 * time.Millisecond, DiscoveryInterval: 50 * time.Millisecond,
		BlockTimeout: 200 * time.Millisecond, Retry: runtime.RetryPolicy{MaxRetries: -1},
		// One entry a read, so the halted partition holds just its head
		// pending and the inspection below is exact.
		ReadAhead: 1,
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// runEngine starts an engine running reg on c; stop stops it.
func runEngine(c redis.UniversalClient, reg runtime.Registration) (stop func(), err error) {
	e, err := runtime.NewEngine(c, haltingOptions())
	if err != nil {
		return nil, err
	}
	if err := e.Register(reg); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	return func() { cancel(); <-done }, nil
}

// startHalting runs an engine whose handler "ops" fails (no retries) on a
// poison message, as seqgen's registration would run it.
func startHalting(t *testing.T, c redis.UniversalClient) *applied {
	t.Helper()
	a := &applied{seqs: map[string][]int{}}
	stop, err := runEngine(c, haltingRegistration("ops", a, new(atomic.Bool)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return a
}

// eventually polls cond until it holds; the test fails if it does not
// within the duration.
var eventually = waitpoll.Until

// Usage errors exit 2 before touching Redis (none is running here).
func TestRunUsage(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	tests := []struct {
		name    string
		args    []string
		code    int
		wantOut string
		wantErr string
	}{
		{"help", []string{"-h"}, 0, "usage: seqbyctl", ""},
		{"no command", nil, 2, "", "no command"},
		{"unknown command", []string{"-redis", "redis://127.0.0.1:1", "unhalt"}, 2, "", `unknown command "unhalt"`},
		{"unknown flag", []string{"-bogus", "halted"}, 2, "", "flag provided but not defined"},
		{"no redis", []string{"halted"}, 2, "", "pass -redis URL or set REDIS_URL"},
		{"bad redis url", []string{"-redis", "http://x", "halted"}, 2, "", "invalid URL scheme"},
		{"inspect without handler", []string{"-redis", "redis://127.0.0.1:1", "inspect", "-stream", "shop:{a}"}, 2, "", "missing -handler"},
		{"skip without id", []string{"-redis", "redis://127.0.0.1:1", "skip", "-handler", "ops", "-stream", "shop:{a}"}, 2, "", "missing -id"},
		{"dlq without anything", []string{"-redis", "redis://127.0.0.1:1", "dlq"}, 2, "", "missing -handler, -stream, -id"},
		{"stray argument", []string{"-redis", "redis://127.0.0.1:1", "halted", "ops"}, 2, "", "unexpected arguments"},
		{"halted takes no -id", []string{"-redis", "redis://127.0.0.1:1", "halted", "-id", "1-0"}, 2, "", "flag provided but not defined: -id"},
		{"unreachable redis fails", []string{"-redis", "redis://127.0.0.1:1", "-timeout", "2s", "halted"}, 1, "", "seqbyctl halted:"},
		{"flags after the command", []string{"halted", "-redis", "redis://127.0.0.1:1", "-timeout=1s"}, 1, "", "seqbyctl halted:"},
		{"help after the command", []string{"dlq", "replay", "-h"}, 0, "usage: seqbyctl dlq replay -stream DLQSTREAM -id ID", ""},
		{"help command", []string{"help"}, 0, "dlq replay", ""},
		{"help of a command", []string{"help", "partitions"}, 0, "usage: seqbyctl partitions -handler NAME", ""},
		{"help of dlq", []string{"help", "dlq"}, 0, "usage: seqbyctl dlq drop", ""},
		{"replay help says how a handler tells a replay", []string{"help", "dlq", "replay"}, 0, "must apply a replay meant for it\n(Replay.Handler) anyway", ""},
		{"inspect help names -category", []string{"inspect", "-h"}, 0, "-category CATEGORY", ""},
		{"help of an unknown command", []string{"help", "partitoins"}, 2, "", `unknown command "partitoins" (did you mean "partitions"?)`},
		{"version", []string{"-version"}, 0, "seqbyctl ", ""},
		{"version after a command", []string{"audit", "-version"}, 0, "seqbyctl ", ""},
		{"unknown command suggests", []string{"hlated"}, 2, "", `unknown command "hlated" (did you mean "halted"?)`},
		{"unknown dlq word", []string{"-redis", "redis://127.0.0.1:1", "dlq", "requeue", "-handler", "h", "-stream", "s", "-id", "1-0"}, 2, "", `unknown command "dlq requeue"; the dlq commands are drop, list, move, replay`},
		{"mistyped dlq word", []string{"dlq", "lst", "-handler", "h"}, 2, "", `unknown command "dlq lst" (did you mean "list"?)`},
		{"short unknown word", []string{"ls"}, 2, "", `unknown command "ls"; run seqbyctl help`},
		{"empty -handler", []string{"halted", "-handler="}, 2, "", "-handler given an empty value"},
		{"-help=false is no help", []string{"halted", "-help=false"}, 2, "", "no Redis"},
		{"replay takes no -handler", []string{"-redis", "redis://127.0.0.1:1", "dlq", "replay", "-handler", "h"}, 2, "", "flag provided but not defined: -handler"},
		{"replay without id", []string{"-redis", "redis://127.0.0.1:1", "dlq", "replay", "-stream", "s:{k}:dlq"}, 2, "", "missing -id"},
		{"audit -n 0", []string{"-redis", "redis://127.0.0.1:1", "audit", "-n", "0"}, 2, "", "want at least 1"},
		{"partitions without handler", []string{"-redis", "redis://127.0.0.1:1", "partitions"}, 2, "", "missing -handler"},
		{"-category with another category's stream", []string{"-redis", "redis://127.0.0.1:1", "inspect", "-handler", "h", "-category", "order", "-stream", "shop:{a}"}, 2, "",
			`-stream "shop:{a}" is not a partition stream of -category order: give the bare key with -category (-category order -stream KEY), or the stream alone`},
		{"-category with braces", []string{"-redis", "redis://127.0.0.1:1", "skip", "-handler", "h", "-category", "order:{a}", "-stream", "a", "-id", "1-0"}, 2, "", "a category has no braces"},
		{"dlq replay takes no -category", []string{"-redis", "redis://127.0.0.1:1", "dlq", "replay", "-category", "shop", "-stream", "s:{k}:dlq", "-id", "1-0"}, 2, "", "flag provided but not defined: -category"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run(tt.args, &out, &errb); code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, out.String(), errb.String())
			}
			if !strings.Contains(out.String(), tt.wantOut) || !strings.Contains(errb.String(), tt.wantErr) {
				t.Fatalf("stdout %q (want %q)\nstderr %q (want %q)", out.String(), tt.wantOut, errb.String(), tt.wantErr)
			}
		})
	}
}

// An engine halts shop:a on a poison head; the commands run in order
// against it, as an operator would: list, inspect, a refused skip, the
// skip, then the partition continues.
// It runs on a single Redis, on a three-master cluster, where REDIS_URL
// names one node, and on a primary with a replica behind two sentinels,
// where REDIS_URL names the sentinels.
func TestRunOnHaltedPartition(t *testing.T) {
	t.Run("standalone", func(t *testing.T) {
		srv := redistest.New(t)
		c := redis.NewClient(&redis.Options{Addr: srv.Addr})
		t.Cleanup(func() { c.Close() })
		runOnHaltedPartition(t, c, "redis://"+srv.Addr)
	})
	t.Run("cluster", func(t *testing.T) {
		cl := redistest.NewCluster(t, 3)
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
		t.Cleanup(func() { c.Close() })
		runOnHaltedPartition(t, c, "redis://"+cl.Nodes[2].Addr)
	})
	t.Run("sentinel", func(t *testing.T) {
		s := redistest.NewSentinel(t, 1, 2)
		c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: s.Name, SentinelAddrs: s.SentinelAddrs()})
		t.Cleanup(func() { c.Close() })
		addrs := s.SentinelAddrs()
		runOnHaltedPartition(t, c, "redis://"+addrs[0]+"?master_name="+s.Name+"&addr="+addrs[1])
	})
}

func runOnHaltedPartition(t *testing.T, c redis.UniversalClient, url string) {
	ctx := context.Background()
	t.Setenv("REDIS_URL", url)
	a := startHalting(t, c)
	pub := runtime.NewPublisher(c)
	for _, m := range []*placed{{Client: "a", Seq: 1, Poison: true}, {Client: "a", Seq: 2}, {Client: "a", Seq: 3},
		{Client: "b", Seq: 1, Poison: true}, {Client: "b", Seq: 2}} {
		if err := pub.Publish(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(stream string) []string {
		msgs, err := c.XRange(ctx, stream, "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range msgs {
			out = append(out, m.ID)
		}
		return out
	}
	aIDs, bIDs := ids("shop:{a}"), ids("shop:{b}")
	eventually(t, 20*time.Second, "two halts recorded", func() bool {
		hs, _ := inspect.New(c).Halts(ctx, "ops")
		return len(hs) == 2
	})

	steps := []struct {
		name    string
		args    []string
		code    int
		wantOut []string
		wantErr string
	}{
		{"list all: halts exit 1", []string{"halted"}, 1, []string{"shop:{a}", aIDs[0], "shop:{b}", bIDs[0], "poison"}, ""},
		{"list a handler, flags after the command", []string{"halted", "-handler", "ops", "-json"}, 1, []string{`"entry_id": "` + aIDs[0]}, ""},
		{"list an unknown handler", []string{"halted", "-handler", "opz"}, 1, nil, `unknown handler "opz" (did you mean "ops"?); known handlers: ops`},
		{"partitions", []string{"partitions", "-handler", "ops"}, 0, []string{"shop:{a}", "w1", "yes"}, ""},
		{"inspect", []string{"inspect", "-handler", "ops", "-stream", "shop:{a}"}, 0,
			[]string{"halted     yes", "held by w1", "length 3, 1 pending", "head       " + aIDs[0], `"poison":true`}, ""},
		{"inspect as json", []string{"-json", "inspect", "-handler", "ops", "-stream", "shop:{a}"}, 0, []string{`"entry_id"`, `"lease_key"`}, ""},
		{"inspect a bare key with -category", []string{"inspect", "-handler", "ops", "-category", "shop", "-stream", "a"}, 0,
			[]string{"partition  shop:{a}\n", "halted     yes", "head       " + aIDs[0]}, ""},
		{"inspect a bare key", []string{"inspect", "-handler", "ops", "-stream", "a"}, 1, nil,
			`no such partition "a" of handler ops (did you mean "shop:{a}"?)`},
		{"a bare key says how", []string{"inspect", "-handler", "ops", "-stream", "a"}, 1, nil, "for the bare key a, add -category CATEGORY"},
		{"skip a non-head", []string{"skip", "-handler", "ops", "-stream", "shop:{a}", "-id", aIDs[1]}, 1, nil, "not the halted partition's head"},
		{"skip unknown partition", []string{"skip", "-handler", "ops", "-stream", "shop:{zz}", "-id", aIDs[0]}, 1, nil, `no such partition "shop:{zz}" of handler ops (did you mean`},
		{"skip the head, dry run", []string{"skip", "-handler", "ops", "-stream", "shop:{a}", "-id", aIDs[0], "-dry-run"}, 0, []string{"dry run: would skip " + aIDs[0]}, ""},
		{"skip the head", []string{"skip", "-handler", "ops", "-stream", "shop:{a}", "-id", aIDs[0]}, 0, []string{"skipped " + aIDs[0] + " on shop:{a}"}, ""},
		{"skip it again", []string{"skip", "-handler", "ops", "-stream", "shop:{a}", "-id", aIDs[0]}, 1, nil, "not halted"},
		{"inspect a resolved partition", []string{"inspect", "-handler", "ops", "-stream", "shop:{a}"}, 0, []string{"halted     no"}, ""},
		{"dlq the other head", []string{"dlq", "-handler", "ops", "-stream", "shop:{b}", "-id", bIDs[0]}, 0, []string{"to shop:{b}:dlq as"}, ""},
	}
	for _, s := range steps {
		var out, errb bytes.Buffer
		code := run(s.args, &out, &errb)
		t.Logf("seqbyctl %s\n%s%s", strings.Join(s.args, " "), out.String(), errb.String())
		if code != s.code || !strings.Contains(errb.String(), s.wantErr) {
			t.Fatalf("%s: exit %d (want %d)\nstdout: %s\nstderr: %s (want %q)", s.name, code, s.code, out.String(), errb.String(), s.wantErr)
		}
		for _, w := range s.wantOut {
			if !strings.Contains(out.String(), w) {
				t.Fatalf("%s: stdout lacks %q:\n%s", s.name, w, out.String())
			}
		}
		if s.name == "inspect as json" && !json.Valid(out.Bytes()) {
			t.Fatalf("inspect -json is not JSON: %s", out.String())
		}
	}
	eventually(t, 20*time.Second, "a and b continue", func() bool {
		return slices.Equal(a.get("a"), []int{2, 3}) && slices.Equal(a.get("b"), []int{2})
	})
	var out bytes.Buffer
	if code := run([]string{"-json", "halted"}, &out, io.Discard); code != 0 || strings.TrimSpace(out.String()) != "[]" {
		t.Fatalf("halted after resolving: exit %d, %s", code, out.String())
	}
	if n, _ := c.XLen(ctx, "shop:{b}:dlq").Result(); n != 1 {
		t.Fatalf("shop:{b}:dlq has %d entries, want the moved head", n)
	}
}

// Keys and fields from Redis are printed as they are only when they are
// printable text; anything else is quoted (issue #11, finding 7).
func TestSafeQuotesWhatIsNotPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"order:{client-1}": "order:{client-1}",
		"Zürich":           "Zürich",
		"a\x1b[2Jb":        `"a\x1b[2Jb"`,
		"o-\xff":           `"o-\xff"`,
		"x\ny":             `"x\ny"`,
	} {
		if got := safe(in); got != want {
			t.Errorf("safe(%q) = %s, want %s", in, got, want)
		}
	}
}

// A pause whose mark was stored but whose wait Pause could not settle
// (the engines' admitted confirmation age unreadable until -timeout ran
// out: here the key holds a string) is recorded in the audit stream all
// the same, and the command fails saying so; the same pause run again
// finds the mark and settles it (seen before: the command failed and
// recorded nothing, though the mark was stored).
func TestPauseUnsettledIsAudited(t *testing.T) {
	ctx := context.Background()
	srv := redistest.New(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { c.Close() })
	t.Setenv("REDIS_URL", "redis://"+srv.Addr)
	startHalting(t, c)
	if err := runtime.NewPublisher(c).Publish(ctx, &placed{Client: "a", Seq: 1}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the engine to register ops", func() bool {
		_, err := inspect.New(c).Handler(ctx, "ops")
		return err == nil
	})
	if err := c.HSet(ctx, "seqby:__control__:ops", "admit:not-an-age|x", "99999999999999").Err(); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := run([]string{"-timeout", "1s", "pause", "-handler", "ops", "-stream", "shop:{a}", "-as", "alice"}, &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "run the same pause again") || !strings.Contains(out.String(), "audit entry") {
		t.Fatalf("pause with the admitted age unreadable: exit %d (want 1)\nstdout: %s\nstderr: %s", code, out.String(), errb.String())
	}
	entries, err := c.XRange(ctx, "seqby:__audit__", "-", "+").Result()
	if err != nil || len(entries) != 1 || !strings.Contains(fmt.Sprint(entries[0].Values), "unsettled") {
		t.Fatalf("the audit stream holds %v (%v); want the unsettled pause", entries, err)
	}
	if err := c.HDel(ctx, "seqby:__control__:ops", "admit:not-an-age|x").Err(); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errb.Reset()
	if code := run([]string{"pause", "-handler", "ops", "-stream", "shop:{a}"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "paused already") {
		t.Fatalf("the same pause again: exit %d\nstdout: %s\nstderr: %s", code, out.String(), errb.String())
	}
}
