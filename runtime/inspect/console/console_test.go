package console

import (
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
	"github.com/seqby/seqby/runtime"
	"github.com/seqby/seqby/runtime/inspect"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// placed is the scene's message: shop:{Client}.
type placed struct {
	Client string `json:"client"`
	Seq    int    `json:"seq"`
	Poison bool   `json:"poison,omitempty"`
	Note   string `json:"note,omitempty"`
}

func (*placed) StreamCategory() string { return "shop" }
func (m *placed) PartitionKey() (string, error) {
	return runtime.Key("shop", "Client", m.Client)
}

// scene is a real redis-server with engines running handler "orders",
// which fails on poison messages until cured.
type scene struct {
	t       *testing.T
	c       *redis.Client
	ctx     context.Context
	cured   atomic.Bool
	mu      sync.Mutex
	applied map[string][]int
}

func newScene(t *testing.T, engines int) *scene {
	s := &scene{t: t, applied: map[string][]int{}}
	srv := redistest.New(t)
	s.c = redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { s.c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	s.ctx = ctx
	for i := range engines {
		s.startEngine("w" + string(rune('1'+i)))
	}
	return s
}

func (s *scene) registration() runtime.Registration {
	return runtime.Registration{Name: "orders", Kind: runtime.EventHandler, Key: "Client", Sequential: true,
		Routes: []runtime.Route{{
			Category: "shop", Type: "placed", PartitionField: "Client",
			Decode: func(cd runtime.Codec, p []byte) (any, error) {
				var m placed
				return &m, cd.Unmarshal(p, &m)
			},
			PartitionKey: func(m any) (string, error) { return m.(*placed).PartitionKey() },
			Invoke: func(_ context.Context, _ any, m any) error {
				p := m.(*placed)
				if p.Poison && !s.cured.Load() {
					return runtime.Permanent(errors.New("poison <b>bold</b> & \"quoted\""))
				}
				s.mu.Lock()
				s.applied[p.Client] = append(s.applied[p.Client], p.Seq)
				s.mu.Unlock()
				return nil
			},
		}}}
}

func (s *scene) startEngine(owner string) {
	e, err := runtime.NewEngine(s.c, runtime.Options{OwnerID: owner, LeaseTTL: time.Second,
		HeartbeatInterval: 150 * time.Millisecond, DiscoveryInterval: 50 * time.Millisecond,
		BlockTimeout: 200 * time.Millisecond, Retry: runtime.RetryPolicy{MaxRetries: -1},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		s.t.Fatal(err)
	}
	if err := e.Register(s.registration()); err != nil {
		s.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	s.t.Cleanup(func() { cancel(); <-done })
}

func (s *scene) publish(ms ...*placed) {
	s.t.Helper()
	p := runtime.NewPublisher(s.c)
	for _, m := range ms {
		if err := p.Publish(s.ctx, m); err != nil {
			s.t.Fatal(err)
		}
	}
}

// waitHalted waits until n partitions are halted, and returns their halts.
func (s *scene) waitHalted(n int, what string) []inspect.HaltRecord {
	s.t.Helper()
	var hs []inspect.HaltRecord
	eventually(s.t, 20*time.Second, what, func() bool {
		hs, _ = inspect.New(s.c).Halts(s.ctx, "")
		return len(hs) == n
	})
	return hs
}

func (s *scene) count(client string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.applied[client])
}

func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// hostile is a key holding markup, quotes and non-ASCII (no braces: a key
// may not hold them).
const hostile = `<img src=x onerror=alert(1)>"'é`

// client is a browser stand-in: it keeps cookies and sends basic auth
// when user is set.
type client struct {
	t          *testing.T
	base       string
	h          *http.Client
	user, pass string
}

func newClient(t *testing.T, base, user, pass string) *client {
	jar, _ := cookiejar.New(nil)
	return &client{t: t, base: base, user: user, pass: pass, h: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (c *client) do(method, path string, form url.Values) (int, string, http.Header) {
	c.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, c.base+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if c.user != "" {
		req.SetBasicAuth(c.user, c.pass)
	}
	res, err := c.h.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b), res.Header
}

var (
	csrfField    = regexp.MustCompile(`name="csrf" value="([0-9a-f]{64})"`)
	confirmField = regexp.MustCompile(`name="token" value="([^"]+)"`)
)

// confirm posts the action form names as a browser does: its preview,
// then the confirmation the preview offers (with its token).
func (c *client) confirm(form url.Values) (int, string, http.Header) {
	c.t.Helper()
	pre := url.Values{}
	for k, v := range form {
		if k != "confirm" && k != "token" {
			pre[k] = v
		}
	}
	code, body, _ := c.do("POST", "/action", pre)
	m := confirmField.FindStringSubmatch(body)
	if code != http.StatusOK || m == nil {
		c.t.Fatalf("the preview of %v: %d, no confirmation offered\n%s", pre, code, body)
	}
	conf := url.Values{"confirm": {"yes"}, "token": {html.UnescapeString(m[1])}}
	for k, v := range pre {
		conf[k] = v
	}
	return c.do("POST", "/action", conf)
}

// csrf loads path and returns the CSRF token its forms carry.
func (c *client) csrf(path string) string {
	c.t.Helper()
	_, body, _ := c.do("GET", path, nil)
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		c.t.Fatalf("no CSRF token on %s", path)
	}
	return m[1]
}

// with is v with the fields kv (name, value, ...) set.
func with(v url.Values, kv ...string) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = vs
	}
	for i := 0; i < len(kv); i += 2 {
		out.Set(kv[i], kv[i+1])
	}
	return out
}

func serve(t *testing.T, s *scene, o Options) string {
	con, err := New(inspect.New(s.c), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(con.Close)
	mux := http.NewServeMux()
	mux.Handle("/ops/", http.StripPrefix("/ops", con))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/ops"
}

// Every page renders on a real Redis with a halted key and a hostile key,
// escapes what it shows from Redis, and a read-only console refuses every
// action.
func TestPagesReadOnly(t *testing.T) {
	s := newScene(t, 1)
	s.publish(&placed{Client: "a", Seq: 1, Poison: true}, &placed{Client: "a", Seq: 2},
		&placed{Client: hostile, Seq: 1, Note: "<script>alert(2)</script>"})
	eventually(t, 20*time.Second, "the hostile key applied", func() bool { return s.count(hostile) == 1 })
	// An entry no publisher would write: a hostile type, which halts.
	if err := s.c.XAdd(s.ctx, &redis.XAddArgs{Stream: "shop:{" + hostile + "}", Values: []any{"type", "<script>alert(2)</script>", "payload", "\x00\xff<i>"}}).Err(); err != nil {
		t.Fatal(err)
	}
	s.publish(&placed{Client: hostile, Seq: 2}) // wakes its owner (a raw XADD signals nothing)
	s.waitHalted(2, "a and the hostile key halted")
	// A fault an engine reports (its heartbeats write these).
	if err := rdb.ReportFaults(s.ctx, s.c, "w9", map[string][]rdb.FaultReport{"orders": {{Kind: "released", Handler: "orders", Stream: "shop:{zz}", Err: "NOPERM <u>no</u>", Since: time.Now()}}}, nil, time.Minute); err != nil {
		t.Fatal(err)
	}
	base := serve(t, s, Options{SampleInterval: 50 * time.Millisecond})
	c := newClient(t, base, "", "")
	hostileStream := "shop:{" + hostile + "}"
	for _, tc := range []struct {
		path string
		want []string
	}{
		{"/", []string{"orders", "read-only", "categories: shop", "w1", "Faults the engines report", "w9", "NOPERM &lt;u&gt;no&lt;/u&gt;"}},
		{"/handler?name=orders", []string{"partitions by lag", `>a</a>`, "&lt;img src=x onerror=alert(1)&gt;&#34;&#39;é"}},
		{"/handler?name=orders&q=a&sort=lag", []string{">a</a>"}},
		{"/partition?handler=orders&stream=" + url.QueryEscape("shop:{a}"), []string{"Halted", "poison &lt;b&gt;bold&lt;/b&gt; &amp; &#34;quoted&#34;", "Lease"}},
		{"/partition?handler=orders&stream=" + url.QueryEscape(hostileStream), []string{"&lt;script&gt;alert(2)&lt;/script&gt;", "&lt;i&gt;"}},
		{"/halted", []string{"shop:{a}", "handler failed permanently", "&lt;script&gt;alert(2)&lt;/script&gt;"}},
		{"/paused", []string{"Nothing is paused."}},
		{"/audit", []string{"No operator action recorded yet."}},
	} {
		code, body, h := c.do("GET", tc.path, nil)
		if code != http.StatusOK {
			t.Errorf("GET %s: %d\n%s", tc.path, code, body)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(body, w) {
				t.Errorf("GET %s: no %q in\n%s", tc.path, w, body)
			}
		}
		for _, bad := range []string{"<img src=x", "<script>alert", "<b>bold</b>", "<i>", "<u>"} {
			if strings.Contains(body, bad) {
				t.Errorf("GET %s: unescaped %q", tc.path, bad)
			}
		}
		if !strings.Contains(h.Get("Content-Security-Policy"), "default-src 'self'") {
			t.Errorf("GET %s: no Content-Security-Policy", tc.path)
		}
	}
	for _, path := range []string{"/handler?name=ordres", "/partition?handler=orders&stream=nope"} {
		if code, body, _ := c.do("GET", path, nil); code != http.StatusNotFound || !strings.Contains(body, "did you mean") && !strings.Contains(body, "no such partition") {
			t.Errorf("GET %s: %d, want 404 with the error\n%s", path, code, body)
		}
	}
	tok := strings.Repeat("0", 64) // a read-only console renders no form
	code, body, _ := c.do("POST", "/action", url.Values{"csrf": {tok}, "op": {"skip"}, "handler": {"orders"}, "stream": {"shop:{a}"}, "id": {"1-0"}})
	if code != http.StatusForbidden || !strings.Contains(body, "read-only") {
		t.Fatalf("an action on a read-only console: %d\n%s", code, body)
	}
	if _, err := New(inspect.New(s.c), Options{Write: true}); !errors.Is(err, ErrNoToken) {
		t.Fatalf("New with Write and no Token: %v, want ErrNoToken", err)
	}
}

// The actions: refused without the token or the CSRF token, previewed
// with their dry run, done on confirmation with an audit entry naming
// the console user; skip lets the halted key complete, pause stops a key
// and resume lets it go on.
func TestActions(t *testing.T) {
	s := newScene(t, 2)
	s.publish(&placed{Client: "a", Seq: 1, Poison: true}, &placed{Client: "a", Seq: 2}, &placed{Client: "b", Seq: 1})
	eventually(t, 20*time.Second, "a halted and b applied", func() bool {
		hs, _ := inspect.New(s.c).Halts(s.ctx, "")
		return len(hs) == 1 && s.count("b") == 1
	})
	hs, _ := inspect.New(s.c).Halts(s.ctx, "")
	head := hs[0].EntryID
	base := serve(t, s, Options{Write: true, Token: "s3cret"})
	skip := url.Values{"op": {"skip"}, "handler": {"orders"}, "stream": {"shop:{a}"}, "id": {head}, "back": {"/halted"}}

	anon := newClient(t, base, "", "")
	tok := anon.csrf("/halted")
	if code, _, h := anon.do("POST", "/action", with(skip, "csrf", tok)); code != http.StatusUnauthorized || !strings.Contains(h.Get("WWW-Authenticate"), "Basic") {
		t.Fatalf("an action without credentials: %d", code)
	}
	wrong := newClient(t, base, "mallory", "guess")
	tok = wrong.csrf("/halted")
	if code, _, _ := wrong.do("POST", "/action", with(skip, "csrf", tok)); code != http.StatusUnauthorized {
		t.Fatalf("an action with a wrong token: %d", code)
	}
	alice := newClient(t, base, "alice", "s3cret")
	if code, body, _ := alice.do("POST", "/action", skip); code != http.StatusForbidden || !strings.Contains(body, "CSRF") {
		t.Fatalf("an action without a CSRF token: %d\n%s", code, body)
	}
	tok = alice.csrf("/halted")
	if code, _, _ := alice.do("POST", "/action", with(skip, "csrf", strings.Repeat("0", 64))); code != http.StatusForbidden {
		t.Fatalf("an action with a wrong CSRF token: %d", code)
	}
	if _, body, _ := alice.do("GET", "/halted", nil); strings.Contains(body, "s3cret") {
		t.Fatal("a page shows the token")
	}

	// A preview of a refused action says why and offers no confirmation.
	code, body, _ := alice.do("POST", "/action", with(skip, "csrf", tok, "id", "1-0"))
	if code != http.StatusConflict || !strings.Contains(body, "refused") || strings.Contains(body, `id="confirm"`) {
		t.Fatalf("preview of a skip of a non-head: %d\n%s", code, body)
	}
	// The preview changes nothing; the confirmation skips.
	code, body, _ = alice.do("POST", "/action", with(skip, "csrf", tok))
	if code != http.StatusOK || !strings.Contains(body, "acknowledge "+head) || !strings.Contains(body, `id="confirm"`) {
		t.Fatalf("preview of the skip: %d\n%s", code, body)
	}
	if n := s.c.XLen(s.ctx, "seqby:__audit__").Val(); n != 0 || s.count("a") != 0 {
		t.Fatalf("the preview changed something: audit %d, a applied %d", n, s.count("a"))
	}
	// A confirmation needs its preview's token: none, a forged one, or
	// one its preview issued for another action is refused.
	for _, forged := range []string{"", "1.00", confirmField.FindStringSubmatch(body)[1]} {
		other := with(skip, "csrf", tok, "confirm", "yes", "token", html.UnescapeString(forged))
		if forged != "" && forged != "1.00" {
			other.Set("op", "dlq") // the skip's token, for a dlq move
		}
		if code, body, _ := alice.do("POST", "/action", other); code != http.StatusForbidden || !strings.Contains(body, "not issued by this console") {
			t.Fatalf("a confirmation with token %q: %d\n%s", forged, code, body)
		}
	}
	if n := s.c.XLen(s.ctx, "seqby:__audit__").Val(); n != 0 || s.count("a") != 0 {
		t.Fatalf("a refused confirmation changed something: audit %d, a applied %d", n, s.count("a"))
	}
	_, body, _ = alice.do("POST", "/action", with(skip, "csrf", tok))
	confirmation := with(skip, "csrf", tok, "confirm", "yes", "token", html.UnescapeString(confirmField.FindStringSubmatch(body)[1]))
	code, _, h := alice.do("POST", "/action", confirmation)
	if code != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), "/ops/halted?") {
		t.Fatalf("confirmed skip: %d, Location %q", code, h.Get("Location"))
	}
	// A confirmation confirms once.
	if code, body, _ := alice.do("POST", "/action", confirmation); code != http.StatusForbidden || !strings.Contains(body, "confirmed already") {
		t.Fatalf("the skip's confirmation again: %d\n%s", code, body)
	}
	// The page it returns to shows the outcome; a crafted link's does not.
	if _, body, _ := alice.do("GET", strings.TrimPrefix(h.Get("Location"), "/ops"), nil); !strings.Contains(body, `id="notice">skipped `+head) {
		t.Fatalf("the notice after the skip:\n%s", body)
	}
	if _, body, _ := alice.do("GET", "/halted?done="+url.QueryEscape("all skipped; re-enter your token at evil.example"), nil); strings.Contains(body, "evil.example") {
		t.Fatalf("a crafted notice is shown:\n%s", body)
	}
	eventually(t, 20*time.Second, "a completes after the skip", func() bool { return s.count("a") == 1 })
	log, err := inspect.New(s.c).AuditLog(s.ctx, 5)
	if err != nil || len(log) != 1 || log[0].Who != "console:alice" || log[0].Command != "skip" || log[0].EntryID != head {
		t.Fatalf("audit after the skip: %+v, %v", log, err)
	}

	// Pause b, publish to it: nothing runs; resume: it goes on.
	pause := url.Values{"op": {"pause"}, "handler": {"orders"}, "stream": {"shop:{b}"}, "back": {"/paused"}, "csrf": {tok}}
	if code, body, _ := alice.confirm(pause); code != http.StatusSeeOther {
		t.Fatalf("pause: %d\n%s", code, body)
	}
	if _, body, _ := alice.do("GET", "/paused", nil); !strings.Contains(body, "shop:{b}") || !strings.Contains(body, "console:alice") {
		t.Fatalf("the paused page after the pause:\n%s", body)
	}
	s.publish(&placed{Client: "b", Seq: 2}, &placed{Client: "a", Seq: 3})
	eventually(t, 20*time.Second, "a/3 applied", func() bool { return s.count("a") == 2 })
	if ps, _ := inspect.New(s.c).Paused(s.ctx, "orders"); len(ps) != 1 {
		t.Fatalf("pauses: %+v", ps)
	}
	resume := with(pause, "op", "resume")
	if code, body, _ := alice.confirm(resume); code != http.StatusSeeOther {
		t.Fatalf("resume: %d\n%s", code, body)
	}
	eventually(t, 20*time.Second, "b goes on after the resume", func() bool { return s.count("b") == 2 })
	if n := s.c.XLen(s.ctx, "seqby:__audit__").Val(); n != 3 {
		t.Fatalf("audit entries %d, want 3 (skip, pause, resume)", n)
	}
	if code, body, _ := alice.do("GET", "/audit", nil); code != http.StatusOK || strings.Count(body, "<td>console:alice</td>") != 3 {
		t.Fatalf("the audit page: %d\n%s", code, body)
	}
	// An unknown action and a redirect off the console are refused.
	if code, _, _ := alice.do("POST", "/action", url.Values{"csrf": {tok}, "op": {"flush"}}); code != http.StatusBadRequest {
		t.Fatalf("an unknown action: %d", code)
	}
	for i, back := range []string{"//evil.example/", "/\t/evil.example/", "/\\evil.example", "https://evil.example/", "/ops/../../x"} {
		op := []string{"pause", "resume"}[i%2]
		code, _, h = alice.confirm(with(resume, "op", op, "back", back))
		if code != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), "/ops/?") {
			t.Fatalf("a redirect to %q: %d, Location %q", back, code, h.Get("Location"))
		}
	}
}

// Writes from elsewhere are refused even with the operator's
// credentials: a CSRF cookie planted by another site on the same host
// (cookies ignore ports) with the same value in the form, and a request
// the browser marks cross-site.
func TestForgedWrites(t *testing.T) {
	s := newScene(t, 1)
	s.publish(&placed{Client: "a", Seq: 1})
	eventually(t, 20*time.Second, "a applied", func() bool { return s.count("a") == 1 })
	base := serve(t, s, Options{Write: true, Token: "s3cret"})
	pause := url.Values{"op": {"pause"}, "handler": {"orders"}, "stream": {"shop:{a}"}, "back": {"/"}}
	planted := newClient(t, base, "alice", "s3cret")
	u, _ := url.Parse(base + "/action")
	forged := strings.Repeat("ab", 32)
	planted.h.Jar.SetCookies(u, []*http.Cookie{{Name: csrfCookie, Value: forged, Path: "/ops/action"}})
	f := url.Values{"csrf": {forged}}
	for k, v := range pause {
		f[k] = v
	}
	if code, body, _ := planted.do("POST", "/action", f); code != http.StatusForbidden || !strings.Contains(body, "CSRF") {
		t.Fatalf("an action with a planted cookie: %d\n%s", code, body)
	}
	// The planted cookie, sent first, does not lock the operator out:
	// the console's own cookie and its token still act.
	own := planted.csrf("/partition?handler=orders&stream=" + url.QueryEscape("shop:{a}"))
	if code, body, _ := planted.confirm(with(pause, "csrf", own)); code != http.StatusSeeOther {
		t.Fatalf("an action beside a planted cookie: %d\n%s", code, body)
	}
	if code, body, _ := planted.confirm(with(pause, "csrf", own, "op", "resume")); code != http.StatusSeeOther {
		t.Fatalf("the resume beside a planted cookie: %d\n%s", code, body)
	}
	alice := newClient(t, base, "alice", "s3cret")
	f.Set("csrf", alice.csrf("/partition?handler=orders&stream="+url.QueryEscape("shop:{a}")))
	req, _ := http.NewRequest("POST", base+"/action", strings.NewReader(f.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.SetBasicAuth("alice", "s3cret")
	res, err := alice.h.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("a cross-site action: %d, want 403", res.StatusCode)
	}
	if ps, _ := inspect.New(s.c).Paused(s.ctx, ""); len(ps) != 0 {
		t.Fatalf("a forged write paused %+v", ps)
	}
}

// A read-only console writes nothing, not even the tidying of a stale
// halt record that the Inspector's listings do by default.
func TestReadOnlyWritesNothing(t *testing.T) {
	s := newScene(t, 1)
	s.publish(&placed{Client: "a", Seq: 1, Poison: true})
	hs := s.waitHalted(1, "a halted")
	record := rdb.MetaKey(rdb.LeaseKey(hs[0].Partition, "orders"))
	// The head acked behind the engine's back: the record is stale.
	if err := s.c.XAck(s.ctx, hs[0].Stream, "orders", hs[0].EntryID).Err(); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, serve(t, s, Options{}), "", "")
	for _, path := range []string{"/halted", "/partition?handler=orders&stream=" + url.QueryEscape(hs[0].Partition)} {
		if code, body, _ := c.do("GET", path, nil); code != http.StatusOK {
			t.Fatalf("GET %s: %d\n%s", path, code, body)
		}
	}
	if !s.c.HExists(s.ctx, record, rdb.MetaHalt).Val() {
		t.Fatal("the read-only console removed the stale halt record")
	}
}

// A Redis that does not answer is a 504 within the request's Timeout.
func TestRedisHung(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() { // accepts, and never answers
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	rc := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { rc.Close() })
	con, err := New(inspect.New(rc), Options{Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(con.Close)
	rec := httptest.NewRecorder()
	con.ServeHTTP(rec, httptest.NewRequest("GET", "/handler?name=orders", nil))
	if rec.Code != http.StatusGatewayTimeout {
		t.Fatalf("GET /handler with Redis hung: %d, want 504\n%s", rec.Code, rec.Body.String())
	}
}

// A Redis that fails is a 502 or 504 with the error, not a 404.
func TestRedisDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	rc := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { rc.Close() })
	con, err := New(inspect.New(rc), Options{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(con.Close)
	for _, path := range []string{"/handler?name=orders", "/partition?handler=orders&stream=shop:%7Ba%7D"} {
		rec := httptest.NewRecorder()
		con.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != http.StatusBadGateway && rec.Code != http.StatusGatewayTimeout || !strings.Contains(rec.Body.String(), "connect") {
			t.Errorf("GET %s with Redis down: %d, want 502 or 504 with the error\n%s", path, rec.Code, rec.Body.String())
		}
	}
}

// The dead-letter actions and a whole handler's pause, through the
// console: dlq move of a halted head, replay of the dead letter (the key
// completes once the handler is cured), drop of another, pause and resume
// of every key.
func TestDLQAndHandlerActions(t *testing.T) {
	s := newScene(t, 1)
	s.publish(&placed{Client: "a", Seq: 1, Poison: true}, &placed{Client: "d", Seq: 1, Poison: true})
	hs := s.waitHalted(2, "a and d halted")
	base := serve(t, s, Options{Write: true, Token: "s3cret"})
	bob := newClient(t, base, "bob", "s3cret")
	tok := bob.csrf("/halted")
	act := func(kv ...string) {
		t.Helper()
		f := url.Values{"csrf": {tok}, "back": {"/halted"}}
		for i := 0; i < len(kv); i += 2 {
			f.Set(kv[i], kv[i+1])
		}
		if code, body, _ := bob.confirm(f); code != http.StatusSeeOther {
			t.Fatalf("%v: %d\n%s", kv, code, body)
		}
	}
	for _, h := range hs {
		act("op", "dlq", "handler", "orders", "stream", h.Partition, "id", h.EntryID)
	}
	dlq, err := inspect.New(s.c).DLQEntries(s.ctx, "")
	if err != nil || len(dlq) != 2 {
		t.Fatalf("dead letters after two moves: %+v, %v", dlq, err)
	}
	if _, body, _ := bob.do("GET", "/halted", nil); !strings.Contains(body, "shop:{a}:dlq") || !strings.Contains(body, "No partition is halted.") {
		t.Fatalf("the halted page after the moves:\n%s", body)
	}
	s.cured.Store(true)
	for _, d := range dlq {
		if d.DLQ == "shop:{a}:dlq" {
			act("op", "replay", "dlq", d.DLQ, "id", d.ID)
		} else {
			act("op", "drop", "dlq", d.DLQ, "id", d.ID)
		}
	}
	eventually(t, 20*time.Second, "a's replay applied", func() bool { return s.count("a") == 1 })
	if dlq, _ := inspect.New(s.c).DLQEntries(s.ctx, ""); len(dlq) != 0 {
		t.Fatalf("dead letters left: %+v", dlq)
	}
	act("op", "pause", "handler", "orders", "all", "yes")
	if ps, _ := inspect.New(s.c).Paused(s.ctx, "orders"); len(ps) != 1 || ps[0].Partition != "" || ps[0].By != "console:bob" {
		t.Fatalf("pauses after pausing the handler: %+v", ps)
	}
	act("op", "resume", "handler", "orders", "all", "yes")
	if ps, _ := inspect.New(s.c).Paused(s.ctx, "orders"); len(ps) != 0 {
		t.Fatalf("pauses after resuming the handler: %+v", ps)
	}
	log, _ := inspect.New(s.c).AuditLog(s.ctx, 10)
	want := []string{"resume", "pause", "dlq drop", "dlq replay", "dlq move", "dlq move"}
	if len(log) != len(want) {
		t.Fatalf("audit: %+v, want %v", log, want)
	}
	for i, e := range log {
		if e.Command != want[i] && !(i >= 2 && i <= 3) || e.Who != "console:bob" {
			t.Errorf("audit entry %d: %+v, want %s by console:bob", i, e, want[i])
		}
	}
}

var rowKey = regexp.MustCompile(`>(k\d{3})</a></td>`)

// A handler page lists its partitions a page at a time, searched by key
// and sorted by key (live), lag, backlog or age of head (from the
// handler's shared read, whose time it shows).
func TestHandlerPaging(t *testing.T) {
	s := newScene(t, 0)
	rdb.RegisterGroup(s.ctx, s.c, "shop", "orders", false)
	for i := range 250 {
		s.publish(&placed{Client: fmt.Sprintf("k%03d", i), Seq: 1})
	}
	for seq := range 4 {
		s.publish(&placed{Client: "k123", Seq: 2 + seq}) // the longest backlog
	}
	// The oldest head: an entry an hour old, on a partition of its own.
	old := fmt.Sprintf("%d-0", time.Now().Add(-time.Hour).UnixMilli())
	if err := s.c.XAdd(s.ctx, &redis.XAddArgs{Stream: "shop:{k250}", ID: old, Values: []any{"type", "placed", "payload", "{}"}}).Err(); err != nil {
		t.Fatal(err)
	}
	s.c.SAdd(s.ctx, rdb.IndexKey("shop"), "k250")
	c := newClient(t, serve(t, s, Options{}), "", "")
	for _, tc := range []struct {
		path        string
		first, last string // the page's first and last keys
		want        []string
	}{
		{"/handler?name=orders", "k000", "k099", []string{"251 partitions; page 1 of 3"}},
		{"/handler?name=orders&page=2", "k100", "k199", []string{"page 2 of 3", "next", "previous"}},
		{"/handler?name=orders&page=9", "k200", "k250", []string{"page 3 of 3"}},
		{"/handler?name=orders&q=k12", "k120", "k129", []string{"10 partitions matching “k12”; page 1 of 1"}},
		{"/handler?name=orders&sort=backlog", "k123", "", []string{"sorted by backlog as read at"}},
		{"/handler?name=orders&sort=lag&q=k12&page=3", "k123", "k129", []string{"page 1 of 1"}},
		{"/handler?name=orders&sort=age", "k250", "", []string{"sorted by age as read at", "1h0m"}},
	} {
		code, body, _ := c.do("GET", tc.path, nil)
		if code != http.StatusOK {
			t.Errorf("GET %s: %d\n%s", tc.path, code, body)
			continue
		}
		keys := rowKey.FindAllStringSubmatch(body, -1)
		if len(keys) == 0 || keys[0][1] != tc.first || tc.last != "" && keys[len(keys)-1][1] != tc.last {
			t.Errorf("GET %s: rows %v, want %s..%s", tc.path, keys, tc.first, tc.last)
		}
		for _, w := range tc.want {
			if !strings.Contains(body, w) {
				t.Errorf("GET %s: no %q in\n%s", tc.path, w, body)
			}
		}
	}
}

// The halted page pauses and resumes a halted partition in place, and
// shows which are paused.
func TestHaltedPagePause(t *testing.T) {
	s := newScene(t, 1)
	s.publish(&placed{Client: "a", Seq: 1, Poison: true})
	s.waitHalted(1, "a halted")
	alice := newClient(t, serve(t, s, Options{Write: true, Token: "s3cret"}), "alice", "s3cret")
	tok := alice.csrf("/halted")
	for _, step := range []struct {
		op   string // the action the halted page offers for a
		then string // the one it offers after it
	}{{"pause", "resume"}, {"resume", "pause"}} {
		_, body, _ := alice.do("GET", "/halted", nil)
		if !strings.Contains(body, `name="op" value="`+step.op+`"`) || strings.Contains(body, `name="op" value="`+step.then+`"`) {
			t.Fatalf("before %s, the halted page offers:\n%s", step.op, body)
		}
		if paused := strings.Contains(body, "badge paused"); paused != (step.op == "resume") {
			t.Fatalf("before %s, paused shown %v:\n%s", step.op, paused, body)
		}
		// The stream the page's form names, posted as the browser would.
		m := regexp.MustCompile(`name="op" value="` + step.op + `">\s*<input type="hidden" name="stream" value="([^"]*)">`).FindStringSubmatch(body)
		if m == nil || html.UnescapeString(m[1]) != "shop:{a}" {
			t.Fatalf("the %s form names %q, want shop:{a}:\n%s", step.op, m, body)
		}
		f := url.Values{"op": {step.op}, "handler": {"orders"}, "stream": {html.UnescapeString(m[1])}, "back": {"/halted"}, "csrf": {tok}}
		if code, body, _ := alice.confirm(f); code != http.StatusSeeOther {
			t.Fatalf("%s: %d\n%s", step.op, code, body)
		}
	}
	if ps, _ := inspect.New(s.c).Paused(s.ctx, "orders"); len(ps) != 0 {
		t.Fatalf("pauses after the resume: %+v", ps)
	}
}

// A pause whose mark was stored but not settled (the engines' admitted
// confirmation age unreadable until the request's time ran out: a record
// is not one) is recorded in the audit stream, and the console shows
// the error (seen before: it showed the error and recorded nothing).
func TestUnsettledPauseIsAudited(t *testing.T) {
	s := newScene(t, 1)
	s.publish(&placed{Client: "a", Seq: 1})
	eventually(t, 20*time.Second, "a applied", func() bool { return s.count("a") == 1 })
	if err := s.c.HSet(s.ctx, "seqby:__control__:orders", "admit:not-an-age|x", "99999999999999").Err(); err != nil {
		t.Fatal(err)
	}
	alice := newClient(t, serve(t, s, Options{Write: true, Token: "s3cret", Timeout: time.Second}), "alice", "s3cret")
	f := url.Values{"op": {"pause"}, "handler": {"orders"}, "stream": {"shop:{a}"}, "back": {"/handlers"}, "csrf": {alice.csrf("/partition?handler=orders&stream=" + url.QueryEscape("shop:{a}"))}}
	code, body, _ := alice.confirm(f)
	if code != http.StatusConflict || !strings.Contains(body, "run the same pause again") {
		t.Fatalf("an unsettled pause: %d, want 409 saying so\n%s", code, body)
	}
	entries, err := inspect.New(s.c).AuditLog(s.ctx, 10)
	if err != nil || len(entries) != 1 || entries[0].Command != "pause" || !strings.Contains(entries[0].Result, "unsettled") || entries[0].Who != "console:alice" {
		t.Fatalf("the audit stream holds %+v (%v); want alice's unsettled pause", entries, err)
	}
}
