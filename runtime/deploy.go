package runtime

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
// this file guards:
//
//   - Routes. A handler acks unrun an entry of a type it does not route
//     when another handler of its build knows the type (decodeEntry). But
//     if a newer build of the same handler routes that type, the entry is
//     the newer build's to run: an old instance that acked it would lose
//     it. So at Run every instance records its build (a digest of its kind
//     and routes) with its routes and since when that build is deployed,
//     in the handler's deploy records (rdb.DeployKey); the since of a
//     build is inherited from its live instances, so a restarted old
//     instance stays old. An entry of a type this build does not route,
//     but a live newer build does, halts (not permanently) for the newer
//     build to run once it takes the partition over (for an unkeyed
//     handler: claims it after the old instance stopped). A type only an
//     older build routes is this build's to drop: its own routes decide.
//     The records of the other builds are read at Run and again at most
//     once per DiscoveryInterval, when a type this build does not route
//     shows up, so an old instance sees a newer build at most one
//     DiscoveryInterval after that build started.
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

// ErrRoutedByNewerBuild is the error of a halt on an entry whose type this
// build of the handler does not route but a live newer build of it does:
// the entry is left for the newer build, which runs it once it takes the
// partition over (or the entry, for an unkeyed handler) when this instance
// stops. Finish the deploy; a rollback that stops the newer instances lets
// this build decide again (the halted head is retried every
// HaltedRetryInterval).
var ErrRoutedByNewerBuild = errors.New("message type routed by a newer build of this handler")

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
	since  int64
	others []otherBuild
	readAt time.Time
}

// otherBuild is a live instance of another build of the handler.
type otherBuild struct {
	owner  string
	build  string
	since  int64
	routes map[string]bool // category \x00 type
}

// newer reports whether o is a newer build than (since, build): deployed
// later (the build digest breaks a tie of one millisecond).
func (o otherBuild) newer(since int64, build string) bool {
	return o.since > since || o.since == since && o.build > build
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
// records into the view decodeEntry consults.
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
	since, conflict, err := rdb.RecordDeploy(ctx, e.c, name, self, kind, build, string(data), dead, bare)
	if err != nil {
		return nil, err
	}
	if conflict != nil {
		return nil, fmt.Errorf("handler %s runs %s in this build, but the live instance %s runs it %s: the two kinds would share its consumer groups with no serialization between them; stop (or drain) every instance of the other kind before starting this build, or give the changed handler a new name: %w",
			name, describeKind(kind), conflict.Owner, describeKind(conflict.Kind), ErrKindChanged)
	}
	v := &buildView{build: build, since: since, readAt: time.Now()}
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
		o := otherBuild{owner: r.Owner, build: r.Build, since: r.Since, routes: map[string]bool{}}
		for cat, ts := range d.Routes {
			for _, t := range ts {
				o.routes[cat+"\x00"+t] = true
			}
		}
		out = append(out, o)
	}
	return out
}

// newerBuildsRouting returns the live instances of newer builds of reg's
// handler that route typ on category (none when this Run recorded no
// build: an inline broker, a test calling handle directly). The view is
// read again when it is older than DiscoveryInterval; a failed read keeps
// the last one (and is logged).
func (e *Engine) newerBuildsRouting(reg Registration, category, typ string) []string {
	e.reg.deploy.mu.Lock()
	v := e.reg.deploy.handlers[reg.Name]
	e.reg.deploy.mu.Unlock()
	if v == nil {
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if time.Since(v.readAt) >= e.o.DiscoveryInterval {
		if err := e.refreshBuilds(reg.Name, v); err != nil {
			e.log.Warn("seqby: reading the other builds of a handler failed; deciding on the last read", "handler", reg.Name,
				"read_at", v.readAt, "err", err)
		}
		v.readAt = time.Now() // a failure is retried one interval later, not per entry
	}
	var owners []string
	for _, o := range v.others {
		if o.newer(v.since, v.build) && o.routes[category+"\x00"+typ] {
			owners = append(owners, o.owner)
		}
	}
	return owners
}

// refreshBuilds reads the live records of the other builds into v.
func (e *Engine) refreshBuilds(handler string, v *buildView) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
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

// leftForNewerBuild is the halt of an entry whose type reg does not route
// on category but a live newer build of it does (nil otherwise): not
// permanent, so a keyed partition retries it every HaltedRetryInterval
// (and goes on by its own routes once no newer build routes it), and the
// newer build runs it once it takes the partition over.
func (e *Engine) leftForNewerBuild(reg Registration, category string, en rdb.Entry, typ string) *Halt {
	owners := e.newerBuildsRouting(reg, category, typ)
	if len(owners) == 0 {
		return nil
	}
	sort.Strings(owners)
	return e.haltOf(reg, category, en, "type routed by a newer build of this handler",
		fmt.Errorf("%s %s has no route for type %q on %s in this build, but a newer build of it, live on %s, routes it: the entry is left to that build, which runs it once this instance stops and it takes over; finish the deploy (or stop the newer instances to roll it back): %w",
			reg.Kind, reg.Name, typ, category, strings.Join(owners, ", "), ErrRoutedByNewerBuild))
}
