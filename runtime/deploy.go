package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/seqby/seqby/runtime/internal/contract"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// Rolling deploys. While a deploy rolls, instances of two builds of one
// handler share its consumer groups, and the builds may differ in two ways
// this file guards:
//
//   - Routes. A handler acks unrun an entry of a type it does not route
//     when another handler of its build knows the type (the executor's
//     Decode). But
//     if another live build of the same handler routes that type, the
//     entry may be that build's to run: an instance that acked it would
//     lose it. Which build is "newer" cannot be told safely (an old pod
//     restarted during a rollout looks like a rollback), so the rule is
//     symmetric: an entry of a type this build does not route, while any
//     live other build of the handler routes it, halts (not permanently),
//     and is run by an instance of a build that routes it once that one
//     owns the partition (for an unkeyed handler: claims the entry). Only
//     when no live build of the handler routes the type does this build's
//     own rule decide (ack it as another handler's type, or halt on a
//     type nobody knows). So a deploy that adds a type runs it on the new
//     build; one that drops a type halts the new build on it until the old
//     instances are gone, and then drops it. At Run every instance records
//     its build (a digest of its kind and routes) with its routes in the
//     handler's deploy records (rdb.DeployKey), and records itself again
//     whenever the heartbeat had to take its OwnerID key back (a record
//     judged dead meanwhile may have been removed). The records of the
//     other builds are read at Run and again at most once per
//     DiscoveryInterval, when a type this build does not route shows up,
//     so an instance sees another build at most one DiscoveryInterval
//     after that build started.
//   - Kind. A keyed handler's owners, an unkeyed handler's consumers and a
//     sequential pm's owners read the same consumer groups in different
//     ways, with no serialization between them. A handler whose kind
//     changed under its name is refused at Run (ErrKindChanged) while an
//     instance of the other kind is live: its record counts while its
//     incarnation holds its OwnerKey, and a member of the handler's
//     member set without a record (an earlier build) is judged by its
//     owned count, which keyed handlers and sequential pms write with
//     every heartbeat and unkeyed ones never do.

// ErrKindChanged is Run's error when a handler runs as another kind
// (keyed, unkeyed, sequential pm) than a live instance of it does: the two
// kinds would share the handler's consumer groups with no serialization.
// Stop (drain) every instance of the old kind first, or give the changed
// handler a new name.
var ErrKindChanged = errors.New("handler kind changed under its name while the other kind runs")

// ErrRoutedByAnotherBuild is the error of a halt on an entry whose type
// this build of the handler does not route but another live build of it
// does (a rolling deploy): the entry is left for that build, which runs it
// once it takes the partition over (or the entry, for an unkeyed
// handler). Finish the deploy (or the rollback); do not skip the entry:
// once no live build routes the type, this build decides again at its
// next retry (every HaltedRetryInterval).
var ErrRoutedByAnotherBuild = contract.ErrRoutedByAnotherBuild

// Kinds, as recorded.
const (
	kindKeyed      = "keyed"      // one owner per partition stream
	kindSequential = "sequential" // a sequential pm: one owner per correlation value
	kindUnkeyed    = "unkeyed"    // instances share the groups by message
)

// describeKind says what a recorded kind (or a class judged from an
// earlier build's traces) means.
func describeKind(k string) string {
	switch k {
	case kindKeyed:
		return "keyed (one owner per partition)"
	case kindSequential:
		return "as a sequential process manager (one owner per correlation value)"
	case kindUnkeyed:
		return "unkeyed (its instances share its consumer groups by message)"
	case "leased":
		return "keyed or as a sequential process manager (an earlier build: it records an owned count)"
	case "shared":
		return "unkeyed or as a process manager that is not sequential (an earlier build: it records no owned count)"
	}
	return k
}

// deploys is the engine's view of the other builds of its handlers, reset
// by each Run (registerDeploy). It lives in the Registry (Registry.deploy).
type deploys struct {
	mu       sync.Mutex
	handlers map[string]*buildView
}

// buildView is this instance's build of one handler and the live records
// of its other builds, as last read.
type buildView struct {
	mu     sync.Mutex // held while refreshing, so one read serves all
	build  string
	others []otherBuild
	readAt time.Time
}

// otherBuild is a live instance of another build of the handler.
type otherBuild struct {
	owner  string
	build  string
	routes map[string]bool // category \x00 type
}

// deployData is the runtime's part of a record.
type deployData struct {
	Incarnation string              `json:"incarnation"`
	Routes      map[string][]string `json:"routes"` // category -> types, sorted
}

// deployKind is the kind a handler's consumers make it.
func deployKind(cs []consumer) string {
	kind := kindUnkeyed
	for _, c := range cs {
		switch c.mode {
		case modePM:
			return kindSequential
		case modeLeased:
			kind = kindKeyed
		}
	}
	return kind
}

// buildOf returns a registration's routes and its build: a digest of its
// kind and routes.
func buildOf(reg Registration, kind string) (map[string][]string, string) {
	routes := map[string][]string{}
	for _, rt := range reg.Routes {
		routes[rt.Category] = append(routes[rt.Category], rt.Type)
	}
	for _, ts := range routes {
		sort.Strings(ts)
	}
	b, _ := json.Marshal(routes) // map keys are sorted
	sum := sha256.Sum256(append([]byte(kind+"\n"), b...))
	return routes, hex.EncodeToString(sum[:12])
}

// registerDeploy records, for every handler, this instance's kind, build
// and routes (rdb.RecordDeploy), refusing with ErrKindChanged a handler
// that a live instance runs as another kind, and reads the other builds'
// records into the view the executor consults (buildsRouting).
func (e *Engine) registerDeploy(ctx context.Context, cs []consumer) error {
	byName := map[string][]consumer{}
	var names []string
	for _, c := range cs {
		if byName[c.reg.Name] == nil {
			names = append(names, c.reg.Name)
		}
		byName[c.reg.Name] = append(byName[c.reg.Name], c)
	}
	sort.Strings(names)
	views := map[string]*buildView{}
	for _, name := range names {
		v, err := e.registerBuild(ctx, byName[name][0].reg, deployKind(byName[name]))
		if err != nil {
			return err
		}
		views[name] = v
	}
	e.reg.deploy.mu.Lock()
	e.reg.deploy.handlers = views
	e.reg.deploy.mu.Unlock()
	e.deployed = cs
	return nil
}

// registerBuild records this instance's build of one handler.
func (e *Engine) registerBuild(ctx context.Context, reg Registration, kind string) (*buildView, error) {
	name, self := reg.Name, e.o.OwnerID
	routes, build := buildOf(reg, kind)
	data, err := json.Marshal(deployData{Incarnation: e.incarnation, Routes: routes})
	if err != nil {
		return nil, fmt.Errorf("record %s's routes: %w", name, err)
	}
	recs, err := rdb.DeployRecords(ctx, e.c, name, "")
	if err != nil {
		return nil, err
	}
	live, dead, err := e.liveRecords(ctx, recs)
	if err != nil {
		return nil, err
	}
	// Members without a live record run an earlier build: judge them by
	// their owned count. (One that died with a record may linger in the
	// member set, with its owned count, up to LeaseTTL: as long as its
	// leases and pending entries do.)
	members, err := rdb.LiveMembers(ctx, e.c, name, e.memberTTL())
	if err != nil {
		return nil, err
	}
	// A live member whose record counts as dead could not take its
	// OwnerID key (an ACL without SET, a Redis error as it started): it
	// lives, and its record says its kind.
	var gone []rdb.DeployRecord
	for _, r := range dead {
		if _, ok := members[r.Owner]; ok {
			live = append(live, r)
		} else {
			gone = append(gone, r)
		}
	}
	dead = gone
	recorded := map[string]bool{self: true}
	for _, r := range live {
		recorded[r.Owner] = true
	}
	var bareOwners []string
	for m := range members {
		if !recorded[m] {
			bareOwners = append(bareOwners, m)
		}
	}
	owned, err := rdb.OwnedRecorded(ctx, e.c, name, bareOwners)
	if err != nil {
		return nil, err
	}
	bare := make(map[string]string, len(owned))
	for o, has := range owned {
		bare[o] = "shared"
		if has {
			bare[o] = "leased"
		}
	}
	_, conflict, err := rdb.RecordDeploy(ctx, e.c, name, self, kind, build, string(data), dead, bare)
	if err != nil {
		return nil, err
	}
	if conflict != nil {
		return nil, fmt.Errorf("handler %s runs %s in this build, but the live instance %s runs it %s: the two kinds would share its consumer groups with no serialization between them; stop (or drain) every instance of the other kind before starting this build, or give the changed handler a new name: %w",
			name, describeKind(kind), conflict.Owner, describeKind(conflict.Kind), ErrKindChanged)
	}
	v := &buildView{build: build, readAt: time.Now()}
	v.others = otherBuilds(live, build, self)
	return v, nil
}

// liveRecords splits recs into the live ones (their incarnation holds
// their OwnerKey) and the dead ones.
func (e *Engine) liveRecords(ctx context.Context, recs []rdb.DeployRecord) (live, dead []rdb.DeployRecord, err error) {
	owners := make([]string, 0, len(recs))
	for _, r := range recs {
		owners = append(owners, r.Owner)
	}
	incs, err := rdb.Incarnations(ctx, e.c, owners)
	if err != nil {
		return nil, nil, err
	}
	for _, r := range recs {
		var d deployData
		if json.Unmarshal([]byte(r.Data), &d) == nil && d.Incarnation != "" && incs[r.Owner] == d.Incarnation {
			live = append(live, r)
		} else {
			dead = append(dead, r)
		}
	}
	return live, dead, nil
}

// otherBuilds converts the live records of builds other than build (and
// other owners than self) for the view.
func otherBuilds(live []rdb.DeployRecord, build, self string) []otherBuild {
	var out []otherBuild
	for _, r := range live {
		if r.Build == build || r.Owner == self {
			continue
		}
		var d deployData
		if json.Unmarshal([]byte(r.Data), &d) != nil {
			continue
		}
		o := otherBuild{owner: r.Owner, build: r.Build, routes: map[string]bool{}}
		for cat, ts := range d.Routes {
			for _, t := range ts {
				o.routes[cat+"\x00"+t] = true
			}
		}
		out = append(out, o)
	}
	return out
}

// buildsRouting returns the live instances of other builds of handler
// that route typ on category (none when this Run recorded no build: a
// test calling the executor directly). The executor asks it of an entry
// whose type this build does not route, and leaves such an entry to them
// (a halt that is not permanent). The view is
// read again when it is older than DiscoveryInterval; a failed read keeps
// the last one (and is logged).
func (e *Engine) buildsRouting(handler, category, typ string) []string {
	e.reg.deploy.mu.Lock()
	v := e.reg.deploy.handlers[handler]
	e.reg.deploy.mu.Unlock()
	if v == nil {
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if time.Since(v.readAt) >= e.o.DiscoveryInterval {
		if err := e.refreshBuilds(handler, v); err != nil {
			e.log.Warn("seqby: reading the other builds of a handler failed; deciding on the last read", "handler", handler,
				"read_at", v.readAt, "err", err)
		}
		v.readAt = time.Now() // a failure is retried one interval later, not per entry
	}
	var owners []string
	for _, o := range v.others {
		if o.routes[category+"\x00"+typ] {
			owners = append(owners, o.owner)
		}
	}
	return owners
}

// refreshBuilds reads the live records of the other builds into v.
func (e *Engine) refreshBuilds(handler string, v *buildView) error {
	ctx, cancel := context.WithTimeout(context.Background(), e.o.DiscoveryInterval)
	defer cancel()
	recs, err := rdb.DeployRecords(ctx, e.c, handler, v.build)
	if err != nil {
		return err
	}
	live, _, err := e.liveRecords(ctx, recs)
	if err != nil {
		return err
	}
	v.others = otherBuilds(live, v.build, e.o.OwnerID)
	return nil
}

// rerecordDeploy records this instance's builds again (registerDeploy)
// after the heartbeat had to take its OwnerID key back: meanwhile another
// instance may have judged its records dead and removed them.
func (e *Engine) rerecordDeploy(ctx context.Context) {
	cs := e.deployed
	if len(cs) == 0 {
		return
	}
	if err := e.registerDeploy(ctx, cs); err != nil {
		e.log.Error("seqby: recording this instance's builds again failed; other builds may not see its routes until it restarts", "err", err)
	}
}
