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

// GenGroups reports whether handler's acquires may move its lanes from
// the earlier layout's shared consumer group to lease generations' own
// (rdb.AcquireReq.GenGroups): every live instance of every handler
// registered on handler's categories records a build that reads through
// them. One live instance of an earlier build anywhere on those
// categories keeps the shared groups: its retention creates every
// registered group missing on a lane it trims, from 0, so a moved lane
// would get its shared group back, pinning the stream; and an earlier
// build of handler itself would read it. The answer is read again at
// most once per DiscoveryInterval; a failed read answers false, which
// keeps what each lane has (always safe).
func (in *Instance) GenGroups(ctx context.Context, handler string) bool {
	in.gen.mu.Lock()
	defer in.gen.mu.Unlock()
	if g, ok := in.gen.per[handler]; ok && time.Since(g.at) < in.cfg.DiscoveryInterval {
		return g.ok
	}
	ok := in.readGenGroups(ctx, handler)
	if in.gen.per == nil {
		in.gen.per = map[string]genGroups{}
	}
	in.gen.per[handler] = genGroups{ok: ok, at: time.Now()}
	return ok
}

// readGenGroups reads GenGroups' answer from the deploy records.
func (in *Instance) readGenGroups(ctx context.Context, handler string) bool {
	var cats []string
	for _, b := range in.deployed {
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
			recs, err := rdb.DeployRecords(ctx, in.cfg.Client, g, "")
			if err != nil {
				return false
			}
			live, _, err := in.liveRecords(ctx, recs)
			if err != nil {
				return false
			}
			for _, r := range live {
				var d deployData
				if json.Unmarshal([]byte(r.Data), &d) != nil || !d.GenGroups {
					return false
				}
			}
		}
	}
	return true
}
