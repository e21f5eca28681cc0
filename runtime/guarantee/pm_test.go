package guarantee

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// The process-manager part of the suite (ADR-0028, "Process manager
// serializes per instance"): a sequential pm correlated by order_id across
// the order and payment categories, run by engine processes. Its messages
// and registration are written by hand here, in the shape seqgen emits, so
// the suite's generated code stays as it is.

// envPMChild makes the test binary run one engine with the pm instead of the
// tests. It is read in init, before TestMain, which runs the Recorder child.
const envPMChild = "SEQBY_GUARANTEE_PM_CHILD"

func init() {
	if os.Getenv(envPMChild) == "1" {
		os.Exit(pmChildMain())
	}
}

// pmName is the pm's registration name (its consumer group).
const pmName = "github.com/seqby/seqby/runtime/guarantee.Flow"

// orderPlaced and paymentReceived are the pm's events. Seq numbers one
// correlation value's events across both categories (odd: order, even:
// payment), so a run names its event uniquely.
type orderPlaced struct {
	OrderID string `json:"order_id"`
	Seq     int    `json:"seq"`
	SlowMS  int    `json:"slow_ms,omitempty"`
}

func (orderPlaced) StreamCategory() string { return "order" }
func (m orderPlaced) PartitionKey() (string, error) {
	return runtime.Key("order", "OrderID", m.OrderID)
}

type paymentReceived struct {
	OrderID string `json:"order_id"`
	Seq     int    `json:"seq"`
	SlowMS  int    `json:"slow_ms,omitempty"`
}

func (paymentReceived) StreamCategory() string { return "payment" }
func (m paymentReceived) PartitionKey() (string, error) {
	return runtime.Key("payment", "OrderID", m.OrderID)
}

// flow is the pm's state. A re-run of an event already applied (at-least-
// once across a failover) is counted, not applied again, so the state is
// exact whatever the failovers.
type flow struct {
	Orders   []int `json:"orders"`
	Payments []int `json:"payments"`
	Reruns   int   `json:"reruns"`
}

// pmRecorder writes what the pm observes to Redis, with the Recorder's
// scripts and keys (a correlation value stands where a client key does).
type pmRecorder struct {
	rdb  redis.UniversalClient
	inst string
}

func (r pmRecorder) on(ctx context.Context, st *flow, category, orderID string, seq, slowMS int) error {
	li, _ := runtime.LeaseFromContext(ctx)
	rctx := context.WithoutCancel(ctx)
	if corr, ok := runtime.Correlation(ctx); !ok || corr != orderID {
		r.rdb.RPush(rctx, overlapsKey(orderID), fmt.Sprintf("Correlation(ctx) = %q, %v in the handler of %s", corr, ok, orderID))
	}
	event := orderID + "#" + strconv.Itoa(seq)
	holder := r.inst + "|" + event
	record := r.inst + "|" + li.Token + "|" + strconv.Itoa(seq)
	if err := scriptEnter.Run(rctx, r.rdb, []string{markerKey(orderID), overlapsKey(orderID), entriesKey(orderID)},
		holder, event, record).Err(); err != nil {
		return fmt.Errorf("record entry of %s: %w", event, err)
	}
	defer scriptExit.Run(rctx, r.rdb, []string{markerKey(orderID), entriesKey(orderID)}, holder, record)
	if slowMS > 0 {
		time.Sleep(time.Duration(slowMS) * time.Millisecond) // ignores ctx on purpose, like Recorder.On
	}
	list := &st.Orders
	if category == "payment" {
		list = &st.Payments
	}
	if slices.Contains(*list, seq) {
		st.Reruns++
		return nil
	}
	*list = append(*list, seq)
	return nil
}

// flowRegistration is what seqgen writes for a //seqby:pm //seqby:sequential
// Flow with OnPlaced and OnPaid, both //seqby:correlate=order_id.
func flowRegistration(r pmRecorder) runtime.Registration {
	return runtime.Registration{
		Name: pmName, Kind: runtime.ProcessManager, Sequential: true,
		NewState: func() any { return new(flow) },
		Routes: []runtime.Route{
			{
				Category: "order", Type: "orderPlaced", PartitionField: "order_id", CorrelateField: "order_id",
				Decode: func(c runtime.Codec, p []byte) (any, error) {
					var m orderPlaced
					err := c.Unmarshal(p, &m)
					return m, err
				},
				PartitionKey: func(m any) (string, error) { return m.(orderPlaced).PartitionKey() },
				Correlate: func(m any) (string, error) {
					return runtime.Key("order", "OrderID", m.(orderPlaced).OrderID)
				},
				Invoke: func(ctx context.Context, st any, m any) error {
					e := m.(orderPlaced)
					return r.on(ctx, st.(*flow), "order", e.OrderID, e.Seq, e.SlowMS)
				},
			},
			{
				Category: "payment", Type: "paymentReceived", PartitionField: "order_id", CorrelateField: "order_id",
				Decode: func(c runtime.Codec, p []byte) (any, error) {
					var m paymentReceived
					err := c.Unmarshal(p, &m)
					return m, err
				},
				PartitionKey: func(m any) (string, error) { return m.(paymentReceived).PartitionKey() },
				Correlate: func(m any) (string, error) {
					return runtime.Key("payment", "OrderID", m.(paymentReceived).OrderID)
				},
				Invoke: func(ctx context.Context, st any, m any) error {
					e := m.(paymentReceived)
					return r.on(ctx, st.(*flow), "payment", e.OrderID, e.Seq, e.SlowMS)
				},
			},
		},
	}
}

// pmChildMain runs one engine instance with the pm until SIGTERM; its
// status snapshots carry "value=token" for each owned correlation value.
func pmChildMain() int {
	return runChild("pm child",
		func(c redis.UniversalClient, inst string) runtime.Registration {
			return flowRegistration(pmRecorder{rdb: c, inst: inst})
		},
		nil,
		func(p runtime.PartitionStatus) string { return p.Key + "=" + p.Token })
}

// startPM launches a pm instance and waits until it is a live member of
// the pm's group.
func (c *cluster) startPM(id string) *child {
	c.t.Helper()
	return c.launch(id, envPMChild, pmName)
}

// pmEvents returns correlation value v's events from..to, alternating
// order (odd seq) and payment (even seq).
func pmEvents(v string, from, to, slowMS int) []runtime.Message {
	var out []runtime.Message
	for i := from; i <= to; i++ {
		if i%2 == 1 {
			out = append(out, orderPlaced{OrderID: v, Seq: i, SlowMS: slowMS})
		} else {
			out = append(out, paymentReceived{OrderID: v, Seq: i, SlowMS: slowMS})
		}
	}
	return out
}

// publishPM publishes the lists round-robin, so consecutive publishes
// alternate correlation values.
func (c *cluster) publishPM(lists ...[]runtime.Message) {
	c.t.Helper()
	for i := 0; ; i++ {
		added := false
		for _, l := range lists {
			if i < len(l) {
				if err := c.pub.Publish(c.ctx, l[i]); err != nil {
					c.t.Fatalf("publish %+v: %v", l[i], err)
				}
				added = true
			}
		}
		if !added {
			return
		}
	}
}

// pmState returns v's saved pm state and its version.
func (c *cluster) pmState(v string) (flow, int64) {
	c.t.Helper()
	data, version, err := runtime.NewRedisStateStore(c.rdb).Load(c.ctx, pmName, v)
	if err != nil {
		c.t.Fatalf("load pm state of %s: %v", v, err)
	}
	var f flow
	if data != nil {
		if err := json.Unmarshal(data, &f); err != nil {
			c.t.Fatalf("pm state of %s: %v", v, err)
		}
	}
	return f, version
}

// waitPMState waits until v's state holds every event 1..n.
func (c *cluster) waitPMState(within time.Duration, n int, vs ...string) {
	c.t.Helper()
	for _, v := range vs {
		c.eventuallyDescribed(within, func() string {
			f, ver := c.pmState(v)
			return fmt.Sprintf("pm state of %s complete through %d (state %+v at version %d)", v, n, f, ver)
		}, func() bool {
			f, _ := c.pmState(v)
			return len(f.Orders)+len(f.Payments) >= n
		})
	}
}

// checkPMState fails the test unless v's state holds each order (odd) and
// payment (even) event 1..n exactly once, in publish order per category.
func (c *cluster) checkPMState(v string, n int) {
	c.t.Helper()
	var orders, payments []int
	for i := 1; i <= n; i++ {
		if i%2 == 1 {
			orders = append(orders, i)
		} else {
			payments = append(payments, i)
		}
	}
	f, ver := c.pmState(v)
	if !slices.Equal(f.Orders, orders) || !slices.Equal(f.Payments, payments) {
		c.t.Errorf("%s: pm state %+v (version %d), want orders %v and payments %v", v, f, ver, orders, payments)
	}
	if f.Reruns > 0 {
		c.t.Logf("%s: %d re-runs across a failover (at-least-once)", v, f.Reruns)
	}
}

// pmOwner returns the instance holding v's pm lease and its generation.
func (c *cluster) pmOwner(v string) (string, int64) {
	tok, err := c.rdb.Get(c.ctx, rdb.PMLeaseKey(pmName, v)).Result()
	if err != nil {
		return "", 0
	}
	o, g, err := rdb.ParseToken(tok)
	if err != nil {
		c.t.Fatalf("pm lease of %s holds %q: %v", v, tok, err)
	}
	return o, g
}

// TestPMSerializesPerCorrelationValue: interleaved order and payment
// events for two correlation values, two instances: no two events of one
// value are ever in the pm at once (cross-instance marker and recorded
// runs), the two values progress in parallel, and each value's saved state
// holds every event once.
func TestPMSerializesPerCorrelationValue(t *testing.T) {
	c := newCluster(t, ttl)
	c.startPM("i1")
	c.startPM("i2")
	const n = 8
	c.publishPM(pmEvents("o-1", 1, n, 150), pmEvents("o-2", 1, n, 150))
	c.waitPMState(60*time.Second, n, "o-1", "o-2")
	for _, v := range []string{"o-1", "o-2"} {
		c.checkExclusive(v, nil)
		c.checkPMState(v, n)
	}
	w1, w2 := windows(c.marks("o-1")), windows(c.marks("o-2"))
	parallel := false
	for _, a := range w1 {
		for _, b := range w2 {
			parallel = parallel || a.overlaps(b)
		}
	}
	if !parallel {
		t.Fatalf("o-1's and o-2's pm runs never overlapped: o-1 %s, o-2 %s", fmtWindows(w1), fmtWindows(w2))
	}
}

// TestPMKillOwner: the owner of a correlation value is SIGKILLed mid-
// stream; the other instance takes the value over after the lease TTL,
// reclaims its in-flight event, and finishes. Nothing is lost, no two
// events of a value overlap (except the killed run, which never exited),
// and the state is exact.
func TestPMKillOwner(t *testing.T) {
	c := newCluster(t, ttl)
	c.startPM("i1")
	c.startPM("i2")
	vs := []string{"o-1", "o-2", "o-3"}
	const n = 12
	var first, second [][]runtime.Message
	for _, v := range vs {
		first = append(first, pmEvents(v, 1, n/2, 100))
		second = append(second, pmEvents(v, n/2+1, n, 30))
	}
	c.publishPM(first...)
	// Kill o-1's owner while it is inside an event, so the successor has
	// an in-flight event to reclaim.
	var victim string
	var inflight mark
	c.eventually(30*time.Second, "o-1's owner inside an event", func() bool {
		ms := c.marks("o-1")
		if len(ms) < 2 || ms[len(ms)-1].Phase != "enter" {
			return false
		}
		inflight = ms[len(ms)-1]
		victim = inflight.Instance
		return true
	})
	c.kill(victim)
	c.publishPM(second...)
	c.waitPMState(60*time.Second, n, vs...)
	for _, v := range vs {
		c.checkExclusive(v, func(w window) bool { return w.Instance == victim && w.To == openEnd })
		c.checkPMState(v, n)
		if o, _ := c.pmOwner(v); o == victim {
			t.Errorf("%s is still leased by the killed instance %s", v, victim)
		}
	}
	reclaimed := slices.ContainsFunc(c.marks("o-1"), func(m mark) bool {
		return m.Phase == "enter" && m.Seq == inflight.Seq && m.Instance != victim
	})
	if !reclaimed {
		t.Fatalf("o-1 event %d, in flight at the kill, was never run by the new owner", inflight.Seq)
	}
}

// TestPMStallOwner: the owner of a correlation value is SIGSTOPped inside a
// slow event; the other instance takes over after the lease TTL and
// finishes the value. After SIGCONT the stale owner finishes its body but
// can neither save the state nor ack: the state is exact and every event is
// applied once (the stalled run, still in its body when the new owner took
// over, is the residual ADR-0028 allows).
func TestPMStallOwner(t *testing.T) {
	c := newCluster(t, ttl)
	c.startPM("i1")
	c.startPM("i2")
	const n = 10
	c.publishPM(pmEvents("o-1", 1, 2, 0), pmEvents("o-2", 1, 2, 0))
	c.waitPMState(30*time.Second, 2, "o-1")
	victim, gen := c.pmOwner("o-1")
	if victim == "" {
		t.Fatal("no owner of o-1")
	}
	// Event 3 of o-1 is slow: stop its owner while it is inside.
	c.publishPM(pmEvents("o-1", 3, 3, 1500))
	c.eventually(30*time.Second, "o-1 event 3 entered", func() bool {
		_, ok := entered(c.marks("o-1"), victim, 3)
		return ok
	})
	c.signal(victim, syscall.SIGSTOP)
	c.eventually(30*time.Second, "o-1 taken over", func() bool {
		o, g := c.pmOwner("o-1")
		return o != "" && o != victim && g > gen
	})
	c.publishPM(pmEvents("o-1", 4, n, 0), pmEvents("o-2", 3, n, 0))
	c.waitPMState(60*time.Second, n, "o-1", "o-2")
	c.signal(victim, syscall.SIGCONT)
	// Wait for a status snapshot the resumed instance took after it gave
	// o-1 up (its body finished, its save and ack refused): o-1 at the old
	// token is no longer among what it owns.
	stale := "o-1=" + victim + ":" + strconv.FormatInt(gen, 10)
	before, _ := c.status(victim)
	c.eventually(30*time.Second, "the resumed owner to drop o-1", func() bool {
		num, owned := c.status(victim)
		return num > before+1 && !slices.Contains(owned, stale)
	})
	for _, v := range []string{"o-1", "o-2"} {
		c.checkExclusive(v, func(w window) bool { return w.Instance == victim && w.Seq == 3 && v == "o-1" })
		c.checkPMState(v, n)
	}
}
