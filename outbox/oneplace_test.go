package outbox_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/seqby/seqby/outbox"
	"github.com/seqby/seqby/runtime"
)

// The dialect and table are given once, in the Outbox's Options: its
// Migrate, Schema and NewRelay use them (they were passed to outbox.New,
// NewRelay and Schema or Migrate each, issue #26), and a relay made by the
// Outbox publishes what Add recorded.
func TestOutboxCarriesDialectAndTable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e := newEnv(t, outbox.SQLite, false)
	ob := outbox.New(outbox.Options{Dialect: outbox.SQLite, Table: "app_outbox"})
	if ob.Dialect() != outbox.SQLite {
		t.Errorf("Dialect() = %v, want sqlite", ob.Dialect())
	}
	if got, want := ob.Schema(), outbox.Schema(outbox.SQLite, "app_outbox"); got != want || !strings.Contains(got, "CREATE TABLE IF NOT EXISTS app_outbox_lease") {
		t.Errorf("Schema() =\n%s\nwant\n%s", got, want)
	}
	for range 2 { // idempotent
		if err := ob.Migrate(ctx, e.db); err != nil {
			t.Fatal(err)
		}
	}
	id, err := ob.Add(ctx, e.db, &placed{Client: "c-1", Seq: 1})
	if err != nil {
		t.Fatal(err)
	}
	r := ob.NewRelay(e.db, e.pub, outbox.RelayOptions{PollInterval: 20 * time.Millisecond, LeaseTTL: 2 * time.Second, Logger: testLogger(t)})
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	eventually(t, 20*time.Second, "the relay to publish the record", func() bool { return len(e.stream(t, "order:{c-1}")) == 1 })
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := e.stream(t, "order:{c-1}"); got[0].MessageID != id {
		t.Errorf("published message id %q, want Add's %q", got[0].MessageID, id)
	}

	// Options that contradict the Outbox's, or an unusable Outbox, are
	// errors of Run and Cleanup, as bad relay options are.
	for _, c := range []struct {
		name string
		r    *outbox.Relay
		want error
	}{
		{"another dialect", ob.NewRelay(e.db, e.pub, outbox.RelayOptions{Dialect: outbox.Postgres}), outbox.ErrBadOptions},
		{"another table", ob.NewRelay(e.db, e.pub, outbox.RelayOptions{Table: "seqby_outbox"}), outbox.ErrBadOptions},
		{"no dialect", outbox.New(outbox.Options{}).NewRelay(e.db, e.pub, outbox.RelayOptions{}), outbox.ErrNoDialect},
		{"bad table", outbox.New(outbox.Options{Dialect: outbox.SQLite, Table: "x; y"}).NewRelay(e.db, e.pub, outbox.RelayOptions{}), outbox.ErrBadTable},
	} {
		if err := c.r.Run(ctx); !errors.Is(err, c.want) {
			t.Errorf("%s: Run: %v, want %v", c.name, err, c.want)
		}
		if _, err := c.r.Cleanup(ctx); !errors.Is(err, c.want) {
			t.Errorf("%s: Cleanup: %v, want %v", c.name, err, c.want)
		}
	}
	if err := outbox.New(outbox.Options{}).Migrate(ctx, e.db); !errors.Is(err, outbox.ErrNoDialect) {
		t.Errorf("Migrate without a dialect: %v, want ErrNoDialect", err)
	}
	if s := outbox.New(outbox.Options{}).Schema(); s != "" {
		t.Errorf("Schema without a dialect: %q, want \"\"", s)
	}
}

// publishWord finds "publish" as a word (not the key rules' "before
// publishing").
var publishWord = regexp.MustCompile(`\bpublish\b`)

// Add's errors say what Add does, adding a record in the caller's
// transaction, not "publish" (issue #26), and still match the runtime's
// sentinels and the outbox's.
func TestAddErrorSaysAdd(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, outbox.SQLite, true)
	if _, err := e.ob.Add(ctx, e.db, &placed{Client: "c-1"}, runtime.WithMessageID("m-1")); err != nil {
		t.Fatal(err)
	}
	var typedNil *placed
	for _, c := range []struct {
		name string
		msg  runtime.Message
		opts []runtime.PublishOption
		is   error
		says string
	}{
		{"empty key", &placed{Client: ""}, nil, runtime.ErrInvalidKey, "add a record of *outbox_test.placed in the caller's transaction: partition key Client of category \"order\""},
		{"nil message", nil, nil, runtime.ErrPublish, "add a record of nil in the caller's transaction: nil message;"},
		{"typed nil", typedNil, nil, runtime.ErrPublish, "the message is a nil pointer"},
		{"bad message id", &placed{Client: "c-1"}, []runtime.PublishOption{runtime.WithMessageID("a\nb")}, runtime.ErrInvalidMessageID, `message id "a\nb"`},
		{"reused message id", &placed{Client: "c-1"}, []runtime.PublishOption{runtime.WithMessageID("m-1")}, outbox.ErrDuplicateMessageID, `message id "m-1"`},
	} {
		_, err := e.ob.Add(ctx, e.db, c.msg, c.opts...)
		if !errors.Is(err, c.is) {
			t.Errorf("%s: %v, want an error matching %v", c.name, err, c.is)
			continue
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "outbox: add a record of ") || !strings.Contains(msg, c.says) {
			t.Errorf("%s: %q, want it to begin \"outbox: add a record of \" and say %q", c.name, msg, c.says)
		}
		if publishWord.MatchString(msg) {
			t.Errorf("%s: %q says publish; Add publishes nothing", c.name, msg)
		}
	}
	var ke *runtime.KeyError
	if _, err := e.ob.Add(ctx, e.db, &placed{}); !errors.As(err, &ke) {
		t.Errorf("Add of an empty key: %v, want a *runtime.KeyError", err)
	}
}
