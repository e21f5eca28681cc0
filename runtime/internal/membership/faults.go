package membership

import (
	"context"
	"sort"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// Fault kinds, the values of runtime.FaultKind.
const (
	// FaultReleased is a partition released for permanent Redis errors.
	FaultReleased = "released"
	// FaultUnowned is a partition with work and no owner for too long.
	FaultUnowned = "unowned"
)

// Fault is runtime.Fault's copy, with Kind as a plain string: runtime
// converts it field by field. runtime.Fault documents each field.
type Fault struct {
	Kind     string
	Handler  string
	Category string
	Key      string
	Stream   string
	Err      error
	Since    time.Time
	Until    time.Time
}

func faultID(kind, id string) string { return kind + "\x00" + id }

// Release reports that partition id gives up for permanent Redis errors:
// f (a FaultReleased fault) benches it here until f.Until (Benched), and
// it counts toward this instance's stall (the health strikes), so others
// take it. OnFault runs on its own goroutine: the heartbeat calls this
// too, and must not wait.
func (in *Instance) Release(id string, f Fault) {
	if in.Benched(id) {
		return // the worker and the heartbeat both gave up on it
	}
	in.mu.Lock()
	in.faults[faultID(FaultReleased, id)] = f
	in.mu.Unlock()
	in.workStrike(f.Handler, id)
	in.cfg.Log.Error("seqby: releasing the partition after permanent redis errors; this instance leaves it alone for a while so other instances take it. Fix the cause: the ACL user's commands and keys (docs/operating.md, \"TLS and ACL users\"), a key holding something seqby did not write, cluster slots",
		"handler", f.Handler, "stream", f.Stream, "benched_for", f.Until.Sub(f.Since), "err", f.Err)
	if in.cfg.OnFault != nil {
		go in.cfg.OnFault(f)
	}
}

// Benched reports whether id was released for permanent errors and its
// bench has not ended.
func (in *Instance) Benched(id string) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	f, ok := in.faults[faultID(FaultReleased, id)]
	return ok && time.Now().Before(f.Until)
}

// HasFault reports whether a fault of kind is recorded for id.
func (in *Instance) HasFault(kind, id string) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	_, ok := in.faults[faultID(kind, id)]
	return ok
}

// AddFault records f for id; the caller reports it.
func (in *Instance) AddFault(id string, f Fault) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.faults[faultID(f.Kind, id)] = f
}

// RemoveFault forgets id's fault of kind and returns it, if there was
// one.
func (in *Instance) RemoveFault(kind, id string) (Fault, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	fid := faultID(kind, id)
	f, ok := in.faults[fid]
	delete(in.faults, fid)
	return f, ok
}

// PruneFaults forgets released faults whose bench ended, so the table
// holds at most the partitions benched in the last bench plus the
// unowned ones (bounded by the indexes). Called every discovery cycle.
func (in *Instance) PruneFaults() {
	in.mu.Lock()
	defer in.mu.Unlock()
	now := time.Now()
	for id, f := range in.faults {
		if f.Kind == FaultReleased && !now.Before(f.Until) {
			delete(in.faults, id)
		}
	}
}

// Faults returns the current faults, sorted, for Status.
func (in *Instance) Faults() []Fault {
	in.mu.Lock()
	defer in.mu.Unlock()
	var out []Fault
	for _, f := range in.faults {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Handler != b.Handler {
			return a.Handler < b.Handler
		}
		return a.Stream < b.Stream
	})
	return out
}

// MaxReportedFaults bounds the faults of one handler an instance reports
// in Redis (Status().Faults has them all).
const MaxReportedFaults = 100

// ReportFaults keeps this instance's faults in Redis for operators (the
// console's overview, inspect.Inspector.Faults): each handler's control
// hash holds this instance's faults of that handler as JSON while there
// are any, expiring 2 × LeaseTTL after the last heartbeat that wrote them
// (a killed instance's report ends so), deleted by the first heartbeat
// that finds none. At most MaxReportedFaults of a handler go (the first,
// by kind and stream): the record is rewritten at every heartbeat, and
// written and pruned in a script that reads the control hash whole.
// Heartbeat loop only.
func (in *Instance) ReportFaults(ctx context.Context) {
	fs := in.Faults()
	if len(fs) == 0 && len(in.faultsReported) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, in.cfg.HeartbeatInterval)
	defer cancel()
	byHandler := map[string][]rdb.FaultReport{}
	for _, f := range fs {
		r := rdb.FaultReport{Kind: f.Kind, Handler: f.Handler, Category: f.Category, Key: f.Key, Stream: f.Stream,
			Since: f.Since, Until: f.Until}
		if f.Err != nil {
			r.Err = f.Err.Error()
		}
		if len(byHandler[f.Handler]) < MaxReportedFaults {
			byHandler[f.Handler] = append(byHandler[f.Handler], r)
		}
	}
	var clear []string
	for h := range in.faultsReported {
		if byHandler[h] == nil {
			clear = append(clear, h)
		}
	}
	if err := rdb.ReportFaults(ctx, in.cfg.Client, in.cfg.Owner, byHandler, clear, 2*in.cfg.LeaseTTL); err != nil {
		// Some records may be written: clear them once their faults end.
		if in.faultsReported == nil {
			in.faultsReported = map[string]bool{}
		}
		for h := range byHandler {
			in.faultsReported[h] = true
		}
		in.cfg.Log.Debug("seqby: reporting faults failed", "err", err)
		return
	}
	in.faultsReported = map[string]bool{}
	for h := range byHandler {
		in.faultsReported[h] = true
	}
}
