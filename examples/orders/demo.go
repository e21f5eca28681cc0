package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/seqby/seqby/examples/orders/billing"
	"github.com/seqby/seqby/examples/orders/events"
	"github.com/seqby/seqby/outbox"
	"github.com/seqby/seqby/runtime"
	"github.com/seqby/seqby/runtime/inspect"
)

const clients = 6

// The story's verdicts: the demo's test looks for these lines.
const (
	verdictTakeover = "takeover: B took over every client of the killed engine A"
	verdictOrder    = "nothing lost or reordered: every client's events were applied once, in publish order"
	verdictHalt     = "halt resolved: client-2 halted on its poison event alone, and resumed after the operator dead-lettered it"
	verdictReplay   = "replay applied: client-2's dead-lettered #9, replayed after its #10, was applied once, not dropped as older than #10"
	verdictPM       = "every order was placed and paid: ready to ship"
	verdictOutbox   = "outbox: every cart event was recorded in its cart change's transaction and published by the relay; none pending, none abandoned"
)

// run tells the story on the Redis at redisURL ("" : an embedded one).
func run(args []string, redisURL string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("orders", flag.ContinueOnError)
	fs.SetOutput(stderr)
	metricsAddr := fs.String("metrics-addr", "", "serve engine B's Prometheus metrics at http://ADDR/metrics while the demo runs")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d := &demo{ctx: ctx, out: stdout, want: map[string][]int{}, catalogue: new(billing.Catalogue)}
	embedded := redisURL == ""
	if embedded {
		mr, err := miniredis.Run()
		if err != nil {
			fmt.Fprintf(stderr, "orders: embedded redis: %v\n", err)
			return 1
		}
		defer mr.Close()
		// miniredis counts TTLs down only when told to: let it follow the
		// clock, or a killed engine's leases would never expire.
		go func() {
			last := time.Now()
			for ctx.Err() == nil {
				time.Sleep(20 * time.Millisecond)
				now := time.Now()
				mr.FastForward(now.Sub(last))
				last = now
			}
		}()
		redisURL = "redis://" + mr.Addr()
		d.say("seqby demo on an embedded Redis (miniredis); set REDIS_URL to use a real one")
	} else {
		d.say("seqby demo on the Redis at REDIS_URL")
	}
	c, err := runtime.Connect(ctx, redisURL)
	if err != nil {
		fmt.Fprintf(stderr, "orders: REDIS_URL: %v\n", err)
		return 2
	}
	defer c.Close()
	d.c, d.journal, d.insp = c, billing.RedisJournal{C: c}, inspect.New(c)
	d.pub = runtime.NewPublisher(c)
	d.ledger = (&billing.Ledger{}).SeqbyRegistration().Name
	st, err := openStore(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		fmt.Fprintf(stderr, "orders: database: %v\n", err)
		return 2
	}
	defer st.close()
	d.store = st
	stopRelay := st.relay(ctx, d.pub, stderr)
	defer stopRelay()
	d.say("the cart service records its events in a transactional outbox on %s; a relay publishes them (set DATABASE_URL for PostgreSQL)", st.where)

	var metrics *http.Server
	var engineOpts []func(*runtime.Options)
	if embedded {
		// miniredis has no CONFIG: checking its maxmemory-policy would
		// only warn that it cannot.
		engineOpts = append(engineOpts, func(o *runtime.Options) { o.SkipEvictionCheck = true })
	}
	if *metricsAddr != "" {
		reg := prometheus.NewRegistry()
		exp, err := otelprom.New(otelprom.WithRegisterer(reg))
		if err != nil {
			fmt.Fprintf(stderr, "orders: metrics: %v\n", err)
			return 1
		}
		ln, err := net.Listen("tcp", *metricsAddr)
		if err != nil {
			fmt.Fprintf(stderr, "orders: -metrics-addr: %v\n", err)
			return 2
		}
		metrics = &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
		go metrics.Serve(ln)
		defer metrics.Close()
		d.metricsURL = "http://" + ln.Addr().String() + "/metrics"
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
		defer mp.Shutdown(context.Background())
		engineOpts = append(engineOpts, func(o *runtime.Options) { o.MeterProvider = mp })
		d.say("engine B serves its Prometheus metrics at %s while the demo runs", d.metricsURL)
	}

	if err := d.tell(redisURL, embedded, stderr, engineOpts); err != nil {
		fmt.Fprintf(stderr, "orders: %v\n", err)
		return 1
	}
	return 0
}

// demo is the story's state.
type demo struct {
	ctx        context.Context
	out        io.Writer
	c          redis.UniversalClient
	pub        *runtime.Publisher
	journal    billing.RedisJournal
	insp       *inspect.Inspector
	store      *store             // the cart service's database and outbox
	catalogue  *billing.Catalogue // the items engine B's Ledger knows
	ledger     string             // the Ledger's handler name
	want       map[string][]int   // per client, the seqs that must be applied
	metricsURL string
}

func (d *demo) say(format string, args ...any) { fmt.Fprintf(d.out, format+"\n", args...) }

func client(i int) string { return fmt.Sprintf("client-%d", i) }

// tell runs the story; an error means a fact did not hold.
func (d *demo) tell(url string, embedded bool, stderr io.Writer, engineOpts []func(*runtime.Options)) error {
	ctx := d.ctx
	a, err := startChild(ctx, "A", url, embedded, stderr)
	if err != nil {
		return err
	}
	defer a.kill()
	b, err := newEngine(d.c, "B", d.catalogue, stderr, engineOpts...)
	if err != nil {
		return err
	}
	bctx, stopB := context.WithCancel(ctx)
	bdone := make(chan error, 1)
	go func() { bdone <- b.Run(bctx) }()
	defer func() { stopB(); <-bdone }()
	d.say("\n1. Engine A starts as a child process (pid %d) and engine B in this process; both run the Ledger, sequential by client_id.", a.cmd.Process.Pid)
	if err := d.store.record(ctx, "", 0, "item-0", events.ItemAdded{Item: "item-0"}); !errors.Is(err, runtime.ErrInvalidKey) {
		return fmt.Errorf("a cart change without a client_id: %v, want its key error", err)
	}
	d.say("   A cart change without a client_id fails in its own transaction with its event's key error, so neither the change nor the event is recorded.")

	// #1 creates the six partitions; wait until A and B share them.
	if err := d.publish(1, 1, 0); err != nil {
		return err
	}
	if err := d.until("A and B to own three clients each", func() bool {
		owners, err := d.owners()
		return err == nil && len(owners["A"]) == clients/2 && len(owners["B"]) == clients/2
	}); err != nil {
		return err
	}
	owners, _ := d.owners()
	d.say("   They split the six clients: A owns %s, B owns %s.", strings.Join(owners["A"], " "), strings.Join(owners["B"], " "))

	start := time.Now()
	if err := d.publish(2, 4, 0); err != nil {
		return err
	}
	if err := d.until("#1-#4 of every client", func() bool { return d.applied(4) }); err != nil {
		return err
	}
	took := time.Since(start)
	d.say("\n2. Events #2-#4 of every client, published interleaved: %d events at %v each, applied in %.2fs; one at a time they would take %.2fs. Clients run in parallel, each client's events one at a time.",
		3*clients, applyDelay, took.Seconds(), (time.Duration(3*clients) * applyDelay).Seconds())

	// Kill A in the middle of #5-#8.
	if err := d.publish(5, 8, 0); err != nil {
		return err
	}
	if err := d.until("A to apply one of #5-#8", func() bool { return d.appliedBy("A", 5) > 0 }); err != nil {
		return err
	}
	a.kill()
	killed := time.Now()
	d.say("\n3. Events #5-#8 published; engine A is killed (SIGKILL) after it applied %d of them.", d.appliedBy("A", 5))
	if err := d.until("B to own every client", func() bool {
		owners, err := d.owners()
		return err == nil && len(owners["B"]) == clients
	}); err != nil {
		return err
	}
	d.say("   B takes %s over %.1fs later, when A's leases expire, and goes on where A stopped.", strings.Join(owners["A"], " "), time.Since(killed).Seconds())
	if err := d.until("#1-#8 of every client", func() bool { return d.applied(8) }); err != nil {
		return err
	}
	dups := 0
	for i := 1; i <= clients; i++ {
		n, _ := d.journal.Duplicates(ctx, client(i))
		dups += n
	}
	if dups > 0 {
		d.say("   %d event(s) A had applied but not acked ran again on B; the journal's fenced write skipped them (delivery is at least once).", dups)
	}
	d.say("\n4. Every client's events, with the engine that applied each:")
	for i := 1; i <= clients; i++ {
		d.say("   %s: %s", client(i), d.trail(client(i)))
	}

	// A poison event halts its client only.
	d.want[client(2)] = append(d.want[client(2)], 10) // #9 is the poison, dead-lettered
	if err := d.publish(9, 10, 2); err != nil {
		return err
	}
	var halt runtime.PartitionStatus
	if err := d.until("client-2 to halt and the others to apply #10", func() bool {
		hs := b.Status().Halted()
		if len(hs) != 1 {
			return false
		}
		halt = hs[0]
		for i := 1; i <= clients; i++ {
			if i != 2 && !d.appliedClient(client(i), 10) {
				return false
			}
		}
		return true
	}); err != nil {
		return err
	}
	d.say("\n5. A poison event for client-2 (#9: an item the catalogue does not have) halts client-2 alone:")
	d.say("   halted: %s on %s, entry %s: %s: %v", halt.Key, halt.Stream, halt.Halt.EntryID, halt.Halt.Reason, halt.Halt.Err)
	d.say("   client-2's #10 waits behind it; every other client applied #9 and #10.")

	d.say("\n6. The operator moves the head to the dead-letter stream:")
	d.say("   seqbyctl dlq -handler %s -stream '%s' -id %s", d.ledger, halt.Stream, halt.Halt.EntryID)
	res, err := d.insp.MoveToDLQ(ctx, d.ledger, halt.Stream, halt.Halt.EntryID)
	if err != nil {
		return err
	}
	if err := d.until("client-2 to resume", func() bool { return d.appliedClient(client(2), 10) }); err != nil {
		return err
	}
	d.say("   client-2 resumes: %s; the poison event is kept in %s.", d.trail(client(2)), res.DLQ)
	if err := d.replay(res); err != nil {
		return err
	}

	// The Fulfilment pm follows each order across two categories.
	if err := d.orders(); err != nil {
		return err
	}
	d.say("\n8. Orders and payments, interleaved: the Fulfilment pm owns each order id across the order and payment categories.")
	d.say("   " + verdictPM)

	if d.metricsURL != "" {
		if err := d.showMetrics(); err != nil {
			return err
		}
	}
	if err := d.check(); err != nil {
		return err
	}
	var st outbox.Stats
	if err := d.until("the outbox to drain", func() bool {
		st, err = d.store.ob.Stats(ctx, d.store.db)
		return err == nil && st.Pending == 0
	}); err != nil {
		return err
	}
	if st.Abandoned != 0 {
		return fmt.Errorf("%d outbox records abandoned", st.Abandoned)
	}
	d.say("\n%s", verdictOutbox)
	d.say("\n" + verdictTakeover)
	d.say(verdictOrder)
	d.say(verdictHalt)
	d.say(verdictReplay)
	return nil
}

// replay is the story's step 7: the fix is deployed (the catalogue gains
// the poison item) and the operator replays the dead-lettered event,
// which the Ledger's journal must apply although it comes after client-2's
// #10 with its old #9.
func (d *demo) replay(res inspect.Resolution) error {
	ctx, c2 := d.ctx, client(2)
	d.catalogue.Add("poison")
	dups, err := d.journal.Duplicates(ctx, c2)
	if err != nil {
		return err
	}
	d.say("\n7. The catalogue gains the item (the fix is deployed), and the operator replays the dead-lettered event:")
	d.say("   seqbyctl dlq replay -stream '%s' -id %s", res.DLQ, res.DLQEntryID)
	rep, err := d.insp.ReplayDLQ(ctx, res.DLQ, res.DLQEntryID)
	if err != nil {
		return err
	}
	var last string
	if err := d.until("client-2's journal to take the replayed #9", func() bool {
		lines, _ := d.journal.Applied(ctx, c2)
		n, _ := d.journal.Duplicates(ctx, c2)
		if len(lines) > 0 {
			last = lines[len(lines)-1]
		}
		es := d.entries(c2)
		return len(es) > 0 && es[len(es)-1].seq == 9 || n > dups
	}); err != nil {
		return err
	}
	if es := d.entries(c2); len(es) == 0 || es[len(es)-1].seq != 9 {
		return fmt.Errorf("the journal dropped the replayed #9 of %s as a duplicate: %s", c2, d.trail(c2))
	}
	d.want[c2] = append(d.want[c2], 9)
	d.say("   It is appended to the end of %s, after #10, with its old sequence number: a journal that skips", rep.Stream)
	d.say("   every seq at or below the last applied would drop it. runtime.MessageInfo.Replay says it is a replay")
	d.say("   of an event the Ledger halted on and never applied, so the journal applies it, once: %q.", last)
	d.say("   (Another handler of the category would treat it as a duplicate of the #9 it applied in its place.)")
	d.say("   client-2: %s", d.trail(c2))
	return nil
}

// publish publishes events #from-#to of every client, interleaved; for
// the poisoned client (0: none), #from is the poison item.
func (d *demo) publish(from, to, poisoned int) error {
	for seq := from; seq <= to; seq++ {
		for i := 1; i <= clients; i++ {
			item := fmt.Sprintf("item-%d", seq)
			var msg runtime.Message = events.ItemAdded{ClientID: client(i), Item: item, Seq: seq}
			switch {
			case i == poisoned && seq == from:
				item = "poison"
				msg = events.ItemAdded{ClientID: client(i), Item: item, Seq: seq}
			case seq == 8:
				item = "checkout"
				msg = events.CartCheckedOut{ClientID: client(i), OrderID: fmt.Sprintf("order-%d", i), Seq: seq}
			}
			// The cart change and its event commit together (the outbox);
			// the relay publishes each client's events in order.
			if err := d.store.record(d.ctx, client(i), seq, item, msg); err != nil {
				return fmt.Errorf("record: %w", err)
			}
			if i != poisoned {
				d.want[client(i)] = append(d.want[client(i)], seq)
			}
		}
	}
	return nil
}

// until polls cond, every 10ms, until it holds or the story times out.
func (d *demo) until(what string, cond func() bool) error {
	for !cond() {
		select {
		case <-d.ctx.Done():
			return fmt.Errorf("timed out waiting for %s", what)
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// owners maps each engine (A, B) to the clients whose Ledger lease it
// holds, from the leases in Redis.
func (d *demo) owners() (map[string][]string, error) {
	out := map[string][]string{}
	for i := 1; i <= clients; i++ {
		in, err := d.insp.Inspect(d.ctx, d.ledger, "cart:{"+client(i)+"}")
		if err != nil {
			return nil, err
		}
		for _, e := range []string{"A", "B"} {
			if strings.HasPrefix(in.Lease, "engine-"+e+"-") {
				out[e] = append(out[e], client(i))
			}
		}
	}
	return out, nil
}

// entries is what the journal holds for c: engine and seq of each event.
func (d *demo) entries(c string) []struct {
	engine string
	seq    int
} {
	lines, _ := d.journal.Applied(d.ctx, c)
	out := make([]struct {
		engine string
		seq    int
	}, 0, len(lines))
	for _, l := range lines { // "A #3 add item-3"
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		n, _ := strconv.Atoi(strings.TrimPrefix(f[1], "#"))
		out = append(out, struct {
			engine string
			seq    int
		}{f[0], n})
	}
	return out
}

// applied reports whether every client applied its events up to seq.
func (d *demo) applied(seq int) bool {
	for i := 1; i <= clients; i++ {
		if !d.appliedClient(client(i), seq) {
			return false
		}
	}
	return true
}

func (d *demo) appliedClient(c string, seq int) bool {
	es := d.entries(c)
	return len(es) > 0 && es[len(es)-1].seq >= seq
}

// appliedBy counts the events from seq on that engine applied.
func (d *demo) appliedBy(engine string, from int) int {
	n := 0
	for i := 1; i <= clients; i++ {
		for _, e := range d.entries(client(i)) {
			if e.engine == engine && e.seq >= from {
				n++
			}
		}
	}
	return n
}

// trail is c's applied events as "A1 A2 B3".
func (d *demo) trail(c string) string {
	var parts []string
	for _, e := range d.entries(c) {
		parts = append(parts, fmt.Sprintf("%s%d", e.engine, e.seq))
	}
	return strings.Join(parts, " ")
}

// check verifies the story's facts: each client's applied seqs are
// exactly the published ones, in order; B applied after A's death.
func (d *demo) check() error {
	for i := 1; i <= clients; i++ {
		var got []int
		for _, e := range d.entries(client(i)) {
			got = append(got, e.seq)
		}
		if !slices.Equal(got, d.want[client(i)]) {
			return fmt.Errorf("%s applied %v, published %v", client(i), got, d.want[client(i)])
		}
	}
	return nil
}

// orders publishes orders and payments interleaved and waits until the
// Fulfilment pm found every order placed and paid.
func (d *demo) orders() error {
	for i := 1; i <= clients; i++ {
		order, amount := fmt.Sprintf("order-%d", i), int64(100*i)
		for _, msg := range []runtime.Message{
			events.OrderPlaced{OrderID: order, ClientID: client(i), Amount: amount},
			events.PaymentReceived{OrderID: order, Amount: amount},
		} {
			if err := d.pub.Publish(d.ctx, msg); err != nil {
				return fmt.Errorf("publish: %w", err)
			}
		}
	}
	states := runtime.NewRedisStateStore(d.c)
	name := new(billing.Fulfilment).SeqbyRegistration().Name
	return d.until("every order to be placed and paid", func() bool {
		for i := 1; i <= clients; i++ {
			data, _, err := states.Load(d.ctx, name, fmt.Sprintf("order-%d", i))
			f := new(billing.Fulfilment)
			if err != nil || data == nil || json.Unmarshal(data, f) != nil || !f.Ready() {
				return false
			}
		}
		return true
	})
}

// showMetrics prints what Prometheus would scrape from engine B now.
func (d *demo) showMetrics() error {
	resp, err := http.Get(d.metricsURL)
	if err != nil {
		return fmt.Errorf("scrape %s: %w", d.metricsURL, err)
	}
	defer resp.Body.Close()
	d.say("\n9. What Prometheus scrapes from engine B now (%s), in part:", d.metricsURL)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		l := sc.Text()
		for _, name := range []string{"seqby_events_total", "seqby_partitions_halted", "seqby_lease_acquired_total", "seqby_entries_reclaimed_total"} {
			if strings.HasPrefix(l, name+"{") && strings.Contains(l, "Ledger") {
				d.say("   %s", compactLabels(l))
			}
		}
	}
	return sc.Err()
}

// compactLabels drops the scope labels the exporter adds, for reading.
func compactLabels(l string) string {
	open, end := strings.IndexByte(l, '{'), strings.LastIndexByte(l, '}')
	if open < 0 || end < open {
		return l
	}
	var keep []string
	for _, kv := range strings.Split(l[open+1:end], ",") {
		if !strings.HasPrefix(kv, "otel_scope_") {
			keep = append(keep, kv)
		}
	}
	return l[:open] + "{" + strings.Join(keep, ",") + "}" + l[end+1:]
}
