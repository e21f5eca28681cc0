package runtime

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
)

// TestHealthUnreadyWhenRedisStops: ready once running; when Redis is
// killed, not ready (the engine is still live: a restart would not help);
// ready again after Redis comes back; not live after Run returns.
func TestHealthUnreadyWhenRedisStops(t *testing.T) {
	s := redistest.New(t)
	c := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	ctx := ctxT(t)
	if err := NewPublisher(c).Publish(ctx, ev("k", 1)); err != nil {
		t.Fatal(err)
	}
	r := startEngine(t, c, fastOptions("health-1"), keyedHandler("health", func(context.Context, *testEvent) error { return nil }))
	srv := httptest.NewServer(r.HealthHandler())
	t.Cleanup(srv.Close)
	get := func(query string) (int, Health) {
		resp, err := http.Get(srv.URL + "/healthz" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var h Health
		if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, h
	}

	eventually(t, 10*time.Second, "ready", func() bool { return r.Health(ctx).Ready })
	if code, h := get(""); code != http.StatusOK || !h.Ready || !h.Live || len(h.Reasons) != 0 {
		t.Fatalf("ready engine: %d %+v", code, h)
	}

	s.Kill()
	eventually(t, 10*time.Second, "unready with Redis down", func() bool { return !r.Health(ctx).Ready })
	code, h := get("")
	if code != http.StatusServiceUnavailable || h.Ready || !h.Live || h.Redis == "ok" ||
		!strings.Contains(strings.Join(h.Reasons, "\n"), "redis does not answer") {
		t.Fatalf("Redis down: %d %+v", code, h)
	}
	if code, _ := get("?live"); code != http.StatusOK {
		t.Fatalf("liveness with Redis down: %d, want 200", code)
	}

	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "ready again", func() bool { return r.Health(ctx).Ready })

	r.stop()
	if h := r.Health(ctx); h.Live || h.Ready {
		t.Fatalf("after Run returned: %+v", h)
	}
	if code, _ := get("?live"); code != http.StatusServiceUnavailable {
		t.Fatalf("liveness after Run returned: %d, want 503", code)
	}
}

// The health JSON has no zero times: last_renew and last_discovery are
// left out until there is one (before issue #26 a ready engine showed
// last_renew 0001-01-01 until its first heartbeat), and once renewed both
// are there. The
// "?live" body says nothing of readiness or Redis, which it did not ask
// (it read "ready": false for a live engine).
func TestHealthJSON(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	opts := fastOptions("health-json")
	e, err := NewEngine(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Register(keyedHandler("health", func(context.Context, *testEvent) error { return nil })); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(e.HealthHandler())
	t.Cleanup(srv.Close)
	get := func(query string) (int, map[string]json.RawMessage) {
		resp, err := http.Get(srv.URL + "/healthz" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]json.RawMessage
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, body
	}
	type want struct {
		code int
		keys string // the body's keys, sorted
	}
	check := func(phase string, tests map[string]want) {
		t.Helper()
		for query, w := range tests {
			code, body := get(query)
			keys := make([]string, 0, len(body))
			for k := range body {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			if code != w.code || strings.Join(keys, " ") != w.keys {
				t.Errorf("%s, %q: %d with %v, want %d with [%s]", phase, query, code, keys, w.code, w.keys)
			}
			for _, k := range []string{"last_renew", "last_discovery"} {
				var at time.Time
				if raw, ok := body[k]; ok && (json.Unmarshal(raw, &at) != nil || at.IsZero()) {
					t.Errorf("%s, %q: %s is %s, want a time", phase, query, k, raw)
				}
			}
		}
	}

	check("before Run", map[string]want{
		"":      {http.StatusServiceUnavailable, "live ready reasons redis"},
		"?live": {http.StatusServiceUnavailable, "live reasons"},
	})
	done := make(chan error, 1)
	runCtx, cancel := context.WithCancel(context.Background())
	go func() { done <- e.Run(runCtx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	// last_renew appears with the first heartbeat's renewal, one
	// HeartbeatInterval after Run starts; never as a zero time.
	eventually(t, 10*time.Second, "ready and renewed", func() bool { h := e.Health(ctx); return h.Ready && !h.LastRenew.IsZero() })
	check("ready", map[string]want{
		"":      {http.StatusOK, "last_discovery last_renew live ready reasons redis"},
		"?live": {http.StatusOK, "last_discovery last_renew live reasons"},
	})
}
