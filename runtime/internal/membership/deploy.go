package membership

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// Rolling deploys. While a deploy rolls, instances of two builds of one
// handler share its consumer groups, and the builds may differ in two ways
// the deploy records guard:
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

// ErrKindChanged is RegisterDeploy's error when a handler runs as another
// kind than a live instance of it does; runtime re-exports it.
var ErrKindChanged = errors.New("handler kind changed under its name while the other kind runs")

// ErrUpgrade is Run's error (RegisterDeploy's) when a live deploy record
// of another key layout (rdb.Layout; an earlier release) names a handler
// this instance registers: the two would keep each partition's halts and
// pauses under different keys. A live member without a record is not
// refused (see RegisterDeploy). runtime re-exports it.
var ErrUpgrade = errors.New("engines of an earlier seqby release run this engine's handlers on the previous key layout: stop every engine of the earlier release, then start this one; see docs/upgrading.md")

// Kinds, as recorded.
const (
	KindKeyed      = "keyed"      // one owner per partition stream
	KindSequential = "sequential" // a sequential pm: one owner per correlation value
	KindUnkeyed    = "unkeyed"    // instances share the groups by message
)

// describeKind says what a recorded kind (or a class judged from an
// earlier build's traces) means.
func describeKind(k string) string {
	switch k {
	case KindKeyed:
		return "keyed (one owner per partition)"
	case KindSequential:
		return "as a sequential process manager (one owner per correlation value)"
	case KindUnkeyed:
		return "unkeyed (its instances share its consumer groups by message)"
	case "leased":
		return "keyed or as a sequential process manager (an earlier build: it records an owned count)"
	case "shared":
		return "unkeyed or as a process manager that is not sequential (an earlier build: it records no owned count)"
	}
	return k
}

// Build is one handler as this instance runs it: what its deploy record
// says.
type Build struct {
	// Name is Registration.Name.
	Name string
	// Kind is KindKeyed, KindSequential or KindUnkeyed.
	Kind string
	// Routes are the registration's routes, in its order.
	Routes []Route
}

// Route is one route of a Build.
type Route struct {
	Category, Type string
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
	// GenGroups: the build reads through lease generations' consumer
	// groups (rdb.Lease.GenGroups) once no live build without it may
	// read the same lanes (GenGroups, groups.go).
	GenGroups bool `json:"gen_groups,omitempty"`
}

// buildOf returns a handler's routes and its build: a digest of its kind
// and routes.
func buildOf(b Build) (map[string][]string, string) {
	routes := map[string][]string{}
	for _, rt := range b.Routes {
		routes[rt.Category] = append(routes[rt.Category], rt.Type)
	}
	for _, ts := range routes {
		sort.Strings(ts)
	}
	data, _ := json.Marshal(routes) // map keys are sorted
	sum := sha256.Sum256(append([]byte(b.Kind+"\n"), data...))
	return routes, hex.EncodeToString(sum[:12])
}

// RegisterDeploy records, for every handler, this instance's kind, build
// and routes (rdb.RecordDeploy), refusing with ErrKindChanged a handler
// that a live instance runs as another kind, and reads the other builds'
// records into the view the executor consults (BuildsRouting). The view
// is per Run: each call replaces it.
//
// First it refuses with ErrUpgrade, recording nothing, while a live
// instance of another key layout runs any of the handlers: a live record
// of another layout (the previous release records one). A live member
// without a record is not taken for one: an instance of this release
// whose record was judged dead (its OwnerID key lost for a while) looks
// the same. deploy_record.lua checks the layouts again as it records, for
// an instance of an earlier release starting meanwhile.
func (in *Instance) RegisterDeploy(ctx context.Context, builds []Build) error {
	in.recordMu.Lock()
	defer in.recordMu.Unlock()
	var old []string
	for _, b := range builds {
		o, err := in.otherLayouts(ctx, b.Name)
		if err != nil {
			return err
		}
		old = append(old, o...)
	}
	if len(old) > 0 {
		return fmt.Errorf("live instances running on an earlier key layout than this release's (layout %d): %s: %w",
			rdb.Layout, strings.Join(old, ", "), ErrUpgrade)
	}
	views := map[string]*buildView{}
	for _, b := range builds {
		v, err := in.registerBuild(ctx, b)
		if err != nil {
			return err
		}
		views[b.Name] = v
	}
	in.mu.Lock()
	in.views = views
	in.mu.Unlock()
	in.deployed = builds
	return nil
}

// registerBuild records this instance's build of one handler, under
// rdb.GenGroupsLayout once the handler's lanes may have moved (its
// control hash's rdb.MetaGenGroups, GenGroups) or a live instance of the
// handler records that layout, else rdb.Layout. The caller holds
// recordMu.
func (in *Instance) registerBuild(ctx context.Context, b Build) (*buildView, error) {
	c, name, self, kind := in.cfg.Client, b.Name, in.cfg.Owner, b.Kind
	routes, build := buildOf(b)
	data, err := json.Marshal(deployData{Incarnation: in.cfg.Incarnation, Routes: routes, GenGroups: true})
	if err != nil {
		return nil, fmt.Errorf("record %s's routes: %w", name, err)
	}
	recs, err := rdb.DeployRecords(ctx, c, name, "")
	if err != nil {
		return nil, err
	}
	live, dead, err := in.liveRecords(ctx, recs)
	if err != nil {
		return nil, err
	}
	// Members without a live record run an earlier build: judge them by
	// their owned count. (One that died with a record may linger in the
	// member set, with its owned count, up to LeaseTTL: as long as its
	// leases and pending entries do.)
	members, err := rdb.LiveMembers(ctx, c, name, in.MemberTTL())
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
	for _, r := range live {
		if r.Layout == rdb.GenGroupsLayout && r.Owner != self {
			in.markMoved(name)
		}
	}
	if !in.moved[name] {
		marked, err := rdb.GenGroupsMarked(ctx, c, name)
		if err != nil {
			return nil, err
		}
		if marked {
			in.markMoved(name)
		}
	}
	layout := rdb.Layout
	if in.moved[name] {
		layout = rdb.GenGroupsLayout
	}
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
	owned, err := rdb.OwnedRecorded(ctx, c, name, bareOwners)
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
	_, conflict, err := rdb.RecordDeploy(ctx, c, name, self, kind, layout, build, string(data), dead, bare)
	if err != nil {
		return nil, err
	}
	if conflict == nil && layout == rdb.GenGroupsLayout {
		if in.recorded3 == nil {
			in.recorded3 = map[string]bool{}
		}
		in.recorded3[name] = true
	}
	if conflict != nil && conflict.Layout != 0 {
		return nil, fmt.Errorf("handler %s: the live instance %s runs on key layout %d, this release on %d: %w",
			name, conflict.Owner, conflict.Layout, rdb.Layout, ErrUpgrade)
	}
	if conflict != nil {
		return nil, fmt.Errorf("handler %s runs %s in this build, but the live instance %s runs it %s: the two kinds would share its consumer groups with no serialization between them; stop (or drain) every instance of the other kind before starting this build, or give the changed handler a new name: %w",
			name, describeKind(kind), conflict.Owner, describeKind(conflict.Kind), ErrKindChanged)
	}
	v := &buildView{build: build, readAt: time.Now()}
	v.others = otherBuilds(live, build, self)
	return v, nil
}

// otherLayouts describes the live instances of handler that run on
// another key layout than this one: those with a live record of another
// layout.
func (in *Instance) otherLayouts(ctx context.Context, handler string) ([]string, error) {
	recs, err := rdb.DeployRecords(ctx, in.cfg.Client, handler, "")
	if err != nil {
		return nil, err
	}
	live, dead, err := in.liveRecords(ctx, recs)
	if err != nil {
		return nil, err
	}
	members, err := rdb.LiveMembers(ctx, in.cfg.Client, handler, in.MemberTTL())
	if err != nil {
		return nil, err
	}
	for _, r := range dead {
		if members[r.Owner] {
			live = append(live, r)
		}
	}
	var out []string
	for _, r := range live {
		if !rdb.Compatible(r.Layout) && r.Owner != in.cfg.Owner {
			out = append(out, fmt.Sprintf("%s (handler %s, key layout %d)", r.Owner, handler, r.Layout))
		}
	}
	return out, nil
}

// liveRecords splits recs into the live ones (their incarnation holds
// their OwnerKey) and the dead ones.
func (in *Instance) liveRecords(ctx context.Context, recs []rdb.DeployRecord) (live, dead []rdb.DeployRecord, err error) {
	owners := make([]string, 0, len(recs))
	for _, r := range recs {
		owners = append(owners, r.Owner)
	}
	incs, err := rdb.Incarnations(ctx, in.cfg.Client, owners)
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

// BuildsRouting returns the live instances of other builds of handler
// that route typ on category (none when this Run recorded no build: a
// test calling the executor directly). The executor asks it of an entry
// whose type this build does not route, and leaves such an entry to them
// (a halt that is not permanent). The view is read again when it is
// older than DiscoveryInterval; a failed read keeps the last one (and is
// logged).
func (in *Instance) BuildsRouting(handler, category, typ string) []string {
	in.mu.Lock()
	v := in.views[handler]
	in.mu.Unlock()
	if v == nil {
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if time.Since(v.readAt) >= in.cfg.DiscoveryInterval {
		if err := in.refreshBuilds(handler, v); err != nil {
			in.cfg.Log.Warn("seqby: reading the other builds of a handler failed; deciding on the last read", "handler", handler,
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
func (in *Instance) refreshBuilds(handler string, v *buildView) error {
	ctx, cancel := context.WithTimeout(context.Background(), in.cfg.DiscoveryInterval)
	defer cancel()
	recs, err := rdb.DeployRecords(ctx, in.cfg.Client, handler, v.build)
	if err != nil {
		return err
	}
	live, _, err := in.liveRecords(ctx, recs)
	if err != nil {
		return err
	}
	v.others = otherBuilds(live, v.build, in.cfg.Owner)
	return nil
}

// rerecordDeploy records this instance's builds again (RegisterDeploy)
// after the heartbeat had to take its OwnerID key back: meanwhile another
// instance may have judged its records dead and removed them.
func (in *Instance) rerecordDeploy(ctx context.Context) {
	in.recordMu.Lock()
	builds := in.deployed
	in.recordMu.Unlock()
	if len(builds) == 0 {
		return
	}
	if err := in.RegisterDeploy(ctx, builds); err != nil {
		in.cfg.Log.Error("seqby: recording this instance's builds again failed; other builds may not see its routes until it restarts", "err", err)
	}
}
