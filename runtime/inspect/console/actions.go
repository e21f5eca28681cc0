package console

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/seqby/seqby/runtime/inspect"
)

// An action is one of seqbyctl's changes, taken in two POSTs to /action:
// without confirm it runs the action's checks (its dry run) and shows a
// preview with a confirmation form; with confirm=yes it acts, appends an
// audit entry naming the operator, and redirects back with a notice.

// act is one action's dry run and run, and what they say.
type act struct {
	// check runs the dry run; it returns what would be done.
	check func(ctx context.Context) (string, error)
	// do acts; it returns what was done and the audit entry to append.
	// An entry returned with an error was done all the same (a pause
	// stored but not settled): it is appended, and the error shown.
	do func(ctx context.Context) (string, inspect.AuditEntry, error)
}

// actions are the console's actions by name, for a form's fields.
func (c *Console) actionFor(f url.Values) (act, error) {
	h, s, id := f.Get("handler"), f.Get("stream"), f.Get("id")
	// The dry runs read through the read-only Inspector (a preview
	// changes nothing, not even a stale listing); the actions act.
	ro, in := c.in, c.act
	entry := func(cmd, part, stream, id, result string) inspect.AuditEntry {
		return inspect.AuditEntry{Command: cmd, Handler: h, Partition: part, Stream: stream, EntryID: id, Result: result}
	}
	switch f.Get("op") {
	case "skip", "dlq":
		dlq := f.Get("op") == "dlq"
		cmd := map[bool]string{false: "skip", true: "dlq move"}[dlq]
		return act{
			check: func(ctx context.Context) (string, error) {
				check := ro.CheckSkip
				if dlq {
					check = ro.CheckMoveToDLQ
				}
				res, err := check(ctx, h, s, id)
				if err != nil {
					return "", err
				}
				if dlq {
					return fmt.Sprintf("move %s, the halted head of %s of %s, to %s, then acknowledge it", id, res.Record.Partition, h, res.DLQ), nil
				}
				return fmt.Sprintf("acknowledge %s, the halted head of %s of %s, without applying it", id, res.Record.Partition, h), nil
			},
			do: func(ctx context.Context) (string, inspect.AuditEntry, error) {
				op := in.Skip
				if dlq {
					op = in.MoveToDLQ
				}
				res, err := op(ctx, h, s, id)
				if err != nil {
					return "", inspect.AuditEntry{}, err
				}
				r := res.Record
				a := entry(cmd, r.Partition, r.Stream, id, "acknowledged unapplied; halt record and lease removed")
				done := fmt.Sprintf("skipped %s on %s; %s continues with its next entry", id, r.Stream, r.Partition)
				if dlq {
					a.Result = fmt.Sprintf("copied to %s as %s, then acknowledged; halt record and lease removed", res.DLQ, res.DLQEntryID)
					done = fmt.Sprintf("moved %s on %s to %s as %s", id, r.Stream, res.DLQ, res.DLQEntryID)
				}
				return done, a, nil
			},
		}, nil
	case "replay", "drop":
		replay := f.Get("op") == "replay"
		dlq := f.Get("dlq")
		return act{
			check: func(ctx context.Context) (string, error) {
				if replay {
					rep, err := ro.CheckReplayDLQ(ctx, dlq, id)
					if err != nil {
						return "", err
					}
					return fmt.Sprintf("publish entry %s of %s again at the end of %s, then delete it from the dead-letter stream", id, dlq, rep.Stream), nil
				}
				if _, err := ro.CheckDropDLQ(ctx, dlq, id); err != nil {
					return "", err
				}
				return fmt.Sprintf("delete entry %s of %s", id, dlq), nil
			},
			do: func(ctx context.Context) (string, inspect.AuditEntry, error) {
				if replay {
					rep, err := in.ReplayDLQ(ctx, dlq, id)
					if err != nil {
						return "", inspect.AuditEntry{}, err
					}
					a := inspect.AuditEntry{Command: "dlq replay", Handler: rep.Entry.Handler, Partition: rep.Entry.Partition, Stream: dlq, EntryID: id,
						Result: "published again to " + rep.Stream + "; deleted from the DLQ"}
					return fmt.Sprintf("replayed %s of %s to the end of %s", id, dlq, rep.Stream), a, nil
				}
				d, err := in.DropDLQ(ctx, dlq, id)
				if err != nil {
					return "", inspect.AuditEntry{}, err
				}
				a := inspect.AuditEntry{Command: "dlq drop", Handler: d.Handler, Partition: d.Partition, Stream: dlq, EntryID: id, Result: "deleted"}
				return fmt.Sprintf("dropped %s of %s", id, dlq), a, nil
			},
		}, nil
	case "pause", "resume":
		pause := f.Get("op") == "pause"
		all := f.Get("all") == "yes"
		what := s + " of " + h
		if all {
			what = "every partition of " + h
		}
		return act{
			check: func(ctx context.Context) (string, error) {
				var p inspect.Pause
				var err error
				switch {
				case pause && all:
					p, err = ro.CheckPauseHandler(ctx, h)
				case pause:
					p, err = ro.CheckPause(ctx, h, s)
				case all:
					p, err = ro.CheckResumeHandler(ctx, h)
				default:
					p, err = ro.CheckResume(ctx, h, s)
				}
				switch {
				case err != nil:
					return "", err
				case pause && p.Already:
					return fmt.Sprintf("nothing: %s is paused already (by %s at %s)", what, p.By, p.At.Format(time.RFC3339)), nil
				case pause && all:
					// A handler's pause is read by each discovery cycle,
					// not checked in Redis by every confirmation.
					return "pause " + what + ": events in flight finish; from the engines' next discovery cycle no later one starts until it is resumed", nil
				case pause:
					return "pause " + what + ": the event in flight finishes, no later one starts until it is resumed", nil
				}
				return fmt.Sprintf("resume %s, paused by %s at %s", what, p.By, p.At.Format(time.RFC3339)), nil
			},
			do: func(ctx context.Context) (string, inspect.AuditEntry, error) {
				who := operatorFrom(ctx)
				var p inspect.Pause
				var err error
				switch {
				case pause && all:
					p, err = in.PauseHandler(ctx, h, who)
				case pause:
					p, err = in.Pause(ctx, h, s, who)
				case all:
					p, err = in.ResumeHandler(ctx, h)
				default:
					p, err = in.Resume(ctx, h, s)
				}
				warn := ""
				// Unsettled: the pause is stored, though Pause could not
				// wait out the attempts confirmed before it; recorded,
				// and the error shown.
				unsettled := pause && !all && errors.Is(err, inspect.ErrUnsettled)
				if errors.Is(err, inspect.ErrNotWoken) {
					warn = " (warning: " + err.Error() + ")" // done all the same: recorded
				} else if err != nil && !unsettled {
					return "", inspect.AuditEntry{}, err
				}
				stream := cmp.Or(p.Partition, s) // the stream a bare key named
				part := stream
				if all {
					part = "*"
				}
				if pause {
					if p.Already {
						return what + " was paused already; nothing changed", inspect.AuditEntry{}, err
					}
					if unsettled {
						return "", entry("pause", part, stream, "", "paused ("+p.Mark+"), unsettled: an attempt confirmed just before it may still start"), err
					}
					return "paused " + what + warn, entry("pause", part, stream, "", "paused ("+p.Mark+")"), nil
				}
				return "resumed " + what + warn, entry("resume", part, stream, "", fmt.Sprintf("resumed (paused by %s at %s)", p.By, p.At.Format(time.RFC3339))), nil
			},
		}, nil
	}
	return act{}, fmt.Errorf("unknown action %q", f.Get("op"))
}

type operatorKey struct{}

// operatorFrom is the operator a request's context carries.
func operatorFrom(ctx context.Context) string {
	s, _ := ctx.Value(operatorKey{}).(string)
	return s
}

func (c *Console) action(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		c.fail(w, r, http.StatusBadRequest, fmt.Errorf("a malformed form: %w", err))
		return
	}
	user, cookie, ok := c.operator(w, r)
	if !ok {
		return
	}
	who := "console:" + user
	a, err := c.actionFor(r.PostForm)
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err)
		return
	}
	ctx, cancel := c.ctx(r)
	defer cancel()
	ctx = context.WithValue(ctx, operatorKey{}, who)
	back := backTo(r.PostFormValue("back"))
	fields := map[string]string{}
	for _, k := range actionFields {
		if v := r.PostFormValue(k); v != "" {
			fields[k] = v
		}
	}
	if r.PostFormValue("confirm") != "yes" {
		would, err := a.check(ctx)
		data := struct {
			base
			Would   string
			Fields  map[string]string
			Back    string
			Confirm string
		}{base: c.page(w, r, "Confirm", ""), Would: would, Back: back, Fields: fields}
		status := http.StatusOK
		if err != nil {
			data.Problem = err.Error()
			status = http.StatusConflict
		} else {
			data.Confirm = c.confirmation(cookie, fields, time.Now())
		}
		c.render(w, "preview", status, data)
		return
	}
	if err := c.confirmed(r.PostFormValue("token"), cookie, fields, time.Now()); err != nil {
		c.fail(w, r, http.StatusForbidden, err)
		return
	}
	done, entry, err := a.do(ctx)
	// Whatever it did, the shared reads of the partitions no longer
	// tell (a replay changes every handler of the category).
	c.snaps.dropAll()
	if entry.Command != "" {
		// What was done is recorded even when the request's time ran
		// out meanwhile, and when it was done but failed after (a
		// pause stored but not settled: do returns its entry and the
		// error).
		entry.Who = who
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), auditTimeout)
		defer cancel()
		if _, aerr := c.act.Audit(actx, entry); aerr != nil && err != nil {
			err = fmt.Errorf("%w (and recording it in the audit stream failed: %v; note it yourself)", err, aerr)
		} else if aerr != nil {
			done += fmt.Sprintf(" (but recording it in the audit stream failed: %v; note it yourself)", aerr)
		}
	}
	if err != nil {
		c.fail(w, r, http.StatusConflict, err)
		return
	}
	u, _ := url.Parse(back) // backTo made it
	q := u.Query()
	q.Set("done", done)
	q.Set("sig", c.sign("done", done))
	u.RawQuery = q.Encode()
	http.Redirect(w, r, basePath(r)+u.String(), http.StatusSeeOther)
}

// actionFields are the form fields that name an action.
var actionFields = []string{"op", "handler", "stream", "id", "dlq", "all"}

// confirmLife is how long an action's preview may be confirmed.
const confirmLife = 10 * time.Minute

// confirmation is the token an action's preview hands its confirmation
// form: the action's fields, for the browser's CSRF cookie, at now. The
// confirmation must carry it (confirmed), so no action runs without the
// preview of its dry run, and a confirmation cannot be replayed for
// another action or long after.
func (c *Console) confirmation(cookie string, fields map[string]string, now time.Time) string {
	// A nonce: two previews of one action in one second confirm once each.
	b := make([]byte, 12)
	rand.Read(b)
	at := strconv.FormatInt(now.Unix(), 10) + "." + hex.EncodeToString(b)
	return at + "." + c.sign(append([]string{"confirm", cookie, at}, fieldParts(fields)...)...)
}

// auditTimeout bounds the audit entry's write after an action.
const auditTimeout = 5 * time.Second

// confirmed checks a confirmation's token (confirmation) and uses it up:
// a token confirms one action once.
func (c *Console) confirmed(tok, cookie string, fields map[string]string, now time.Time) error {
	cut := strings.LastIndexByte(tok, '.')
	at, sig := tok[:max(cut, 0)], tok[cut+1:]
	unix, _, _ := strings.Cut(at, ".")
	sec, err := strconv.ParseInt(unix, 10, 64)
	if err != nil || !c.signed(sig, append([]string{"confirm", cookie, at}, fieldParts(fields)...)...) {
		return errors.New("this confirmation was not issued by this console's preview of this action (or the console restarted): start the action again from its page")
	}
	if age := now.Sub(time.Unix(sec, 0)); age > confirmLife || age < -time.Minute {
		return fmt.Errorf("this preview is older than %v: start the action again from its page, and confirm what it shows now", confirmLife)
	}
	if !c.used.take(sig, now) {
		return errors.New("this preview was confirmed already: start the action again from its page, and confirm what it shows now")
	}
	return nil
}

// usedTokens are the confirmations taken within confirmLife: a token is
// taken once. It holds at most the confirmations of the last
// confirmLife (older ones are refused by age, and forgotten).
type usedTokens struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

// take reports whether tok was not taken before, and takes it.
func (u *usedTokens) take(tok string, now time.Time) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.seen == nil {
		u.seen = map[string]time.Time{}
	}
	for t, at := range u.seen {
		if now.Sub(at) > confirmLife+time.Minute {
			delete(u.seen, t)
		}
	}
	if _, ok := u.seen[tok]; ok {
		return false
	}
	u.seen[tok] = now
	return true
}

// fieldParts lists fields in actionFields' order, for a signature.
func fieldParts(fields map[string]string) []string {
	var out []string
	for _, k := range actionFields {
		out = append(out, k, fields[k])
	}
	return out
}

// pagePaths are the console's pages, where an action may send the
// browser back to.
var pagePaths = []string{"/", "/handler", "/partition", "/halted", "/paused", "/audit"}

// backTo is the page an action returns to: back when it is one of the
// console's pages (a path and query, nothing that could lead off the
// console), else the overview.
func backTo(back string) string {
	u, err := url.Parse(back)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" || !slices.Contains(pagePaths, u.Path) ||
		strings.ContainsFunc(back, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '\\' }) {
		return "/"
	}
	return (&url.URL{Path: u.Path, RawQuery: u.Query().Encode()}).String()
}
