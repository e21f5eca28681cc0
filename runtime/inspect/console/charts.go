package console

import (
	"context"
	"fmt"
	"html/template"
	"strings"
	"sync"
	"time"

	"github.com/seqby/seqby/runtime/inspect"
)

// sampler keeps each handler's backlog and lag over the console's
// sampling window, for the overview's charts. It holds at most
// window/interval samples per handler, and forgets a handler no sample
// saw for a window.
type sampler struct {
	mu       sync.Mutex
	window   time.Duration
	interval time.Duration
	series   map[string][]sample
}

type sample struct {
	at           time.Time
	backlog, lag int64
}

func newSampler(window, interval time.Duration) *sampler {
	return &sampler{window: window, interval: interval, series: map[string][]sample{}}
}

// add records one sample of handler and drops those older than the
// window.
func (s *sampler) add(handler string, at time.Time, backlog, lag int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := append(s.series[handler], sample{at, backlog, lag})
	cut := 0
	for cut < len(ss) && at.Sub(ss[cut].at) > s.window {
		cut++
	}
	s.series[handler] = ss[cut:]
}

// prune forgets the handlers with no sample within the window.
func (s *sampler) prune(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for h, ss := range s.series {
		if len(ss) == 0 || now.Sub(ss[len(ss)-1].at) > s.window {
			delete(s.series, h)
		}
	}
}

// sample takes a sample of every handler each interval until ctx ends.
// When a round takes longer than a tenth of the interval (many
// partitions), the rounds start ten times a round's duration apart
// instead, so the console reads Redis at most a tenth of the time.
func (c *Console) sample(ctx context.Context) {
	defer close(c.done)
	for {
		start := time.Now()
		c.sampleOnce(ctx)
		t := time.NewTimer(max(c.o.SampleInterval, costFactor*time.Since(start)) - time.Since(start))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// sampleReadTimeout bounds each of the sampler's reads (or
// Options.Timeout if longer): a whole read of a handler's partitions
// takes seconds at 100,000 of them, more than a page may.
const sampleReadTimeout = 2 * time.Minute

func (c *Console) sampleOnce(ctx context.Context) {
	// Each read its own timeout: a slow handler does not starve the
	// others' samples, nor the faults.
	bounded := func(f func(ctx context.Context) error) error {
		ctx, cancel := context.WithTimeout(ctx, max(c.o.Timeout, sampleReadTimeout))
		defer cancel()
		return f(ctx)
	}
	var hs []inspect.HandlerInfo
	if err := bounded(func(ctx context.Context) (err error) { hs, err = c.in.KnownHandlers(ctx); return err }); err != nil {
		c.o.Logger.Debug("seqby console: sampling failed", "err", err)
		return
	}
	now := time.Now()
	known := map[string]bool{}
	for _, h := range hs {
		known[h.Name] = true
		var ps []inspect.PartitionInfo
		err := bounded(func(ctx context.Context) (err error) { ps, _, err = c.partitions(ctx, h.Name, true); return err })
		if err != nil {
			c.o.Logger.Debug("seqby console: sampling failed", "handler", h.Name, "err", err)
			continue
		}
		var backlog, lag int64
		for _, p := range ps {
			backlog += p.Lag + p.Pending
			lag += p.Lag
		}
		c.samples.add(h.Name, now, backlog, lag)
	}
	c.samples.prune(now)
	c.snaps.keep(known)
	if err := bounded(func(ctx context.Context) error { _, _, err := c.faults(ctx, true); return err }); err != nil {
		c.o.Logger.Debug("seqby console: reading the faults failed", "err", err)
	}
}

// chart is handler's backlog (solid) and lag (dashed) over the window
// as a small SVG line chart.
func (s *sampler) chart(handler string) template.HTML {
	s.mu.Lock()
	ss := append([]sample(nil), s.series[handler]...)
	s.mu.Unlock()
	const w, h = 240.0, 48.0
	if len(ss) == 0 {
		return template.HTML(fmt.Sprintf(`<svg class="chart" width="%d" height="%d" role="img" aria-label="no samples yet"><text x="4" y="28">no samples yet</text></svg>`, int(w), int(h)))
	}
	var top int64 = 1
	for _, x := range ss {
		top = max(top, x.backlog, x.lag)
	}
	// The x axis spans the samples kept, up to the window: a console
	// started a minute ago draws its minute across the chart.
	last := ss[len(ss)-1]
	span := last.at.Sub(ss[0].at)
	x := func(at time.Time) float64 {
		if span <= 0 {
			return w - 4 // one sample: a dot at the right
		}
		return 4 + (w-8)*float64(at.Sub(ss[0].at))/float64(span)
	}
	y := func(v int64) float64 { return h - 2 - (h-18)*float64(v)/float64(top) } // below the labels
	line := func(v func(sample) int64) string {
		var pts strings.Builder
		for _, p := range ss {
			fmt.Fprintf(&pts, "%.1f,%.1f ", x(p.at), y(v(p)))
		}
		return strings.TrimSpace(pts.String())
	}
	// Numbers only are formatted into the SVG: nothing from Redis.
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="backlog and lag over the last %s: backlog now %d, lag now %d, peak %d">`,
		int(w), int(h), int(w), int(h), roundSpan(span), last.backlog, last.lag, top)
	fmt.Fprintf(&b, `<polyline class="backlog" fill="none" stroke="currentColor" stroke-width="1.5" points="%s"/>`, line(func(p sample) int64 { return p.backlog }))
	fmt.Fprintf(&b, `<polyline class="lag" fill="none" stroke="currentColor" stroke-width="1" stroke-dasharray="3 2" points="%s"/>`, line(func(p sample) int64 { return p.lag }))
	// The latest values as dots, so one sample shows too.
	fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="2.5" fill="currentColor"/><circle cx="%.1f" cy="%.1f" r="2" fill="none" stroke="currentColor"/>`,
		x(last.at), y(last.backlog), x(last.at), y(last.lag))
	fmt.Fprintf(&b, `<text x="4" y="10">last %s: backlog %d, lag %d</text><text x="%d" y="10" text-anchor="end">peak %d</text></svg>`,
		roundSpan(span), last.backlog, last.lag, int(w)-2, top)
	return template.HTML(b.String())
}

// roundSpan is a chart's span as a label: to a tenth of a second under
// ten seconds, else to the second.
func roundSpan(d time.Duration) time.Duration {
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}

// histogram is the distribution of lags across partitions as an SVG
// bar chart: how many partitions have none, 1-9, 10-99, 100-999 and 1000
// or more entries not delivered yet.
func histogram(lags []int64) template.HTML {
	labels := []string{"0", "1-9", "10-99", "100-999", "1000+"}
	counts := make([]int, len(labels))
	for _, b := range lags {
		switch {
		case b == 0:
			counts[0]++
		case b < 10:
			counts[1]++
		case b < 100:
			counts[2]++
		case b < 1000:
			counts[3]++
		default:
			counts[4]++
		}
	}
	top := 1
	for _, n := range counts {
		top = max(top, n)
	}
	const bw, h = 56, 80
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="histogram" width="%d" height="%d" role="img" aria-label="partitions by lag">`, bw*len(labels), h+30)
	for i, n := range counts {
		bh := h * n / top
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d"/><text x="%d" y="%d" text-anchor="middle">%d</text><text x="%d" y="%d" text-anchor="middle">%s</text>`,
			i*bw+6, h-bh+12, bw-12, bh, i*bw+bw/2, h-bh+10, n, i*bw+bw/2, h+26, labels[i])
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}
