package membership

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// genGroups is GenGroups' answer for one handler and when it was read.
type genGroups struct {
	ok bool
	at time.Time
}

// genGroupsCache holds GenGroups' answers; its zero value is ready.
type genGroupsCache struct {
	mu  sync.Mutex
	per map[string]genGroups
}

// genGroupsTrue is how long a true answer of GenGroups stands. It is
// read again on every discovery cycle while false, but a few calls per
// handler on the categories each cycle, forever, would be the gate's
// whole cost once every lane moved; and a true answer that turned false
// meanwhile harms little: an engine of the build before of the same
// handler cannot start beside this one (its records say
// rdb.GenGroupsLayout), and one of another handler only recreates a
// shared group this build destroys as junk at its next trim.
const genGroupsTrue = 30 * time.Second

// genGroupsFor is how long an answer ok stands.
func genGroupsFor(ok bool, discovery time.Duration) time.Duration {
	if ok {
		return max(genGroupsTrue, discovery)
	}
	return discovery
}

// GenGroups reports whether handler's acquires may move its lanes from
// the earlier layout's shared consumer group to lease generations' own
// (rdb.AcquireReq.GenGroups): every live instance of every handler
// registered on handler's categories records a build that reads through
// them, and every live member of those handlers has such a live record
// (a member whose record counts as dead, its OwnerID key lost for a
// while, may be an earlier build that will record itself again). One
// live instance of an earlier build anywhere on those categories keeps
// the shared groups: its retention creates every registered group
// missing on a lane it trims, from 0, so a moved lane would get its
// shared group back, pinning the stream; and an earlier build of handler
// itself would read it from the registered start. A false answer is read
// again at most once per DiscoveryInterval; a failed read answers false,
// which keeps what each lane has (always safe). A true answer stands
// for genGroupsTrue.
//
// Before it first answers true it marks the handler's control hash
// (rdb.MarkGenGroups) and records this instance's build of handler under
// rdb.GenGroupsLayout (moveRecords), which an engine of the build before
// refuses to start beside, then reads the records again: an earlier
// engine that started between the two reads is live in the second, and
// the answer stays false while it runs. A failed write answers false and
// is tried again at the next answer.
func (in *Instance) GenGroups(ctx context.Context, handler string) bool {
	in.gen.mu.Lock()
	defer in.gen.mu.Unlock()
	if g, ok := in.gen.per[handler]; ok && time.Since(g.at) < genGroupsFor(g.ok, in.cfg.DiscoveryInterval) {
		return g.ok
	}
	ok := in.readGenGroups(ctx, handler)
	if ok {
		ok = in.moveRecords(ctx, handler) && in.readGenGroups(ctx, handler)
	}
	if in.gen.per == nil {
		in.gen.per = map[string]genGroups{}
	}
	in.gen.per[handler] = genGroups{ok: ok, at: time.Now()}
	return ok
}

// readGenGroups reads GenGroups' answer from the deploy records and the
// member sets.
func (in *Instance) readGenGroups(ctx context.Context, handler string) bool {
	in.recordMu.Lock()
	builds := in.deployed
	in.recordMu.Unlock()
	var cats []string
	for _, b := range builds {
		if b.Name != handler {
			continue
		}
		for _, rt := range b.Routes {
			cats = append(cats, rt.Category)
		}
	}
	if len(cats) == 0 {
		return false
	}
	seen := map[string]bool{}
	for _, cat := range cats {
		groups, err := rdb.Groups(ctx, in.cfg.Client, cat)
		if err != nil {
			return false
		}
		for _, g := range append(groups, handler) {
			if seen[g] {
				continue
			}
			seen[g] = true
			if !in.allGenGroups(ctx, g) {
				return false
			}
		}
	}
	return true
}

// allGenGroups reports whether every live instance of handler g reads
// through generation groups: its live records all say so, and every live
// member has one.
func (in *Instance) allGenGroups(ctx context.Context, g string) bool {
	recs, err := rdb.DeployRecords(ctx, in.cfg.Client, g, "")
	if err != nil {
		return false
	}
	live, _, err := in.liveRecords(ctx, recs)
	if err != nil {
		return false
	}
	gen := map[string]bool{}
	for _, r := range live {
		var d deployData
		if json.Unmarshal([]byte(r.Data), &d) != nil || !d.GenGroups {
			return false
		}
		gen[r.Owner] = true
	}
	members, err := rdb.LiveMembers(ctx, in.cfg.Client, g, in.MemberTTL())
	if err != nil {
		return false
	}
	for m := range members {
		if !gen[m] {
			return false
		}
	}
	return true
}

// moveRecords marks handler's control hash (rdb.MarkGenGroups) and
// records this instance's build of handler under rdb.GenGroupsLayout,
// unless it did; it reports whether its record says that layout.
func (in *Instance) moveRecords(ctx context.Context, handler string) bool {
	in.recordMu.Lock()
	defer in.recordMu.Unlock()
	if in.recorded3[handler] {
		return true
	}
	for _, b := range in.deployed {
		if b.Name != handler {
			continue
		}
		if !in.moved[handler] {
			if err := rdb.MarkGenGroups(ctx, in.cfg.Client, handler); err != nil {
				in.cfg.Log.Warn("seqby: marking the handler's lanes as moving to generation consumer groups failed; they keep the groups they have", "handler", handler, "err", err)
				return false
			}
			in.markMoved(handler)
		}
		v, err := in.registerBuild(ctx, b)
		if err != nil {
			in.cfg.Log.Warn("seqby: recording this instance's build under the generation groups' layout failed; lanes keep the consumer groups they have", "handler", handler, "err", err)
			return false
		}
		in.mu.Lock()
		if in.views != nil {
			in.views[handler] = v
		}
		in.mu.Unlock()
		return in.recorded3[handler]
	}
	return false
}

// markMoved notes that handler's records say rdb.GenGroupsLayout from
// now on. The caller holds recordMu.
func (in *Instance) markMoved(handler string) {
	if in.moved == nil {
		in.moved = map[string]bool{}
	}
	in.moved[handler] = true
}
