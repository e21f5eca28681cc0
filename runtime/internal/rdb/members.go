package rdb

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Announce joins (join true, also the heartbeat) or leaves group's member
// set for owner, drops members silent for longer than ttl, and returns the
// number of live members. Scores are Redis time, so clock skew between
// instances does not matter.
func Announce(ctx context.Context, c redis.UniversalClient, group, owner string, ttl time.Duration, join bool) (int64, error) {
	return scriptMember.Run(ctx, c, []string{MembersKey(group)}, owner, ttl.Milliseconds(), joinFlag(join)).Int64()
}

// AnnounceAll joins owner to every group's member set in one pipeline,
// and records how many of each group's partitions owner holds (owned[i]
// for groups[i]) for ttl, in the group's control hash (record.lua). A
// pipeline has no EVAL fallback: an IsNoScript error means the server
// lost its script cache; LoadScripts, then announce again.
func AnnounceAll(ctx context.Context, c redis.UniversalClient, groups []string, owned []int, owner string, ttl time.Duration) error {
	pipe := c.Pipeline()
	for i, g := range groups {
		scriptMember.EvalSha(ctx, pipe, []string{MembersKey(g)}, owner, ttl.Milliseconds(), "1")
		scriptRecord.EvalSha(ctx, pipe, []string{ControlKey(g)}, "owned:"+owner, owned[i], ttl.Milliseconds())
	}
	_, err := pipe.Exec(ctx)
	return err
}

// OwnedByOthers sums what the owners other than self last recorded as
// owned in group (AnnounceAll). complete is false when some owner has no
// record (it stopped announcing, or runs a version that does not record):
// the sum then says nothing.
func OwnedByOthers(ctx context.Context, c redis.UniversalClient, group, self string, owners map[string]bool) (sum int64, complete bool, err error) {
	var others []string
	for o := range owners {
		if o != self {
			others = append(others, o)
		}
	}
	counts, err := ownedCounts(ctx, c, group, others)
	if err != nil {
		return 0, false, err
	}
	complete = true
	for _, o := range others {
		n, ok := counts[o]
		if !ok {
			complete = false
			continue
		}
		sum += n
	}
	return sum, complete, nil
}

// ownedCounts reads the unexpired owned counts of owners in group's
// control hash (owned_read.lua): an owner without one is missing.
func ownedCounts(ctx context.Context, c redis.UniversalClient, group string, owners []string) (map[string]int64, error) {
	out := make(map[string]int64, len(owners))
	if len(owners) == 0 {
		return out, nil
	}
	args := make([]any, len(owners))
	for i, o := range owners {
		args[i] = o
	}
	res, err := scriptOwnedRead.Run(ctx, c, []string{ControlKey(group)}, args...).Slice()
	if err != nil {
		return nil, fmt.Errorf("read owned counts of %s: %w", group, err)
	}
	for i, v := range res {
		if s, ok := v.(string); ok && i < len(owners) {
			if n, err := strconv.ParseInt(s, 10, 64); err == nil {
				out[owners[i]] = n
			}
		}
	}
	return out, nil
}

func joinFlag(join bool) string {
	if join {
		return "1"
	}
	return "0"
}

// LiveMembers returns the members of group's member set whose last
// announcement is younger than ttl.
func LiveMembers(ctx context.Context, c redis.UniversalClient, group string, ttl time.Duration) (map[string]bool, error) {
	names, err := scriptLiveMembers.Run(ctx, c, []string{MembersKey(group)}, ttl.Milliseconds()).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("read live members of %s: %w", group, err)
	}
	live := make(map[string]bool, len(names))
	for _, n := range names {
		live[n] = true
	}
	return live, nil
}

// DeleteIdleConsumer deletes consumer from group on stream only if it has
// nothing pending, in one step, so an entry it read after the caller's
// check is never dropped with it. It reports whether it deleted.
func DeleteIdleConsumer(ctx context.Context, c redis.UniversalClient, stream, group, consumer string) (bool, error) {
	n, err := scriptDelIdleConsumer.Run(ctx, c, []string{stream}, group, consumer).Int64()
	return n == 1, err
}

// Deploy records: how each engine instance runs a handler, for rolling
// deploys (package membership). They live in one hash per handler,
// DeployKey, one field per OwnerID; an instance's record counts while its
// incarnation holds its OwnerKey (from the start of Run to its end), and
// a dead one is removed by the next instance that records itself.
var (
	scriptDeployRead   = script("deploy_read")
	scriptDeployRecord = script("deploy_record")
)

// DeployKey is the hash of group's deploy records: field owner id, value
// "v1|<kind>[ under key layout N (...)]|<since>|<build>|<data>":
// "seqby:__deploy__:group".
func DeployKey(group string) string { return "seqby:__deploy__:" + group }

// Layout is the version of the key layout this build reads and writes
// (docs/upgrading.md). The releases before it wrote layout 1 and their
// deploy records say no layout. Engines of two layouts cannot share a
// handler: Run refuses while a live instance of another layout runs one
// of its handlers (membership.ErrUpgrade).
const Layout = 2

// GenGroupsLayout is what this build's deploy records say once its lanes
// read through lease generations' consumer groups (h@<generation>,
// Lease.GenGroups): layout 2's keys with another naming of the groups.
// Until then they say Layout, so engines of the build before it (layout
// 2, shared groups) run beside this one during a rolling deploy. After,
// such an engine refuses to start (its deploy_record.lua sees another
// layout): it would read a moved lane through a shared group it creates
// at the registered start, running the retained entries again. This
// build runs beside records of both (Compatible).
const GenGroupsLayout = 3

// Compatible reports whether this build shares handlers with engines
// whose deploy records say layout: Layout and GenGroupsLayout.
func Compatible(layout int) bool { return layout == Layout || layout == GenGroupsLayout }

// layoutTag follows the kind in deploy records of layout n. An earlier
// release's deploy_record.lua compares the whole kind field (layout 1's:
// '^v1|([^|]*)|') or its layout number (layout 2's) with its own and
// refuses a live instance of another: it sees "keyed under key layout 2
// (...)" as another kind than "keyed", so an engine of that release
// started beside this one refuses, and its error names this text as the
// kind the live instance runs. The field must therefore hold no '|', and
// a live record must keep its data's "incarnation" and the OwnerKey
// string the earlier releases check liveness by.
func layoutTag(n int) string {
	return fmt.Sprintf(" under key layout %d (a later seqby release, which this engine's release cannot run beside: upgrade this engine to it; see docs/upgrading.md)", n)
}

// RecordedKind is the kind field a deploy record of layout (Layout or
// GenGroupsLayout) holds for kind.
func RecordedKind(kind string, layout int) string { return kind + layoutTag(layout) }

// splitKind reads a record's kind field: the kind, and the layout its
// tag names (1 without one: the releases before layouts were recorded).
func splitKind(field string) (kind string, layout int) {
	kind, rest, tagged := strings.Cut(field, " under key layout ")
	if !tagged {
		return field, 1
	}
	n := 0
	for _, r := range rest {
		if r < '0' || r > '9' {
			break
		}
		n = n*10 + int(r-'0')
	}
	if n == 0 {
		n = -1 // unreadable: another layout all the same
	}
	return kind, n
}

// DeployRecord is one instance's record of how it runs a handler.
type DeployRecord struct {
	Owner  string
	Kind   string // "keyed", "sequential" or "unkeyed"
	Layout int    // the key layout its engine runs (1: an earlier release's, untagged)
	Since  int64  // Redis ms when its build was first recorded while live
	Build  string // digest of its kind and routes
	Data   string // the runtime's data (incarnation, routes)
	Raw    string // the stored value
}

// parseDeployRecord reads a stored record; ok is false for a value this
// version cannot read (a later format).
func parseDeployRecord(owner, raw string) (DeployRecord, bool) {
	parts := strings.SplitN(raw, "|", 5)
	if len(parts) != 5 || parts[0] != "v1" {
		return DeployRecord{}, false
	}
	since, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return DeployRecord{}, false
	}
	kind, layout := splitKind(parts[1])
	return DeployRecord{Owner: owner, Kind: kind, Layout: layout, Since: since, Build: parts[3], Data: parts[4], Raw: raw}, true
}

// DeployRecords returns group's deploy records, but those of build skip
// (none left out when it is ""), and of a format this version cannot read.
func DeployRecords(ctx context.Context, c redis.UniversalClient, group, skip string) ([]DeployRecord, error) {
	res, err := scriptDeployRead.Run(ctx, c, []string{DeployKey(group)}, skip).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("read the deploy records of %s: %w", group, err)
	}
	var out []DeployRecord
	for i := 0; i+1 < len(res); i += 2 {
		if r, ok := parseDeployRecord(res[i], res[i+1]); ok {
			out = append(out, r)
		}
	}
	return out, nil
}

// DeployKinds returns the kinds of group's deploy records ("keyed",
// "sequential", "unkeyed"), those of a format this version cannot read
// left out. An operator's read: one HGETALL, which seqbyctl's ACL user
// may run (it has no HGET for DeployRecords' script).
func DeployKinds(ctx context.Context, c redis.UniversalClient, group string) ([]string, error) {
	all, err := c.HGetAll(ctx, DeployKey(group)).Result()
	if err != nil {
		return nil, fmt.Errorf("read the deploy records of %s: %w", group, err)
	}
	var out []string
	for owner, raw := range all {
		if r, ok := parseDeployRecord(owner, raw); ok {
			out = append(out, r.Kind)
		}
	}
	return out, nil
}

// DeployConflict is a live instance of another kind found by RecordDeploy.
type DeployConflict struct {
	Owner string
	Kind  string // a record's kind, or "leased" / "shared" for a member without one
	// Layout is the key layout of the instance's record when this build
	// cannot run beside it (not Compatible), whatever its kind; 0
	// otherwise.
	Layout int
}

// RecordDeploy records owner's kind, build and data for group, removing
// the dead records (unless changed since they were read), unless a live
// record of another kind, or a member in bare (owner -> "leased" or
// "shared", members without a record judged by an earlier build's traces)
// of the other class, or a live record of another key layout, is there:
// then it writes nothing and returns it. It returns since: when this build
// was first recorded while live. The record says layout (Layout, or
// GenGroupsLayout once the instance reads through generation groups); a
// record of the other of the two is no conflict (Compatible).
func RecordDeploy(ctx context.Context, c redis.UniversalClient, group, owner, kind string, layout int, build, data string, dead []DeployRecord, bare map[string]string) (since int64, conflict *DeployConflict, err error) {
	args := []any{owner, RecordedKind(kind, layout), build, data, len(dead)}
	for _, d := range dead {
		args = append(args, d.Owner, d.Raw)
	}
	for o, class := range bare {
		args = append(args, o, class)
	}
	res, err := scriptDeployRecord.Run(ctx, c, []string{DeployKey(group)}, args...).Slice()
	if err != nil {
		return 0, nil, fmt.Errorf("record %s's kind and routes (%s): %w", group, DeployKey(group), err)
	}
	if len(res) == 3 {
		k, theirs := splitKind(fmt.Sprint(res[2]))
		if Compatible(theirs) || k == "leased" || k == "shared" {
			theirs = 0 // another kind, not another layout
		}
		return 0, &DeployConflict{Owner: fmt.Sprint(res[1]), Kind: k, Layout: theirs}, nil
	}
	if len(res) != 2 {
		return 0, nil, fmt.Errorf("record %s's kind and routes: unexpected reply %v", group, res)
	}
	since, _ = res[1].(int64)
	return since, nil, nil
}

// Incarnations returns the incarnation holding each owner's OwnerKey
// ("" for none).
func Incarnations(ctx context.Context, c redis.UniversalClient, owners []string) (map[string]string, error) {
	return getAll(ctx, c, owners, OwnerKey)
}

// OwnedRecorded reports, for each owner, whether it has an unexpired
// owned count for group (AnnounceAll): keyed handlers and sequential pms
// write one with every heartbeat, unkeyed handlers never. An earlier
// release's count (its own key, expiring) counts too.
func OwnedRecorded(ctx context.Context, c redis.UniversalClient, group string, owners []string) (map[string]bool, error) {
	counts, err := ownedCounts(ctx, c, group, owners)
	if err != nil {
		return nil, err
	}
	old, err := getAll(ctx, c, owners, func(o string) string { return legacyOwnedKey(group, o) })
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(owners))
	for _, o := range owners {
		_, out[o] = counts[o]
		out[o] = out[o] || old[o] != ""
	}
	return out, nil
}

func getAll(ctx context.Context, c redis.UniversalClient, owners []string, key func(string) string) (map[string]string, error) {
	out := make(map[string]string, len(owners))
	if len(owners) == 0 {
		return out, nil
	}
	pipe := c.Pipeline()
	cmds := make([]*redis.StringCmd, len(owners))
	for i, o := range owners {
		cmds[i] = pipe.Get(ctx, key(o))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("read %s and %d more: %w", key(owners[0]), len(owners)-1, err)
	}
	for i, o := range owners {
		v, err := cmds[i].Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("read %s: %w", key(o), err)
		}
		out[o] = v
	}
	return out, nil
}

// ClaimOwner takes ownerID's key (OwnerKey) for incarnation with a TTL.
// held is the incarnation holding it when taken is false, and left its
// remaining TTL.
func ClaimOwner(ctx context.Context, c redis.UniversalClient, ownerID, incarnation string, ttl time.Duration) (taken bool, held string, left time.Duration, err error) {
	res, err := scriptOwnerClaim.Run(ctx, c, []string{OwnerKey(ownerID)}, incarnation, ttl.Milliseconds()).Slice()
	if err != nil {
		return false, "", 0, fmt.Errorf("claim owner id %s: %w", ownerID, err)
	}
	if len(res) == 1 {
		return true, "", 0, nil
	}
	if len(res) != 3 {
		return false, "", 0, fmt.Errorf("claim owner id %s: unexpected reply %v", ownerID, res)
	}
	ms, _ := res[2].(int64)
	return false, fmt.Sprint(res[1]), time.Duration(ms) * time.Millisecond, nil
}

// RenewOwner extends ownerID's key if incarnation still holds it, else it
// fails with ErrLeaseLost.
func RenewOwner(ctx context.Context, c redis.UniversalClient, ownerID, incarnation string, ttl time.Duration) error {
	n, err := scriptRenew.Run(ctx, c, []string{OwnerKey(ownerID)}, incarnation, ttl.Milliseconds()).Int64()
	if err != nil {
		return fmt.Errorf("renew owner id %s: %w", ownerID, err)
	}
	if n != 1 {
		return fmt.Errorf("renew owner id %s as %s: %w", ownerID, incarnation, ErrLeaseLost)
	}
	return nil
}

// ReleaseOwner deletes ownerID's key if incarnation holds it.
func ReleaseOwner(ctx context.Context, c redis.UniversalClient, ownerID, incarnation string) error {
	if err := scriptRelease.Run(ctx, c, []string{OwnerKey(ownerID)}, incarnation).Err(); err != nil {
		return fmt.Errorf("release owner id %s: %w", ownerID, err)
	}
	return nil
}
