package console

import (
	"cmp"
	"errors"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/seqby/seqby/runtime/inspect"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// pageSize is how many partitions a handler page lists at once.
const pageSize = 100

// handlerSummary is one handler on the overview.
type handlerSummary struct {
	Name       string
	Categories []string
	Partitions int
	Owned      int
	Unowned    int
	Halted     int
	Paused     int
	Lag        int64 // entries not delivered yet
	Backlog    int64 // entries not handled yet: pending plus lag
	WholePause *inspect.Pause
	Instances  []inspect.Instance
	Chart      template.HTML // backlog over the sampling window (SVG)
	Read       time.Time     // when the partitions were read
	Err        string
}

// summarize reads one handler's summary.
func (c *Console) summarize(r *http.Request, h inspect.HandlerInfo) handlerSummary {
	ctx, cancel := c.ctx(r)
	defer cancel()
	s := handlerSummary{Name: h.Name, Categories: h.Categories}
	ps, at, err := c.partitions(ctx, h.Name, false)
	s.Read = at
	if err != nil {
		s.Err = err.Error()
		return s
	}
	for _, p := range ps {
		if p.Key == "" {
			continue // an unpartitioned category's stream
		}
		s.Partitions++
		if p.Owner != "" {
			s.Owned++
		} else {
			s.Unowned++
		}
		if p.Halted {
			s.Halted++
		}
		if p.Paused {
			s.Paused++
		}
	}
	for _, p := range ps {
		s.Lag += p.Lag
		s.Backlog += p.Lag + p.Pending
	}
	if pauses, err := c.in.Paused(ctx, h.Name); err == nil {
		for _, p := range pauses {
			if p.Partition == "" {
				s.WholePause = &p
			}
		}
	}
	s.Instances, _ = c.in.Instances(ctx, h.Name)
	s.Chart = c.samples.chart(h.Name)
	return s
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	hs, err := c.in.KnownHandlers(ctx)
	cancel()
	b := c.page(w, r, "Overview", "overview")
	data := struct {
		base
		Handlers []handlerSummary
		Faults   []inspect.Fault
		Window   time.Duration
		Interval time.Duration
	}{base: b, Window: c.o.SampleWindow, Interval: c.o.SampleInterval}
	if err != nil {
		data.Problem = err.Error()
	}
	fctx, fcancel := c.ctx(r)
	data.Faults, _, err = c.faults(fctx, false)
	fcancel()
	if err != nil && data.Problem == "" {
		data.Problem = err.Error()
	}
	for _, h := range hs {
		data.Handlers = append(data.Handlers, c.summarize(r, h))
	}
	c.render(w, "overview", http.StatusOK, data)
}

// partitionRow is one partition on a handler page.
type partitionRow struct {
	inspect.PartitionInfo
	Backlog int64
}

func (c *Console) handler(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	name := q.Get("name")
	ctx, cancel := c.ctx(r)
	defer cancel()
	h, err := c.in.Handler(ctx, name)
	if err != nil {
		c.fail(w, r, statusOf(err), err)
		return
	}
	search, sortBy := q.Get("q"), q.Get("sort")
	page, _ := strconv.Atoi(q.Get("page"))
	page = max(page, 1)
	// The histogram and the sorted views need every partition: they
	// use the handler's shared read. The view by key reads only its
	// page, live, and shows the histogram only of a read already there.
	var shown []partitionRow
	total := 0
	var sorted time.Time
	by := map[string]func(p inspect.PartitionInfo) int64{
		"lag":     func(p inspect.PartitionInfo) int64 { return p.Lag },
		"backlog": func(p inspect.PartitionInfo) int64 { return p.Lag + p.Pending },
		"age":     func(p inspect.PartitionInfo) int64 { return int64(p.HeadAge) },
	}[sortBy]
	all, at, ok := c.sharedPartitions(name)
	if by != nil {
		if all, at, err = c.partitions(ctx, name, false); err != nil {
			c.fail(w, r, statusOf(err), err)
			return
		}
		ok = true
	}
	var hist template.HTML
	if ok {
		var lags []int64
		for _, p := range all {
			if p.Key != "" {
				lags = append(lags, p.Lag)
			}
		}
		hist = histogram(lags)
	}
	if by != nil {
		var rows []inspect.PartitionInfo
		for _, p := range all {
			if p.Key != "" && strings.Contains(p.Key, search) {
				rows = append(rows, p)
			}
		}
		slices.SortStableFunc(rows, func(a, b inspect.PartitionInfo) int { return cmp.Compare(by(b), by(a)) })
		total, sorted = len(rows), at
		page = min(page, max(1, (total+pageSize-1)/pageSize))
		for _, p := range rows[min((page-1)*pageSize, total):min(page*pageSize, total)] {
			shown = append(shown, partitionRow{PartitionInfo: p, Backlog: p.Lag + p.Pending})
		}
	} else {
		sortBy = "key"
		pg, err := c.in.PartitionPage(ctx, name, inspect.PageQuery{Search: search, Offset: (page - 1) * pageSize, Limit: pageSize})
		if err != nil {
			c.fail(w, r, statusOf(err), err)
			return
		}
		if last := max(1, (pg.Total+pageSize-1)/pageSize); page > last {
			// Past the end (the partitions shrank, or a typed URL): the
			// last page instead.
			page = last
			pg, err = c.in.PartitionPage(ctx, name, inspect.PageQuery{Search: search, Offset: (page - 1) * pageSize, Limit: pageSize})
			if err != nil {
				c.fail(w, r, statusOf(err), err)
				return
			}
		}
		total = pg.Total
		for _, p := range pg.Partitions {
			shown = append(shown, partitionRow{PartitionInfo: p, Backlog: p.Lag + p.Pending})
		}
	}
	pages := max(1, (total+pageSize-1)/pageSize)
	data := struct {
		base
		Handler      inspect.HandlerInfo
		Rows         []partitionRow
		Total        int
		Search, Sort string
		Page, Pages  int
		Sorted       time.Time // when the sorted view's partitions were read; zero for the live view by key
		Histogram    template.HTML
	}{base: c.page(w, r, name, "overview"), Handler: h, Rows: shown, Total: total, Search: search, Sort: sortBy,
		Page: min(page, pages), Pages: pages, Sorted: sorted, Histogram: hist}
	c.render(w, "handler", http.StatusOK, data)
}

func (c *Console) partition(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	name, stream := q.Get("handler"), q.Get("stream")
	ctx, cancel := c.ctx(r)
	defer cancel()
	if err := c.in.CheckPartition(ctx, name, stream); err != nil {
		c.fail(w, r, statusOf(err), err)
		return
	}
	in, err := c.in.Inspect(ctx, name, stream)
	if err != nil {
		c.fail(w, r, statusOf(err), err)
		return
	}
	data := struct {
		base
		Handler, Stream string
		// PauseStream is the partition stream Pause and Resume name it
		// by (a pm's halted value is named by its value here).
		PauseStream string
		In          inspect.Inspection
		Owner       string // the lease holder's owner id
		Token       string // its lease token, the group's consumer name
		Generation  int64
		Expires     time.Time
		Deliveries  int64 // the head's, from its group's pending list (0: not pending)
		Last        []inspect.Entry
		DLQ         []inspect.DLQEntry
		Pause       *inspect.Pause
		Problems    []string
	}{base: c.page(w, r, stream, "overview"), Handler: name, Stream: stream, PauseStream: stream, In: in}
	if in.Halt != nil {
		data.PauseStream = rdb.PartitionStream(in.Halt.Category, in.Halt.Key)
	}
	if in.Lease != "" {
		data.Token = in.Lease
		var err error
		if data.Owner, data.Generation, err = rdb.ParseToken(in.Lease); err != nil {
			data.Owner = in.Lease
		}
		data.Expires = time.Now().Add(in.LeaseTTL)
	}
	if in.Head != nil {
		for _, l := range in.Lanes {
			for _, pe := range l.Pending {
				if l.Stream == in.Head.Stream && pe.ID == in.Head.ID {
					data.Deliveries = pe.Deliveries
				}
			}
		}
	}
	if len(in.Lanes) > 0 {
		if data.Last, err = c.in.LastEntries(ctx, in.Lanes[0].Stream, 10); err != nil {
			data.Problems = append(data.Problems, err.Error())
		}
	}
	// Its dead letters: those the handler moved from its lanes' DLQs.
	seen := map[string]bool{}
	for _, l := range in.Lanes {
		cat, key, ok := rdb.ParsePartitionStream(l.Stream)
		if !ok || seen[rdb.DLQStream(cat, key)] {
			continue // a backfill lane shares its partition's DLQ
		}
		seen[rdb.DLQStream(cat, key)] = true
		ds, err := c.in.DLQEntriesOf(ctx, rdb.DLQStream(cat, key))
		if err != nil {
			data.Problems = append(data.Problems, err.Error())
			continue
		}
		for _, d := range ds {
			if d.Handler == name {
				data.DLQ = append(data.DLQ, d)
			}
		}
	}
	if ps, err := c.in.Paused(ctx, name); err != nil {
		data.Problems = append(data.Problems, err.Error())
	} else {
		for _, p := range ps {
			if p.Partition == data.PauseStream || p.Partition == "" {
				data.Pause = &p
			}
		}
	}
	c.render(w, "partition", http.StatusOK, data)
}

// haltRow is a halted partition on the halted page, with its pause.
type haltRow struct {
	inspect.HaltRecord
	PauseStream   string // the stream Pause and Resume name it by
	Paused        bool   // paused by a mark of its own
	HandlerPaused bool   // its whole handler is paused
}

func (c *Console) halted(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	data := struct {
		base
		Halts []haltRow
		DLQ   []inspect.DLQEntry
	}{base: c.page(w, r, "Halted", "halted")}
	var errs []error
	halts, err := c.in.Halts(ctx, "")
	errs = append(errs, err)
	pauses, err := c.in.Paused(ctx, "")
	errs = append(errs, err)
	marks := map[string]bool{}
	for _, p := range pauses {
		marks[p.Mark] = true
		if p.Partition == "" {
			marks["handler "+p.Handler] = true
		}
	}
	for _, h := range halts {
		data.Halts = append(data.Halts, haltRow{HaltRecord: h, PauseStream: rdb.PartitionStream(h.Category, h.Key),
			Paused: marks[rdb.MetaKey(h.LeaseKey)], HandlerPaused: marks["handler "+h.Handler]})
	}
	data.DLQ, err = c.in.DLQEntries(ctx, "")
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		data.Problem = err.Error()
	}
	c.render(w, "halted", http.StatusOK, data)
}

func (c *Console) paused(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	data := struct {
		base
		Pauses []inspect.Pause
	}{base: c.page(w, r, "Paused", "paused")}
	var err error
	if data.Pauses, err = c.in.Paused(ctx, ""); err != nil {
		data.Problem = err.Error()
	}
	c.render(w, "paused", http.StatusOK, data)
}

func (c *Console) audit(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	data := struct {
		base
		Entries []inspect.AuditEntry
	}{base: c.page(w, r, "Audit log", "audit")}
	var err error
	if data.Entries, err = c.in.AuditLog(ctx, 200); err != nil {
		data.Problem = err.Error()
	}
	c.render(w, "audit", http.StatusOK, data)
}
