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
	Err        string
}

// summarize reads one handler's summary.
func (c *Console) summarize(r *http.Request, h inspect.HandlerInfo) handlerSummary {
	ctx, cancel := c.ctx(r)
	defer cancel()
	s := handlerSummary{Name: h.Name, Categories: h.Categories}
	ps, err := c.in.Partitions(ctx, h.Name)
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
	}{base: b, Window: c.o.SampleWindow}
	if err != nil {
		data.Problem = err.Error()
	}
	fctx, fcancel := c.ctx(r)
	data.Faults, err = c.in.Faults(fctx)
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
		c.fail(w, r, http.StatusNotFound, err)
		return
	}
	ps, err := c.in.Partitions(ctx, name)
	if err != nil {
		c.fail(w, r, http.StatusBadGateway, err)
		return
	}
	search := q.Get("q")
	var rows []partitionRow
	var backlogs []int64
	for _, p := range ps {
		if p.Key == "" {
			continue
		}
		row := partitionRow{PartitionInfo: p, Backlog: p.Lag + p.Pending}
		backlogs = append(backlogs, row.Backlog)
		if search != "" && !strings.Contains(p.Key, search) {
			continue
		}
		rows = append(rows, row)
	}
	sortBy := q.Get("sort")
	switch sortBy {
	case "lag":
		slices.SortStableFunc(rows, func(a, b partitionRow) int { return cmp.Compare(b.Lag, a.Lag) })
	case "backlog":
		slices.SortStableFunc(rows, func(a, b partitionRow) int { return cmp.Compare(b.Backlog, a.Backlog) })
	case "idle":
		slices.SortStableFunc(rows, func(a, b partitionRow) int { return cmp.Compare(b.Idle, a.Idle) })
	default:
		sortBy = "key"
	}
	page, _ := strconv.Atoi(q.Get("page"))
	pages := max(1, (len(rows)+pageSize-1)/pageSize)
	page = min(max(page, 1), pages)
	shown := rows[min((page-1)*pageSize, len(rows)):min(page*pageSize, len(rows))]
	data := struct {
		base
		Handler      inspect.HandlerInfo
		Rows         []partitionRow
		Total        int
		Search, Sort string
		Page, Pages  int
		Histogram    template.HTML
	}{base: c.page(w, r, name, "overview"), Handler: h, Rows: shown, Total: len(rows), Search: search, Sort: sortBy,
		Page: page, Pages: pages, Histogram: histogram(backlogs)}
	c.render(w, "handler", http.StatusOK, data)
}

func (c *Console) partition(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	name, stream := q.Get("handler"), q.Get("stream")
	ctx, cancel := c.ctx(r)
	defer cancel()
	if err := c.in.CheckPartition(ctx, name, stream); err != nil {
		c.fail(w, r, http.StatusNotFound, err)
		return
	}
	in, err := c.in.Inspect(ctx, name, stream)
	if err != nil {
		c.fail(w, r, http.StatusBadGateway, err)
		return
	}
	data := struct {
		base
		Handler, Stream string
		In              inspect.Inspection
		Owner           string
		Generation      int64
		Expires         time.Time
		Last            []inspect.Entry
		DLQ             []inspect.DLQEntry
		Pause           *inspect.Pause
		Problems        []string
	}{base: c.page(w, r, stream, "overview"), Handler: name, Stream: stream, In: in}
	if in.Lease != "" {
		data.Owner, data.Generation = in.Lease, 0
		if i := strings.LastIndexByte(in.Lease, ':'); i > 0 {
			data.Owner = in.Lease[:i]
			data.Generation, _ = strconv.ParseInt(in.Lease[i+1:], 10, 64)
		}
		data.Expires = time.Now().Add(in.LeaseTTL)
	}
	if len(in.Lanes) > 0 {
		if data.Last, err = c.in.LastEntries(ctx, in.Lanes[0].Stream, 10); err != nil {
			data.Problems = append(data.Problems, err.Error())
		}
	}
	if dlq, err := c.in.DLQEntries(ctx, name); err != nil {
		data.Problems = append(data.Problems, err.Error())
	} else {
		for _, d := range dlq {
			if d.Partition == stream || d.Partition == in.Partition {
				data.DLQ = append(data.DLQ, d)
			}
		}
	}
	if ps, err := c.in.Paused(ctx, name); err != nil {
		data.Problems = append(data.Problems, err.Error())
	} else {
		for _, p := range ps {
			if p.Partition == stream || p.Partition == "" {
				data.Pause = &p
			}
		}
	}
	c.render(w, "partition", http.StatusOK, data)
}

func (c *Console) halted(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	data := struct {
		base
		Halts []inspect.HaltRecord
		DLQ   []inspect.DLQEntry
	}{base: c.page(w, r, "Halted", "halted")}
	var errs []error
	var err error
	data.Halts, err = c.in.Halts(ctx, "")
	errs = append(errs, err)
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
