package runtime

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/seqby/seqby/runtime/internal/telemetry"
	"github.com/seqby/seqby/runtime/internal/telemetry/telemetrytest"
)

// newMetricsReader collects an engine's metrics as an exporter would.
func newMetricsReader(t *testing.T) (*telemetrytest.Reader, *sdkmetric.MeterProvider) {
	return telemetrytest.New(t)
}

// TestMetricsAfterAScriptedRun runs a handler over three keys: one whose
// events all succeed, one whose first event fails twice (a retry, then a
// halt), one whose first event blocks with two more behind it; and reads
// the metrics an exporter would see.
func TestMetricsAfterAScriptedRun(t *testing.T) {
	c := newRedis(t)
	ctx := ctxT(t)
	mr, mp := newMetricsReader(t)
	block := make(chan struct{})
	h := keyedHandler("metrics", func(ctx context.Context, e *testEvent) error {
		switch {
		case e.Client == "bad":
			return errors.New("cannot apply")
		case e.Client == "slow" && e.Seq == 0:
			select {
			case <-block:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	opts := fastOptions("metrics-1")
	opts.MeterProvider, opts.Retry.MaxRetries, opts.Retry.HaltedRetryInterval = mp, 1, -1
	pub := NewPublisher(c)
	for i := range 5 {
		if err := pub.Publish(ctx, ev("ok", i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		if err := pub.Publish(ctx, ev("slow", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Publish(ctx, ev("bad", 0)); err != nil {
		t.Fatal(err)
	}
	startEngine(t, c, opts, h)

	handler := telemetry.AttrHandler.String("metrics")
	outcome := func(o string) func() bool {
		return func() bool {
			v, _ := mr.Value("seqby.events", handler, telemetry.AttrOutcome.String(o))
			return v >= 1
		}
	}
	eventually(t, 10*time.Second, "the bad key to halt", outcome(telemetry.OutcomeFailed))
	eventually(t, 10*time.Second, "the ok key's five events", func() bool {
		v, _ := mr.Value("seqby.events", handler, telemetry.AttrOutcome.String(telemetry.OutcomeHandled))
		return v >= 5
	})
	slow := telemetry.AttrKey.String("slow")
	eventually(t, 10*time.Second, "the slow key's lag", func() bool {
		v, ok := mr.Value("seqby.partition.backlog", handler, slow)
		return ok && v == 3
	})
	for _, tc := range []struct {
		name string
		want float64
		attr []attribute.KeyValue
	}{
		{"seqby.events", 5, []attribute.KeyValue{handler, telemetry.AttrOutcome.String(telemetry.OutcomeHandled)}},
		{"seqby.events", 1, []attribute.KeyValue{handler, telemetry.AttrOutcome.String(telemetry.OutcomeRetried)}},
		{"seqby.events", 1, []attribute.KeyValue{handler, telemetry.AttrOutcome.String(telemetry.OutcomeFailed)}},
		{"seqby.partitions.owned", 3, []attribute.KeyValue{handler}},
		{"seqby.partitions.halted", 1, []attribute.KeyValue{handler}},
		{"seqby.lease.acquired", 3, []attribute.KeyValue{handler}},
		{"seqby.index.partitions", 3, []attribute.KeyValue{telemetry.AttrCategory.String("order")}},
		// 5 ok, 2 bad attempts; slow's first is still running.
		{"messaging.process.duration", 7, []attribute.KeyValue{telemetry.AttrGroup.String("metrics")}},
		{"messaging.process.duration", 2, []attribute.KeyValue{telemetry.AttrGroup.String("metrics"), telemetry.AttrErrType.String("error")}},
	} {
		if got, _ := mr.Value(tc.name, tc.attr...); got != tc.want {
			t.Errorf("%s %v = %v, want %v", tc.name, tc.attr, got, tc.want)
		}
	}
	for _, key := range []string{"slow", "bad"} { // blocked, halted: lag grows
		eventually(t, 10*time.Second, "a lag for key "+key, func() bool {
			lag, _ := mr.Value("seqby.partition.lag", handler, telemetry.AttrKey.String(key))
			return lag > 0
		})
	}
	if _, ok := mr.Value("seqby.partition.lag", handler, telemetry.AttrKey.String("ok")); ok {
		t.Error("the drained key still reports a lag; want no series for a partition without work")
	}

	close(block)
	eventually(t, 10*time.Second, "the slow key to drain", func() bool {
		_, ok := mr.Value("seqby.partition.backlog", handler, slow)
		v, _ := mr.Value("seqby.events", handler, telemetry.AttrOutcome.String(telemetry.OutcomeHandled))
		return !ok && v == 8
	})
	if v, _ := mr.Value("seqby.handler.backlog", handler); v != 1 {
		t.Errorf("handler backlog = %v, want 1 (the halted head)", v)
	}
}

// TestMetricsBacklogBeyondReadAhead: a partition with more entries than
// one read takes reports its whole backlog, read from Redis.
func TestMetricsBacklogBeyondReadAhead(t *testing.T) {
	c := newRedis(t)
	ctx := ctxT(t)
	mr, mp := newMetricsReader(t)
	block := make(chan struct{})
	h := keyedHandler("backlog", func(ctx context.Context, e *testEvent) error {
		if e.Seq == 0 {
			select {
			case <-block:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	opts := fastOptions("backlog-1")
	opts.MeterProvider, opts.ReadAhead = mp, 4
	pub := NewPublisher(c)
	for i := range 10 {
		if err := pub.Publish(ctx, ev("k", i)); err != nil {
			t.Fatal(err)
		}
	}
	startEngine(t, c, opts, h)
	defer close(block)
	key := []attribute.KeyValue{telemetry.AttrHandler.String("backlog"), telemetry.AttrKey.String("k")}
	eventually(t, 10*time.Second, "the backlog of all ten entries", func() bool {
		v, _ := mr.Value("seqby.partition.backlog", key...)
		return v == 10
	})
}

// TestHaltReAlerts: a partition that stays halted is reported again each
// HaltRealertInterval, with Alerts counting.
func TestHaltReAlerts(t *testing.T) {
	c := newRedis(t)
	ctx := ctxT(t)
	alerts := make(chan Halt, 16)
	h := keyedHandler("realert", func(ctx context.Context, e *testEvent) error {
		return Permanent(fmt.Errorf("seq %d cannot apply", e.Seq))
	})
	opts := fastOptions("realert-1")
	opts.HaltRealertInterval = 50 * time.Millisecond
	opts.OnHalt = func(h Halt) {
		select {
		case alerts <- h:
		default:
		}
	}
	if err := NewPublisher(c).Publish(ctx, ev("k", 0)); err != nil {
		t.Fatal(err)
	}
	startEngine(t, c, opts, h)
	var first Halt
	for n := 1; n <= 3; n++ {
		select {
		case got := <-alerts:
			if got.Alerts != n {
				t.Fatalf("alert %d: Alerts = %d", n, got.Alerts)
			}
			if n == 1 {
				first = got
			} else if got.EntryID != first.EntryID || !got.At.Equal(first.At) {
				t.Fatalf("alert %d is another halt: %+v, first %+v", n, got, first)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("alert %d did not come", n)
		}
	}
}
