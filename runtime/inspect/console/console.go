package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/seqby/seqby/runtime/inspect"
)

// Options configure a Console. The zero value is a read-only console.
type Options struct {
	// Write turns the actions on (skip, dlq, replay, drop, pause,
	// resume). It needs Token.
	Write bool
	// Token is write access's password: a mutating request must carry
	// HTTP basic auth with this password, and a user name, the operator
	// the audit stream records ("console:<user>"). Never shown.
	Token string
	// SampleInterval is how often the console samples each handler's lag
	// and backlog for its charts (default 10s); SampleWindow how long it
	// keeps them (default 1h). It is also how long the views share one
	// read of every partition of a handler, of the known handlers and of
	// the faults. A sampling round that takes longer than a tenth of it
	// (at many partitions) spaces the rounds, and keeps the shared
	// reads, ten times the round instead.
	SampleInterval time.Duration
	SampleWindow   time.Duration
	// Timeout bounds one request, its Redis reads and an action
	// (default 10s). A go-redis client stops a read at a deadline only
	// with ContextTimeoutEnabled (runtime.Connect sets it).
	Timeout time.Duration
	// Logger gets the errors pages show, at debug level (default: none).
	Logger *slog.Logger
}

// ErrNoToken is New's refusal of Options.Write without Options.Token.
var ErrNoToken = errors.New("console: Write needs a Token (the password of write access)")

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Console is the operator console, an http.Handler. Close it to stop its
// sampler.
type Console struct {
	// in reads (ReadOnly: a page never writes); act runs the actions.
	in, act *inspect.Inspector
	o       Options
	// secret keys the tokens the console hands out and checks: the CSRF
	// token bound to the browser's cookie, an action's confirmation
	// (issued by its preview) and the notice after it. Random per
	// process: a restart asks the browser to reload its page.
	secret []byte
	// origins refuses cross-origin writes (Sec-Fetch-Site, Origin).
	origins *http.CrossOriginProtection
	// used are the confirmations taken (each confirms once).
	used   usedTokens
	pages  map[string]*template.Template
	static http.Handler
	mux    *http.ServeMux

	samples *sampler
	snaps   snapshots
	// faultsRead is the engines' faults, read once per SampleInterval.
	faultsRead kept[[]inspect.Fault]
	stop       context.CancelFunc
	done       chan struct{}
}

// New returns a console on in. It starts the sampler of the charts,
// which Close stops.
func New(in *inspect.Inspector, o Options) (*Console, error) {
	if o.Write && o.Token == "" {
		return nil, ErrNoToken
	}
	if o.SampleInterval <= 0 {
		o.SampleInterval = 10 * time.Second
	}
	if o.SampleWindow <= 0 {
		o.SampleWindow = time.Hour
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	// Nearly every call names a handler, which the Inspector looks up
	// with a scan of the keyspace: keep that for a sampling interval.
	in = in.WithHandlerCache(o.SampleInterval)
	c := &Console{in: in.ReadOnly(), act: in, o: o, pages: map[string]*template.Template{}, done: make(chan struct{}),
		secret: make([]byte, 32), origins: http.NewCrossOriginProtection()}
	rand.Read(c.secret)
	for _, p := range []string{"overview", "handler", "partition", "halted", "paused", "audit", "preview", "error"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+p+".html")
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", p, err)
		}
		c.pages[p] = t
	}
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}
	c.static = http.StripPrefix("/static/", http.FileServer(http.FS(sub)))
	c.mux = http.NewServeMux()
	c.mux.HandleFunc("GET /{$}", c.overview)
	c.mux.HandleFunc("GET /handler", c.handler)
	c.mux.HandleFunc("GET /partition", c.partition)
	c.mux.HandleFunc("GET /halted", c.halted)
	c.mux.HandleFunc("GET /paused", c.paused)
	c.mux.HandleFunc("GET /audit", c.audit)
	c.mux.Handle("GET /static/", c.static)
	c.mux.HandleFunc("POST /action", c.action)
	c.samples = newSampler(o.SampleWindow, o.SampleInterval)
	ctx, cancel := context.WithCancel(context.Background())
	c.stop = cancel
	go c.sample(ctx)
	return c, nil
}

// Close stops the sampler.
func (c *Console) Close() {
	c.stop()
	<-c.done
}

// ServeHTTP serves the console's pages and actions. Options.Timeout
// bounds the whole request.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), c.o.Timeout)
	defer cancel()
	r = r.WithContext(ctx)
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; form-action 'self'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	c.mux.ServeHTTP(w, r)
}

// base is what every page's layout shows.
type base struct {
	Title    string
	Base     string // the path the console is mounted at, from the request
	Write    bool
	CSRF     string
	Notice   string // the outcome of the last action (?done=)
	Problem  string // an error to show instead of the page's data
	Now      time.Time
	Selected string // the menu entry
}

// csrfCookie names the double-submit cookie.
const csrfCookie = "seqby_csrf"

// page starts a page's data: the CSRF token (for the browser's cookie,
// set when it has none) and the notice of a finished action.
func (c *Console) page(w http.ResponseWriter, r *http.Request, title, selected string) base {
	ck := ""
	if v, err := r.Cookie(csrfCookie); err == nil && len(v.Value) == 64 {
		ck = v.Value
	} else {
		b := make([]byte, 32)
		rand.Read(b)
		ck = hex.EncodeToString(b)
		http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: ck, Path: basePath(r) + "/", HttpOnly: true,
			Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	}
	q := r.URL.Query()
	notice := q.Get("done")
	if !c.signed(q.Get("sig"), "done", notice) {
		notice = "" // not this console's: a crafted link's text is not shown as an outcome
	}
	return base{Title: title, Base: basePath(r), Write: c.o.Write, CSRF: c.sign("csrf", ck), Notice: notice, Now: time.Now(), Selected: selected}
}

// sign is the console's token for parts (HMAC-SHA256 under its secret,
// hex): what only this console can have handed out.
func (c *Console) sign(parts ...string) string {
	m := hmac.New(sha256.New, c.secret)
	for _, p := range parts {
		// Length-prefixed, so no two lists of parts sign alike.
		fmt.Fprintf(m, "%d:%s;", len(p), p)
	}
	return hex.EncodeToString(m.Sum(nil))
}

// signed reports whether tok is sign(parts...).
func (c *Console) signed(tok string, parts ...string) bool {
	return tok != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(c.sign(parts...))) == 1
}

// basePath is the path the console is mounted at: the request's path as
// the client sent it, less the path the console's mux saw.
func basePath(r *http.Request) string {
	full := r.URL.Path
	if r.URL.RawPath != "" {
		full = r.URL.RawPath
	}
	if r.RequestURI != "" {
		if u, err := url.ParseRequestURI(r.RequestURI); err == nil {
			full = u.EscapedPath()
		}
	}
	rel := r.URL.EscapedPath()
	return strings.TrimSuffix(strings.TrimSuffix(full, rel), "/")
}

// render writes a page; a template error is logged and answered with a
// plain 500, never a trace.
func (c *Console) render(w http.ResponseWriter, name string, status int, data any) {
	var b strings.Builder
	if err := c.pages[name].Execute(&b, data); err != nil {
		c.o.Logger.Error("seqby console: rendering a page failed", "page", name, "err", err)
		http.Error(w, "the page could not be rendered; see the server's log", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	io.WriteString(w, b.String())
}

// fail shows err on the error page with status.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, status int, err error) {
	c.o.Logger.Debug("seqby console: request failed", "path", r.URL.Path, "err", err)
	b := c.page(w, r, "Error", "")
	b.Problem = err.Error()
	c.render(w, "error", status, b)
}

// ctx bounds a page's Redis reads.
func (c *Console) ctx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), c.o.Timeout)
}

// operator checks a mutating request's credentials and returns the
// operator's name and the CSRF cookie its token was made for; ok false
// when it answered the request itself.
func (c *Console) operator(w http.ResponseWriter, r *http.Request) (user, cookie string, ok bool) {
	if err := c.origins.Check(r); err != nil {
		c.fail(w, r, http.StatusForbidden, errors.New("a request from another site: act from the console's own pages"))
		return "", "", false
	}
	if !c.o.Write {
		c.fail(w, r, http.StatusForbidden, errors.New("this console is read-only: start it with write access (seqbyctl serve -write, with a token) to act"))
		return "", "", false
	}
	user, pass, ok := r.BasicAuth()
	// Compared as hashes: in constant time, and telling nothing of the
	// token's length.
	given, want := sha256.Sum256([]byte(pass)), sha256.Sum256([]byte(c.o.Token))
	if !ok || user == "" || subtle.ConstantTimeCompare(given[:], want[:]) != 1 {
		w.Header().Set("WWW-Authenticate", `Basic realm="seqby console", charset="UTF-8"`)
		c.fail(w, r, http.StatusUnauthorized, errors.New("write access needs your name as the user and the console's token as the password"))
		return "", "", false
	}
	// The form's CSRF token must be this console's for one of the
	// browser's cookies: a page of another origin can neither read it
	// nor, lacking the secret, make one for a cookie it planted (and a
	// planted cookie sent first does not hide the console's own).
	form := r.PostFormValue("csrf")
	for _, ck := range r.CookiesNamed(csrfCookie) {
		if c.signed(form, "csrf", ck.Value) {
			return user, ck.Value, true
		}
	}
	c.fail(w, r, http.StatusForbidden, errors.New("missing or wrong CSRF token: reload the page and try again"))
	return "", "", false
}

// statusOf is the HTTP status of a page's failure: 404 for a name that
// is not there, 504 when Redis did not answer in time, else 502 (Redis
// failed).
func statusOf(err error) int {
	switch {
	case errors.Is(err, inspect.ErrUnknownHandler), errors.Is(err, inspect.ErrNoPartition):
		return http.StatusNotFound
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return http.StatusGatewayTimeout
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return http.StatusGatewayTimeout // go-redis' read past the request's deadline
	}
	return http.StatusBadGateway
}

var funcs = template.FuncMap{
	"ago": func(now, t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return now.Sub(t).Round(time.Second).String()
	},
	"dur": func(d time.Duration) string {
		if d < 0 {
			return "-"
		}
		return d.Round(time.Second).String()
	},
	"rfc3339": func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format(time.RFC3339)
	},
	"query": url.QueryEscape,
	"orDash": func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	},
	"add": func(a, b int) int { return a + b },
	// shown is a field's value as text: as it is when it is UTF-8
	// text, else quoted with Go escapes (a protobuf payload, a NUL).
	"shown": func(v string) string {
		if utf8.ValidString(v) && !strings.ContainsFunc(v, func(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\t' && r != '\r' }) {
			return v
		}
		return "bytes " + strconv.Quote(v)
	},
}

func init() {
	// dict builds the map a shared template takes: dict "k" v "k2" v2.
	funcs["dict"] = func(kv ...any) (map[string]any, error) {
		if len(kv)%2 != 0 {
			return nil, errors.New("dict: an odd number of arguments")
		}
		m := make(map[string]any, len(kv)/2)
		for i := 0; i < len(kv); i += 2 {
			k, ok := kv[i].(string)
			if !ok {
				return nil, errors.New("dict: a key that is not a string")
			}
			m[k] = kv[i+1]
		}
		return m, nil
	}
}
