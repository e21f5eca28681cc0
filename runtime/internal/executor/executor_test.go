package executor

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqby/seqby/runtime/internal/contract"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// Finding 2 of issue #11: with its context already done, an attempt never
// starts, however the slot and the context race.
func TestAttemptNeverStartsWithContextDone(t *testing.T) {
	var ran atomic.Int64
	x := New(fast(nil))
	x.Add(Handler{Name: "h", Kind: "handler", Routes: []Route{route(func(context.Context, any, *event) error { ran.Add(1); return nil })}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	en := entry("1-0", event{Client: "a", Seq: 1})
	for range 1000 {
		if out, _ := x.Handle(ctx, nil, x.Slots(), "h", "order", en, false); out != OutLost {
			t.Fatalf("outcome %v with a done context", out)
		}
	}
	if n := ran.Load(); n != 0 {
		t.Fatalf("the handler ran %d times of 1000 with its context already done", n)
	}
}

// A failing handler is retried MaxRetries times, then halts with its last
// error; a Permanent error halts at once; a panic is a failure; a halted
// head gets one attempt.
func TestHandleRetriesAndHalts(t *testing.T) {
	tests := []struct {
		name      string
		err       func() error
		halted    bool
		calls     int64
		reason    string
		permanent bool
		is        error
	}{
		{"retried, then halts", func() error { return errPoison }, false, 3, "handler failed 3 times", false, errPoison},
		{"permanent halts at once", func() error { return contract.Permanent(errPoison) }, false, 1, "handler failed permanently", true, errPoison},
		{"a panic is a failure", func() error { panic("boom") }, false, 3, "handler failed 3 times", false, contract.ErrHandlerPanic},
		{"a halted head: one attempt", func() error { return errPoison }, true, 1, "handler failed 1 times", false, errPoison},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var log syncBuffer
			x := New(fast(&log))
			var calls atomic.Int64
			x.Add(Handler{Name: "h", Kind: "handler", Routes: []Route{route(func(context.Context, any, *event) error {
				calls.Add(1)
				return tt.err()
			})}})
			en := entry("1-0", event{Client: "a", Seq: 1})
			out, h := x.Handle(context.Background(), nil, x.Slots(), "h", "order", en, tt.halted)
			if out != OutHalt || h == nil {
				t.Fatalf("outcome %v, halt %v; want a halt", out, h)
			}
			if h.Reason != tt.reason || h.Permanent != tt.permanent || !errors.Is(h.Err, tt.is) || calls.Load() != tt.calls {
				t.Errorf("halt %q (permanent %v, err %v) after %d calls; want %q (permanent %v) after %d",
					h.Reason, h.Permanent, h.Err, calls.Load(), tt.reason, tt.permanent, tt.calls)
			}
			if h.Handler != "h" || h.Category != "order" || h.Stream != en.Stream || h.EntryID != "1-0" ||
				h.MessageType != "event" || h.MessageID != "m-1-0" || h.Owner != "o1" || h.At.IsZero() {
				t.Errorf("halt %+v does not describe the entry", h)
			}
			if retries := strings.Count(log.String(), "retrying"); retries != int(tt.calls-1) {
				t.Errorf("%d retries logged after %d calls", retries, tt.calls)
			}
		})
	}
}

// A stop during a retry's backoff leaves the entry pending (OutStop); the
// gate's refusals map to their outcomes with no attempt run.
func TestHandleStopsAndGateRefusals(t *testing.T) {
	x := New(fast(nil))
	var calls atomic.Int64
	x.Add(Handler{Name: "h", Kind: "handler", Routes: []Route{route(func(context.Context, any, *event) error {
		calls.Add(1)
		return errPoison
	})}, Retry: &RetryPolicy{RetryBackoff: time.Hour, MaxBackoff: time.Hour}})
	en := entry("1-0", event{Client: "a", Seq: 1})
	stop := make(chan struct{})
	close(stop)
	if out, _ := x.Handle(context.Background(), stop, x.Slots(), "h", "order", en, false); out != OutStop || calls.Load() != 1 {
		t.Errorf("outcome %v after %d calls; want OutStop after 1", out, calls.Load())
	}
	for a, want := range map[Admission]Outcome{Refused: OutLost, Paused: OutPause, Stopped: OutStop} {
		if out, _ := x.Handle(context.Background(), nil, refuse(a), "h", "order", en, false); out != want {
			t.Errorf("gate %v: outcome %v, want %v", a, out, want)
		}
	}
	if calls.Load() != 1 {
		t.Errorf("%d calls: a refused attempt ran", calls.Load())
	}
}

// refuse is a Gate that admits nothing.
type refuse Admission

func (r refuse) Enter(context.Context) Admission { return Admission(r) }
func (r refuse) Leave(bool)                      { panic("Leave without Enter") }

// An attempt past its timeout has its context cancelled and fails with
// ErrHandlerTimeout; a body that ignores its context is logged as stuck;
// one that returns nil late succeeded.
func TestAttemptTimeout(t *testing.T) {
	var log syncBuffer
	x := New(fast(&log))
	x.Add(Handler{Name: "stuck", Timeout: 20 * time.Millisecond})
	x.Add(Handler{Name: "none", Timeout: -1})
	en := entry("1-0", event{Client: "a"})
	err := x.Attempt(context.Background(), "stuck", "order", en, 1, func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	})
	if !errors.Is(err, contract.ErrHandlerTimeout) || !strings.HasPrefix(err.Error(), "handler attempt timed out after 20ms: ") {
		t.Errorf("err %v, want ErrHandlerTimeout after 20ms", err)
	}
	if err := x.Attempt(context.Background(), "stuck", "order", en, 1, func(ctx context.Context) error {
		time.Sleep(60 * time.Millisecond) // past timeout + grace: reported
		return nil
	}); err != nil {
		t.Errorf("a late success failed: %v", err)
	}
	if !strings.Contains(log.String(), "ignores its context") || !strings.Contains(log.String(), "handler=stuck") {
		t.Errorf("no stuck report in %q", log.String())
	}
	for _, name := range []string{"none", "never added"} {
		if err := x.Attempt(context.Background(), name, "order", en, 1, func(ctx context.Context) error {
			if _, ok := ctx.Deadline(); ok {
				t.Errorf("%s: the attempt has a deadline", name)
			}
			return nil
		}); err != nil {
			t.Error(err)
		}
	}
}

// An attempt's context carries its MessageInfo, with the generation of
// the lease ctx carries, and a replay's origin.
func TestAttemptMessageInfo(t *testing.T) {
	x := New(Config{})
	en := entry("7-1", event{Client: "a"})
	en.Deliveries = 3
	en.Fields[rdb.FieldPublishedAt] = "2024-05-01T10:00:00.5Z"
	en.Fields[rdb.ReplayFieldDLQID] = "9-0"
	en.Fields[rdb.ReplayFieldOf] = "2-0"
	ctx := WithLease(context.Background(), LeaseInfo{Generation: 42})
	var got MessageInfo
	if err := x.Attempt(ctx, "h", "order", en, 2, func(ctx context.Context) error {
		got, _ = MessageFrom(ctx)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := time.Date(2024, 5, 1, 10, 0, 0, 5e8, time.UTC)
	if got.Stream != en.Stream || got.EntryID != "7-1" || got.MessageID != "m-7-1" || !got.PublishedAt.Equal(want) ||
		got.Attempt != 2 || got.Deliveries != 3 || got.Generation != 42 || got.Replay == nil || got.Replay.OriginalEntryID != "2-0" || got.Replay.DLQEntryID != "9-0" {
		t.Errorf("MessageInfo %+v (replay %+v)", got, got.Replay)
	}
}

// Decode: what is skipped, what halts and whether for good.
func TestDecode(t *testing.T) {
	ok := route(func(context.Context, any, *event) error { return nil })
	panics := ok
	panics.Decode = func([]byte) (any, error) { panic("bad") }
	empty := ok
	empty.Decode = func([]byte) (any, error) { return nil, nil }
	cfg := fast(nil)
	cfg.KnownType = func(category, typ string) bool { return typ == "other" }
	cfg.OtherBuilds = func(handler, category, typ string) []string {
		if typ == "newer" {
			return []string{"o3", "o2"}
		}
		return nil
	}
	x := New(cfg)
	x.SetStarts(map[Group]string{{Category: "order", Handler: "h"}: "1-5", {Category: "order", Handler: "panics"}: "0"})
	x.Add(Handler{Name: "h", Kind: "handler", Routes: []Route{ok}})
	x.Add(Handler{Name: "panics", Kind: "handler", Routes: []Route{panics}})
	x.Add(Handler{Name: "empty", Kind: "handler", Routes: []Route{empty}})
	typed := func(id, typ string) rdb.Entry {
		en := entry(id, event{Client: "a"})
		en.Fields[rdb.FieldType] = typ
		return en
	}
	bad := entry("5-0", event{Client: "a"})
	bad.Fields[rdb.FieldPayload] = "{"
	tests := []struct {
		name, handler string
		en            rdb.Entry
		skip          bool
		reason        string // "" no halt
		permanent     bool
		err           string
	}{
		{"decoded", "h", entry("2-0", event{Client: "a"}), false, "", false, ""},
		{"deleted while pending", "h", rdb.Entry{Stream: "order:{a}", ID: "2-0"}, true, "", false, ""},
		{"before the group started", "h", entry("1-0", event{Client: "a"}), true, "", false, ""},
		{"another handler's type", "h", typed("2-0", "other"), true, "", false, ""},
		{"unknown type", "h", typed("2-0", "nobody"), false, "unknown message type", true, `handler h has no route for type "nobody" on order`},
		{"another build's type", "h", typed("2-0", "newer"), false, "type routed by another build of this handler (a rolling deploy)", false, "live on o2, o3, routes it"},
		{"undecodable", "h", bad, false, "undecodable payload", true, "unexpected end of JSON input"},
		{"a group from the beginning", "panics", entry("1-0", event{Client: "a"}), false, "undecodable payload", true, "decode panicked: bad"},
		{"decode panics", "panics", entry("2-0", event{Client: "a"}), false, "undecodable payload", true, "decode panicked: bad"},
		{"decode returns nothing", "empty", entry("2-0", event{Client: "a"}), false, "undecodable payload", true, "decode of event returned no message"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, m, skip, h := x.Decode(tt.handler, "order", tt.en)
			if skip != tt.skip {
				t.Errorf("skip %v, want %v", skip, tt.skip)
			}
			if tt.reason == "" {
				if h != nil {
					t.Fatalf("halt %+v", h)
				}
				if !skip && m.(*event).Client != "a" {
					t.Errorf("decoded %+v", m)
				}
				return
			}
			if h == nil {
				t.Fatal("no halt")
			}
			if h.Reason != tt.reason || h.Permanent != tt.permanent || !strings.Contains(h.Err.Error(), tt.err) {
				t.Errorf("halt %q (permanent %v): %v; want %q (permanent %v) containing %q", h.Reason, h.Permanent, h.Err, tt.reason, tt.permanent, tt.err)
			}
		})
	}
	if _, _, _, h := x.Decode("h", "order", typed("2-0", "newer")); !errors.Is(h.Err, contract.ErrRoutedByAnotherBuild) {
		t.Errorf("another build's halt %v does not match ErrRoutedByAnotherBuild", h.Err)
	}
}

// A handler's RetryPolicy overrides the engine's field by field.
func TestPolicy(t *testing.T) {
	x := New(fast(nil))
	base := fast(nil).Retry
	x.Add(Handler{Name: "default"})
	x.Add(Handler{Name: "none", Retry: &RetryPolicy{MaxRetries: -1, HaltedRetryInterval: -1}})
	x.Add(Handler{Name: "more", Retry: &RetryPolicy{MaxRetries: 9, RetryBackoff: time.Second}})
	if got := x.Policy("default"); got != base {
		t.Errorf("default: %+v, want %+v", got, base)
	}
	if got := x.Policy("none"); got.MaxRetries != 0 || got.HaltedRetryInterval != -1 || got.RetryBackoff != base.RetryBackoff {
		t.Errorf("none: %+v", got)
	}
	if got := x.Policy("more"); got.MaxRetries != 9 || got.RetryBackoff != time.Second || got.MaxBackoff != base.MaxBackoff {
		t.Errorf("more: %+v", got)
	}
}

// A head read more than MaxDeliveries times halts for good.
func TestOverDelivered(t *testing.T) {
	cfg := fast(nil)
	cfg.MaxDeliveries = 3
	x := New(cfg)
	en := entry("1-0", event{Client: "a"})
	en.Deliveries = 3
	if h := x.OverDelivered("h", "order", en); h != nil {
		t.Errorf("3 deliveries halt: %+v", h)
	}
	en.Deliveries = 4
	if h := x.OverDelivered("h", "order", en); h == nil || !h.Permanent || h.Reason != "delivered too many times" {
		t.Errorf("4 deliveries: %+v, want a permanent halt", h)
	}
	if h := New(fast(nil)).OverDelivered("h", "order", en); h != nil {
		t.Errorf("no MaxDeliveries: %+v", h)
	}
}

// Correlate and Invoke turn a panic into an error.
func TestSafeCalls(t *testing.T) {
	rt := Route{Category: "order", Type: "event",
		Correlate: func(any) (string, error) { panic("no field") },
		Invoke:    func(context.Context, any, any) error { panic("boom") }}
	if _, err := Correlate(rt, nil); err == nil || err.Error() != "correlate panicked: no field" {
		t.Errorf("Correlate: %v", err)
	}
	if _, err := Correlate(Route{Category: "order", Type: "event"}, nil); err == nil || err.Error() != "route order/event has no Correlate; regenerate with seqgen" {
		t.Errorf("Correlate without one: %v", err)
	}
	if err := Invoke(context.Background(), rt, nil, nil); !errors.Is(err, contract.ErrHandlerPanic) || err.Error() != "handler panicked: boom" {
		t.Errorf("Invoke: %v", err)
	}
}
