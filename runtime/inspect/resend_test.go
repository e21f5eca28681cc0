package inspect

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// The operator's calls may run twice too (issue #39): go-redis resends a
// command or a pipeline whose reply it failed to read, although Redis ran
// it, and proxies and redirects replay calls. Each case below loses the
// reply of one operator call after Redis ran it (redistest.LostReply) and
// checks what seqbyctl and the console rely on: the call answers as the
// first run did, the action is audited once, and Redis holds one effect.

// runs matches EVALSHA or EVAL calls of the scripts named (their files in
// rdb's lua/).
func runs(names ...string) redistest.Match {
	return func(args []string) bool {
		if len(args) < 2 || !strings.HasPrefix(strings.ToLower(args[0]), "eval") {
			return false
		}
		return slices.Contains(names, rdb.ScriptName(args[1]))
	}
}

// on matches the command name whose first key is key.
func on(name, key string) redistest.Match {
	return func(args []string) bool { return len(args) > 1 && strings.EqualFold(args[0], name) && args[1] == key }
}

// either matches what any of ms matches.
func either(ms ...redistest.Match) redistest.Match {
	return func(args []string) bool {
		for _, m := range ms {
			if m(args) {
				return true
			}
		}
		return false
	}
}

// auditOf is the audit stream's entries, newest first.
func auditOf(t *testing.T, in *Inspector) []AuditEntry {
	t.Helper()
	es, err := in.AuditLog(context.Background(), 100)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func TestResentOperatorCalls(t *testing.T) {
	redistest.TopologiesLosing(t, func(t *testing.T, c redis.UniversalClient, l *redistest.LostReply) {
		ctx := ctxT(t)
		in := New(c).WithVerifyBound(time.Millisecond)
		// Loaded first: an EVALSHA answered NOSCRIPT did nothing, and
		// losing that reply would test nothing.
		if err := rdb.LoadScripts(ctx, c); err != nil {
			t.Fatal(err)
		}
		// Each case on a fresh audit stream and its own category, with
		// nothing armed but its call.
		begin := func(t *testing.T, cat string) []string {
			t.Helper()
			l.Disarm()
			c.Del(ctx, rdb.AuditKey)
			if _, err := rdb.RegisterGroup(ctx, c, cat, "h", false); err != nil {
				t.Fatal(err)
			}
			return publish(t, c, cat, "a", 2)
		}
		// lost fails unless exactly one reply was lost since before.
		lost := func(t *testing.T, before int) {
			t.Helper()
			if n := l.Lost() - before; n != 1 {
				t.Fatalf("%d replies lost, want 1 (the test's call was not sent?)", n)
			}
		}
		// auditedOnce records e as seqbyctl does after a successful
		// action, and checks the stream holds it alone.
		auditedOnce := func(t *testing.T, e AuditEntry) {
			t.Helper()
			e.Who = "alice"
			if _, err := in.Audit(ctx, e); err != nil {
				t.Fatal(err)
			}
			if es := auditOf(t, in); len(es) != 1 {
				t.Fatalf("the audit stream holds %d entries, want 1: %+v", len(es), es)
			}
		}

		// U5: a resolve whose reply was lost, resent, answers with the
		// first run's DLQ entry, not NOT_HALTED.
		for _, dlq := range []bool{false, true} {
			name := map[bool]string{false: "skip", true: "dlq-move"}[dlq]
			t.Run(name, func(t *testing.T) {
				cat := "u5" + name
				ids := begin(t, cat)
				stream := rdb.PartitionStream(cat, "a")
				r := halt(t, c, "h", cat, "a")
				before := l.Lost()
				l.Arm(runs("resolve_head"), redistest.EOF, 1)
				op := in.Skip
				if dlq {
					op = in.MoveToDLQ
				}
				res, err := op(ctx, "h", stream, ids[0])
				lost(t, before)
				if err != nil {
					t.Fatalf("%s resent after a lost reply: %v, want the first run's success", name, err)
				}
				copies, _ := c.XRange(ctx, rdb.DLQStream(cat, "a"), "-", "+").Result()
				switch {
				case !dlq && (len(copies) != 0 || res.DLQEntryID != ""):
					t.Fatalf("skip: DLQ entry %q, DLQ %v, want none", res.DLQEntryID, copies)
				case dlq && (len(copies) != 1 || res.DLQEntryID != copies[0].ID):
					t.Fatalf("dlq move: answered DLQ entry %q, the DLQ holds %v, want one copy with that id", res.DLQEntryID, copies)
				}
				if p, _ := c.XPending(ctx, stream, "h").Result(); p.Count != 0 {
					t.Fatalf("the head is still pending: %+v", p)
				}
				if c.HExists(ctx, r.RecordKey(), rdb.MetaHalt).Val() {
					t.Fatal("the halt record is still there")
				}
				auditedOnce(t, AuditEntry{Command: name, Handler: "h", Partition: stream, Stream: stream, EntryID: ids[0], Result: res.DLQEntryID})
			})
		}

		// dead halts a partition of cat on its first entry and moves it
		// to the dead-letter stream.
		dead := func(t *testing.T, cat string) (stream, dlq string, res Resolution) {
			t.Helper()
			ids := begin(t, cat)
			stream, dlq = rdb.PartitionStream(cat, "a"), rdb.DLQStream(cat, "a")
			halt(t, c, "h", cat, "a")
			res, err := in.MoveToDLQ(ctx, "h", stream, ids[0])
			if err != nil {
				t.Fatal(err)
			}
			return stream, dlq, res
		}

		// U6: a replay whose reply was lost (inside MULTI on a single
		// Redis, a lone script on a cluster) reports the append it made,
		// appends once and wakes the owners.
		t.Run("dlq-replay", func(t *testing.T) {
			cat := "u6"
			stream, dlq, res := dead(t, cat)
			signals := c.XLen(ctx, rdb.SignalKey(cat)).Val()
			before := l.Lost()
			l.Arm(runs("dlq_replay"), redistest.EOF, 1)
			rep, err := in.ReplayDLQ(ctx, dlq, res.DLQEntryID)
			lost(t, before)
			if err != nil || !rep.Published {
				t.Fatalf("replay resent after a lost reply: %+v, %v, want the first run's success", rep, err)
			}
			msgs := c.XRange(ctx, stream, "-", "+").Val()
			if len(msgs) != 3 || msgs[2].Values[rdb.ReplayFieldDLQID] != res.DLQEntryID {
				t.Fatalf("the partition holds %d entries, want the 2 published and the replay once: %v", len(msgs), msgs)
			}
			if n := c.Exists(ctx, dlq).Val(); n != 0 {
				t.Fatal("the dead-letter stream is still there")
			}
			if n := c.XLen(ctx, rdb.SignalKey(cat)).Val(); n != signals+1 {
				t.Fatalf("%d wake-up signals sent, want 1", n-signals)
			}
			auditedOnce(t, AuditEntry{Command: "dlq replay", Handler: "h", Partition: stream, Stream: dlq, EntryID: res.DLQEntryID})
		})

		// U7: a drop whose reply was lost reports the drop it made.
		t.Run("dlq-drop", func(t *testing.T) {
			cat := "u7"
			stream, dlq, res := dead(t, cat)
			before := l.Lost()
			l.Arm(runs("dlq_delete"), redistest.EOF, 1)
			d, err := in.DropDLQ(ctx, dlq, res.DLQEntryID)
			lost(t, before)
			if err != nil || d.ID != res.DLQEntryID {
				t.Fatalf("drop resent after a lost reply: %+v, %v, want the first run's success", d, err)
			}
			if n := c.Exists(ctx, dlq).Val(); n != 0 {
				t.Fatal("the dead-letter stream is still there")
			}
			auditedOnce(t, AuditEntry{Command: "dlq drop", Handler: "h", Partition: stream, Stream: dlq, EntryID: d.ID})
		})

		// U8: a pause whose SET NX was resent is the pause this call
		// made, not one found in force: audited, and the owner woken.
		for _, all := range []bool{false, true} {
			name := map[bool]string{false: "pause", true: "pause-all"}[all]
			t.Run(name, func(t *testing.T) {
				cat := "u8" + map[bool]string{false: "", true: "all"}[all]
				begin(t, cat)
				stream := rdb.PartitionStream(cat, "a")
				mark := rdb.MetaKey(rdb.LeaseKey(stream, "h"))
				pause := func() (Pause, error) { return in.Pause(ctx, "h", stream, "alice") }
				if all {
					mark = rdb.ControlKey("h")
					pause = func() (Pause, error) { return in.PauseHandler(ctx, "h", "alice") }
				}
				defer c.Del(ctx, mark)
				signals := c.XLen(ctx, rdb.SignalKey(cat)).Val()
				before := l.Lost()
				l.Arm(on("HSETNX", mark), redistest.EOF, 1)
				p, err := pause()
				lost(t, before)
				if err != nil || p.Already || p.By != "alice" {
					t.Fatalf("%s resent after a lost reply: %+v, %v, want this call's pause (Already false)", name, p, err)
				}
				if _, ok, _ := rdb.GetPause(ctx, c, mark); !ok {
					t.Fatal("no pause mark")
				}
				if n := c.XLen(ctx, rdb.SignalKey(cat)).Val(); !all && n != signals+1 {
					t.Fatalf("%d wake-up signals sent, want 1", n-signals)
				}
				auditedOnce(t, AuditEntry{Command: "pause", Handler: "h", Partition: stream, Stream: stream})
			})
		}

		// U9: a resume whose reply was lost (a MULTI/EXEC, which go-redis
		// does not resend, or a script, which it does) reports the pause
		// it ended, and wakes the owner.
		for _, all := range []bool{false, true} {
			name := map[bool]string{false: "resume", true: "resume-all"}[all]
			t.Run(name, func(t *testing.T) {
				cat := "u9" + map[bool]string{false: "", true: "all"}[all]
				begin(t, cat)
				stream := rdb.PartitionStream(cat, "a")
				mark := rdb.MetaKey(rdb.LeaseKey(stream, "h"))
				resume := func() (Pause, error) { return in.Resume(ctx, "h", stream) }
				if all {
					mark = rdb.ControlKey("h")
					resume = func() (Pause, error) { return in.ResumeHandler(ctx, "h") }
				}
				var err error
				if all {
					_, err = in.PauseHandler(ctx, "h", "alice")
				} else {
					_, err = in.Pause(ctx, "h", stream, "alice")
				}
				if err != nil {
					t.Fatal(err)
				}
				signals := c.XLen(ctx, rdb.SignalKey(cat)).Val()
				before := l.Lost()
				l.Arm(runs("clear_pause"), redistest.EOF, 1)
				p, err := resume()
				lost(t, before)
				if err != nil || p.By != "alice" {
					t.Fatalf("%s resent after a lost reply: %+v, %v, want the pause it ended (by alice)", name, p, err)
				}
				if c.HExists(ctx, mark, rdb.MetaPaused).Val() {
					t.Fatal("the pause mark is still there")
				}
				if n := c.XLen(ctx, rdb.SignalKey(cat)).Val(); !all && n != signals+1 {
					t.Fatalf("%d wake-up signals sent, want 1", n-signals)
				}
				if ps, err := in.Paused(ctx, "h"); err != nil || len(ps) != 0 {
					t.Fatalf("Paused after the resume: %+v, %v", ps, err)
				}
				auditedOnce(t, AuditEntry{Command: "resume", Handler: "h", Partition: stream, Stream: stream})
			})
		}

		// U10: an audit append whose reply was lost is recorded once, and
		// Audit answers with that entry's id.
		t.Run("audit", func(t *testing.T) {
			begin(t, "u10")
			before := l.Lost()
			l.Arm(either(on("XADD", rdb.AuditKey), runs("audit")), redistest.EOF, 1)
			e, err := in.Audit(ctx, AuditEntry{Who: "alice", Command: "skip", Handler: "h", Partition: "u10:{a}", Stream: "u10:{a}", EntryID: "1-0", Result: "acked"})
			lost(t, before)
			if err != nil || e.ID == "" {
				t.Fatalf("Audit resent after a lost reply: %+v, %v", e, err)
			}
			es := auditOf(t, in)
			if len(es) != 1 || es[0].ID != e.ID {
				t.Fatalf("the audit stream holds %d entries, want the one Audit answered (%s): %+v", len(es), e.ID, es)
			}
		})
	})
}
