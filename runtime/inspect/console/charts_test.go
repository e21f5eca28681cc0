package console

import (
	"strings"
	"testing"
	"time"
)

// The line chart draws backlog and lag across the samples it kept (up to
// the window), the latest as dots, and forgets samples older than the
// window; the histogram counts partitions per lag bucket.
func TestCharts(t *testing.T) {
	s := newSampler(time.Minute, 10*time.Second)
	if got := string(s.chart("h")); !strings.Contains(got, "no samples yet") {
		t.Fatalf("a chart with no samples: %s", got)
	}
	t0 := time.Unix(1000, 0)
	s.add("h", t0, 500, 400) // out of the window by the last sample
	s.add("h", t0.Add(50*time.Second), 30, 20)
	s.add("h", t0.Add(70*time.Second), 12, 7)
	got := string(s.chart("h"))
	for _, want := range []string{`class="backlog"`, `class="lag"`, "backlog now 12, lag now 7, peak 30", "peak 30",
		"last 20s: backlog 12, lag 7", `points="4.0,16.0 236.0,34.0"`} {
		if !strings.Contains(got, want) {
			t.Errorf("chart: no %q in %s", want, got)
		}
	}
	// One sample is a dot at the right, not an empty box.
	one := newSampler(time.Minute, 10*time.Second)
	one.add("h", t0, 3, 1)
	if got := string(one.chart("h")); !strings.Contains(got, `<circle cx="236.0"`) || !strings.Contains(got, "last 0s: backlog 3, lag 1") {
		t.Errorf("a chart of one sample: %s", got)
	}
	if n := len(s.series["h"]); n != 2 {
		t.Errorf("%d samples kept, want 2", n)
	}
	s.prune(t0.Add(200 * time.Second))
	if _, ok := s.series["h"]; ok {
		t.Error("a handler with no sample in the window was kept")
	}

	h := string(histogram([]int64{0, 0, 3, 9, 10, 99, 100, 5000, 1000}))
	for _, want := range []string{"partitions by lag", ">2</text><text", ">0</text>", ">1-9</text>", ">1000+</text>"} {
		if !strings.Contains(h, want) {
			t.Errorf("histogram: no %q in %s", want, h)
		}
	}
	// The bars' counts, in order: 0, 1-9, 10-99, 100-999, 1000+.
	var counts []string
	for _, part := range strings.Split(h, `text-anchor="middle">`)[1:] {
		counts = append(counts, part[:strings.Index(part, "<")])
	}
	if got, want := strings.Join(counts, " "), "2 0 2 1-9 2 10-99 1 100-999 2 1000+"; got != want {
		t.Errorf("histogram bars %q, want %q", got, want)
	}
}
