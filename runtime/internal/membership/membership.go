package membership

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Config is what an Instance needs from the engine; New takes it.
type Config struct {
	// Client is the engine's Redis client.
	Client redis.UniversalClient
	// Owner is Options.OwnerID.
	Owner string
	// Incarnation is this engine's incarnation of Owner (NewIncarnation).
	Incarnation string
	// LeaseTTL is Options.LeaseTTL: how long the OwnerID's key, a
	// membership and a fault report outlive their last refresh.
	LeaseTTL time.Duration
	// HeartbeatInterval is Options.HeartbeatInterval, which bounds each
	// heartbeat's calls.
	HeartbeatInterval time.Duration
	// DiscoveryInterval is Options.DiscoveryInterval: how stale the view
	// of the other builds may grow.
	DiscoveryInterval time.Duration
	// Log gets the instance's warnings and errors.
	Log *slog.Logger
	// Owned returns how many partitions this instance owns per handler,
	// in the order of handlers; the engine keeps the owned set. Called
	// without any of the Instance's locks held.
	Owned func(handlers []string) []int
	// OnFault gets each fault this instance reports, on its own
	// goroutine (the heartbeat reports some, and must not wait); nil
	// drops them.
	OnFault func(Fault)
}

// Instance is this engine instance's record: identity, announcements,
// health strikes, faults and deploy records. Its zero value is not
// usable; New builds one.
type Instance struct {
	cfg Config

	// mu guards faults, health and views.
	mu sync.Mutex
	// faults holds the partitions benched for permanent Redis errors and
	// those seen unowned, by faultID.
	faults map[string]Fault
	// health holds, per keyed handler, the failures that decide whether
	// this instance is announced as live; bounded by the handlers.
	health map[string]*health
	// views is this instance's build of each handler and the other
	// builds it saw, reset by each Run (RegisterDeploy).
	views map[string]*buildView

	// workStruck: some partition was released for permanent errors since
	// Run started, so acks must clear work strikes.
	workStruck atomic.Bool
	// faultsReported: the handlers whose faults the last report in Redis
	// listed, so a heartbeat that finds none of one deletes its record.
	// Heartbeat loop only.
	faultsReported map[string]bool
	// deployed is the builds Run recorded in the deploy records, to
	// record them again; set by RegisterDeploy.
	deployed []Build
	// gen holds GenGroups' answers.
	gen genGroupsCache
	// recordMu serializes the deploy records' writes (RegisterDeploy,
	// GenGroups' move to rdb.GenGroupsLayout), so a record written again
	// never goes back to the earlier layout; it guards moved. Taken after
	// gen.mu, never before.
	recordMu sync.Mutex
	// moved holds the handlers whose records must say
	// rdb.GenGroupsLayout: their control hash has rdb.MetaGenGroups, or a
	// live instance records that layout. recorded3 holds those whose
	// record this instance wrote under it. Both bounded by the handlers,
	// never cleared (lanes that moved stay moved).
	moved, recorded3 map[string]bool

	// leaving: stop announcing, a graceful stop began.
	leaving atomic.Bool
	// announceMu makes announce's check of leaving and its send atomic
	// with respect to LeaveMembers, which sets leaving under it: else an
	// announcement that read leaving false could land after LeaveMembers
	// took the instance out, and keep it live (and its deploy record) for
	// LeaseTTL. Reset clears leaving without it: the last Run's heartbeat
	// ended before that Run returned, so no announcement is in flight.
	announceMu sync.Mutex
	// announceHook, nil but in tests, runs in announceOnce between the
	// check of leaving and the send, to hold an announcement in flight.
	announceHook func()
}

// New returns the Instance for cfg.
func New(cfg Config) *Instance {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Owned == nil {
		cfg.Owned = func(handlers []string) []int { return make([]int, len(handlers)) }
	}
	return &Instance{cfg: cfg, faults: map[string]Fault{}, health: map[string]*health{}}
}

// Reset starts a Run: faults, failures and leaving are per Run, so a
// second Run neither reports the first one's nor skips what it failed on.
func (in *Instance) Reset() {
	in.leaving.Store(false)
	in.mu.Lock()
	in.faults, in.health = map[string]Fault{}, map[string]*health{}
	in.mu.Unlock()
	in.workStruck.Store(false)
}

// MemberTTL is how long an instance counts as live after its last
// announcement: one lease TTL, like its leases, so a crashed instance
// leaves the member set when its leases expire. Announcements ride on the
// heartbeat and on every discovery cycle.
func (in *Instance) MemberTTL() time.Duration { return in.cfg.LeaseTTL }
