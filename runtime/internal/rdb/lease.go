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

// LeaseRef names one lease: its key and its generation counter. A lease
// covers whatever its owner reads under it: one partition's lanes for a
// keyed handler, every stream of a correlation value for a pm.
type LeaseRef struct {
	Key  string // holds "<owner_id>~<incarnation>:<generation>" while owned
	Meta string // its control hash (MetaKey), holding the last generation (see acquire.lua)
	// Legacy is the earlier key layout's generation counter of the lease,
	// which acquire.lua takes over; kept for one release.
	Legacy string
	// Group is the handler or pm the lease is for, and Wake the partition
	// streams it covers: the lease's owner is named in their wake hashes
	// (WakeKey) while it holds the lease, so publishers wake it alone.
	// Both are empty for a lease that covers no partition (the reaper's).
	Group string
	Wake  []string
}

// wakeKeys are the pairs that end the KEYS of the scripts that take or
// give up the lease (lib/wake.lua): each partition stream, its wake hash.
func (r LeaseRef) wakeKeys() []string {
	out := make([]string, 0, 2*len(r.Wake))
	for _, s := range r.Wake {
		out = append(out, s, WakeKey(s))
	}
	return out
}

// PartitionLease returns the LeaseRef of group's lease on a stream.
func PartitionLease(stream, group string) LeaseRef {
	return LeaseRef{Key: LeaseKey(stream, group), Meta: MetaKey(LeaseKey(stream, group)),
		Legacy: legacyGenerationKey(stream, group), Group: group, Wake: []string{stream}}
}

// PMLease returns the LeaseRef of pm's lease on a correlation value whose
// partition streams (one per category the pm handles) are streams.
func PMLease(pm, correlation string, streams []string) LeaseRef {
	return LeaseRef{Key: PMLeaseKey(pm, correlation), Meta: MetaKey(PMLeaseKey(pm, correlation)),
		Legacy: legacyPMGenerationKey(pm, correlation), Group: pm, Wake: streams}
}

// Lease is a held lease, the fencing token of its owner. Like an etcd
// concurrency.Mutex revision, the generation strictly increases each time
// the lease is acquired afresh: it is at least the Redis time of the
// acquire in microseconds (acquire.lua), so it survives the counter's loss.
type Lease struct {
	Ref        LeaseRef
	Owner      string
	Generation int64
	// Named says, per stream of Ref.Wake, whether its wake hash named the
	// owner once the lease was acquired: false where the stream did not
	// exist yet (a pm's category not published to for the value), so
	// publishes to it may signal other owners only until the owner names
	// itself there (Name, or a renewal: RenewAll). Nil when not known.
	Named []bool
	// GenGroups: the lease reads its lanes through its generation's own
	// consumer group (ReadGroup, lib/groups.lua), created by the acquire;
	// else through the group named Ref.Group, the earlier layout's.
	GenGroups bool
}

// Token is "<owner>:<generation>": the value of the lease key and the
// owner's consumer name in the group. An engine's owner is its
// incarnation, "<owner_id>~<random>" (ParseToken), so its tokens are
// "<owner_id>~<incarnation>:<generation>", as docs/runtime.md writes them.
func (l Lease) Token() string { return l.Owner + ":" + strconv.FormatInt(l.Generation, 10) }

// Acquire takes ref for owner with a TTL (SET NX PX in one script with the
// next generation, max(stored + 1, Redis time in microseconds)). It returns
// ErrLeaseHeld when another token holds it.
func Acquire(ctx context.Context, c redis.UniversalClient, ref LeaseRef, owner string, ttl time.Duration) (Lease, error) {
	return AcquireWarm(ctx, c, ref, owner, ttl, 0, nil)
}

// AcquireWarm is Acquire for a lease covering lanes, which refuses with
// ErrCold when the lanes are cold for idle (see lib/cold.lua): such a
// partition is left to the reaper. An idle of 0 never refuses.
func AcquireWarm(ctx context.Context, c redis.UniversalClient, ref LeaseRef, owner string, ttl, idle time.Duration, lanes []string) (Lease, error) {
	keys := append(append([]string{ref.Key, ref.Meta, ref.Legacy}, lanes...), ref.wakeKeys()...)
	res, err := scriptAcquire.Run(ctx, c, keys, owner, ttl.Milliseconds(), idle.Milliseconds(), ref.Group, len(ref.Wake), "0").Slice()
	return acquired(ref, owner, res, err)
}

// AcquireReq is one lease for AcquireAll: its ref and the lanes it covers.
// GenGroups moves the lanes to the generation's own consumer group (see
// Lease.GenGroups): set it once no engine of a build that reads Ref.Group
// alone may read them.
type AcquireReq struct {
	Ref       LeaseRef
	Lanes     []string
	GenGroups bool
}

// AcquireAll is AcquireWarm for many leases in one pipeline (a cluster
// client sends each node its share), returning one Lease or error per
// request. A request refused for a lost script cache (NOSCRIPT) never ran;
// the scripts are loaded and those requests sent once more.
func AcquireAll(ctx context.Context, c redis.UniversalClient, reqs []AcquireReq, owner string, ttl, idle time.Duration) ([]Lease, []error) {
	leases, errs := make([]Lease, len(reqs)), make([]error, len(reqs))
	todo := make([]int, len(reqs))
	for i := range reqs {
		todo[i] = i
	}
	for try := 0; try < 2 && len(todo) > 0; try++ {
		pipe := c.Pipeline()
		cmds := make([]*redis.Cmd, len(todo))
		for j, i := range todo {
			ref := reqs[i].Ref
			keys := append(append([]string{ref.Key, ref.Meta, ref.Legacy}, reqs[i].Lanes...), ref.wakeKeys()...)
			mode := "0"
			if reqs[i].GenGroups {
				mode = "1"
			}
			cmds[j] = scriptAcquire.EvalSha(ctx, pipe, keys, owner, ttl.Milliseconds(), idle.Milliseconds(), ref.Group, len(ref.Wake), mode)
		}
		pipe.Exec(ctx)
		var again []int
		for j, i := range todo {
			res, err := cmds[j].Slice()
			if IsNoScript(err) && try == 0 {
				again = append(again, i)
				continue
			}
			leases[i], errs[i] = acquired(reqs[i].Ref, owner, res, err)
		}
		if len(again) > 0 {
			if err := LoadScripts(ctx, c); err != nil {
				for _, i := range again {
					errs[i] = fmt.Errorf("acquire lease %s: %w", reqs[i].Ref.Key, err)
				}
				return leases, errs
			}
		}
		todo = again
	}
	return leases, errs
}

// acquired reads acquire.lua's reply.
func acquired(ref LeaseRef, owner string, res []any, err error) (Lease, error) {
	if err != nil {
		return Lease{}, fmt.Errorf("acquire lease %s: %w", ref.Key, err)
	}
	if len(res) == 1 && res[0] == int64(2) {
		return Lease{}, fmt.Errorf("acquire lease %s: %w", ref.Key, ErrCold)
	}
	if len(res) < 2 || len(res) > 4 {
		return Lease{}, fmt.Errorf("acquire lease %s: unexpected reply %v", ref.Key, res)
	}
	if ok, _ := res[0].(int64); ok != 1 {
		held := &HeldError{Key: ref.Key, Token: fmt.Sprint(res[1])}
		if len(res) == 3 {
			held.GenGroups = res[2] == int64(1)
		}
		return Lease{}, held
	}
	gen, err := strconv.ParseInt(fmt.Sprint(res[1]), 10, 64)
	if err != nil {
		return Lease{}, fmt.Errorf("acquire lease %s: generation %v: %w", ref.Key, res[1], err)
	}
	l := Lease{Ref: ref, Owner: owner, Generation: gen}
	if len(res) >= 3 {
		l.Named, _ = namedFlags(res[2], len(ref.Wake))
	}
	if len(res) == 4 {
		l.GenGroups = res[3] == int64(1)
	}
	return l, nil
}

// namedFlags reads lib/wake.lua's reply for n streams: whether each wake
// hash names the owner. ok is false for a reply of another shape.
func namedFlags(v any, n int) (named []bool, ok bool) {
	s, isString := v.(string)
	if !isString || len(s) != n {
		return nil, false
	}
	named = make([]bool, n)
	for i := range n {
		switch s[i] {
		case '1':
			named[i] = true
		case '0':
		default:
			return nil, false
		}
	}
	return named, true
}

// Name names the lease's owner in the wake hashes of streams (some of
// Ref.Wake) that exist, as acquiring the lease did for those that existed
// then (name.lua), and returns, per stream, whether its hash names the
// owner now (false: no stream). It is for an owner's first read of a
// stream that had none when it took the lease, so that publishes to it
// wake this owner from then on and not only the other handlers' owners
// named there. ErrFenced, having written nothing, when the lease does not
// hold this token.
func (l Lease) Name(ctx context.Context, c redis.UniversalClient, streams []string) ([]bool, error) {
	keys := make([]string, 0, 1+2*len(streams))
	keys = append(keys, l.Ref.Key)
	for _, s := range streams {
		keys = append(keys, s, WakeKey(s))
	}
	res, err := scriptName.Run(ctx, c, keys, l.Token(), l.Ref.Group).Result()
	if err != nil {
		return nil, fmt.Errorf("name the owner of lease %s in the wake hashes of %v: %w", l.Ref.Key, streams, fenced(err, l))
	}
	named, ok := namedFlags(res, len(streams))
	if !ok {
		return nil, fmt.Errorf("name the owner of lease %s in the wake hashes of %v: unexpected reply %v", l.Ref.Key, streams, res)
	}
	return named, nil
}

// ReleaseCold deletes the lease when the lanes it covers are cold for idle
// and the partition is not paused, and reports whether it did; ErrFenced
// when the lease no longer holds this token.
func (l Lease) ReleaseCold(ctx context.Context, c redis.UniversalClient, idle time.Duration, lanes []string) (bool, error) {
	keys := append(append([]string{l.Ref.Key, MetaKey(l.Ref.Key)}, lanes...), l.Ref.wakeKeys()...)
	mode := "0"
	if l.GenGroups {
		mode = "1"
	}
	n, err := scriptReleaseCold.Run(ctx, c, keys, l.Token(), idle.Milliseconds(), l.Ref.Group, len(l.Ref.Wake), mode).Int64()
	if err != nil {
		return false, fmt.Errorf("release cold lease %s: %w", l.Ref.Key, fenced(err, l))
	}
	return n == 1, nil
}

// Renew extends the lease by ttl if it still holds exactly this token,
// else it fails with ErrLeaseLost.
func (l Lease) Renew(ctx context.Context, c redis.UniversalClient, ttl time.Duration) error {
	n, err := scriptRenew.Run(ctx, c, []string{l.Ref.Key}, l.Token(), ttl.Milliseconds()).Int64()
	if err != nil {
		return fmt.Errorf("renew lease %s: %w", l.Ref.Key, err)
	}
	if n != 1 {
		return fmt.Errorf("renew lease %s as %s: %w", l.Ref.Key, l.Token(), ErrLeaseLost)
	}
	return nil
}

// RenewAll renews every lease, with the attempt mark of each lease whose
// marked[i] is true (the owner is attempting its halted head; marked may
// be nil or shorter), and returns one error per lease: nil when renewed,
// ErrLeaseLost when the lease is gone or held by another token,
// errAttemptMark when Redis refused to extend its mark (then the lease is
// not renewed either, so the two never expire apart), else the Redis
// error; and, per renewed lease covering partitions, what
// Lease.Named says at an acquire, once renewed: the renewal names the
// owner in the wake hash of each stream that exists, so named[i][j] is
// false only where stream j of lease i has none (nil when not renewed or
// not known). A true where the owner knew false is a stream that
// appeared during the lease whose first entry it has not read:
// publishes to it may have signalled only other owners, so the owner
// should read it once. The leases go in one script call per hash slot
// (renew_many.lua; on a single Redis every lease shares one call), at most
// renewBatch leases each, all in one pipeline. A pipeline has no EVAL
// fallback: a script cache lost by the server (restart, SCRIPT FLUSH)
// shows as IsNoScript errors; LoadScripts, then renew again.
func RenewAll(ctx context.Context, c redis.UniversalClient, leases []Lease, marked []bool, ttl time.Duration) (errs []error, named [][]bool) {
	_, single := c.(*redis.Client)
	bySlot := map[int][]int{}
	var slots []int
	for i, l := range leases {
		s := 0
		if !single {
			s = slot(l.Ref.Key)
		}
		if bySlot[s] == nil {
			slots = append(slots, s)
		}
		bySlot[s] = append(bySlot[s], i)
	}
	type call struct {
		ix  []int
		cmd *redis.Cmd
	}
	var calls []call
	pipe := c.Pipeline()
	for _, s := range slots {
		ix := bySlot[s]
		for len(ix) > 0 {
			n := min(len(ix), renewBatch)
			keys := make([]string, 0, n)
			args := make([]any, 1, 4*n+1)
			args[0] = ttl.Milliseconds()
			for _, i := range ix[:n] {
				ref := leases[i].Ref
				keys = append(keys, ref.Key)
				m := 0
				if i < len(marked) && marked[i] {
					keys, m = append(keys, MetaKey(ref.Key)), 1
				}
				keys = append(keys, ref.wakeKeys()...)
				args = append(args, leases[i].Token(), ref.Group, len(ref.Wake), m)
			}
			calls = append(calls, call{ix[:n], scriptRenewMany.EvalSha(ctx, pipe, keys, args...)})
			ix = ix[n:]
		}
	}
	pipe.Exec(ctx)
	errs, named = make([]error, len(leases)), make([][]bool, len(leases))
	for _, cl := range calls {
		res, err := cl.cmd.Slice()
		for j, i := range cl.ix {
			switch {
			case IsNoScript(err):
				errs[i] = err
			case err != nil:
				errs[i] = fmt.Errorf("renew lease %s: %w", leases[i].Ref.Key, err)
			case j >= len(res):
				errs[i] = fmt.Errorf("renew lease %s: unexpected reply %v", leases[i].Ref.Key, res)
			case res[j] == int64(-1):
				errs[i] = fmt.Errorf("renew lease %s: %w", leases[i].Ref.Key, errWrongTypeLease)
			case res[j] == int64(-2):
				errs[i] = fmt.Errorf("renew lease %s: %w", leases[i].Ref.Key, errAttemptMark)
			case res[j] == int64(1):
			default:
				// Renewed, with the state of its wake hashes.
				if n, ok := namedFlags(res[j], len(leases[i].Ref.Wake)); ok {
					named[i] = n
					continue
				}
				if _, isString := res[j].(string); isString {
					errs[i] = fmt.Errorf("renew lease %s: unexpected reply %v", leases[i].Ref.Key, res[j])
					continue
				}
				errs[i] = fmt.Errorf("renew lease %s as %s: %w", leases[i].Ref.Key, leases[i].Token(), ErrLeaseLost)
			}
		}
	}
	return errs, named
}

// renewBatch bounds the leases one renew_many call covers, so a large
// instance's renewal never holds Redis for long in one script.
const renewBatch = 500

// Verify checks in Redis that the lease still holds this token: nil, or
// ErrFenced when it does not (lost, expired, or taken by another owner).
func (l Lease) Verify(ctx context.Context, c redis.UniversalClient) error {
	if err := scriptVerify.Run(ctx, c, []string{l.Ref.Key, MetaKey(l.Ref.Key)}, l.Token()).Err(); err != nil {
		return fmt.Errorf("verify lease %s: %w", l.Ref.Key, fenced(err, l))
	}
	return nil
}

// BeginAttempt is Verify for an attempt of a halted head: it also marks
// the attempt (MetaAttempt: the token, until the lease's expiry), so an
// operator's resolve refuses while it runs. ErrFenced when the lease does
// not hold this token. Renew the mark with the lease while the attempt
// runs (RenewAll, marked) and end it with EndAttempt; a mark left behind
// refuses nothing once its expiry passes or the lease moves on.
func (l Lease) BeginAttempt(ctx context.Context, c redis.UniversalClient, ttl time.Duration) error {
	keys := []string{l.Ref.Key, MetaKey(l.Ref.Key)}
	if err := scriptBeginAttempt.Run(ctx, c, keys, l.Token(), ttl.Milliseconds()).Err(); err != nil {
		return fmt.Errorf("begin an attempt under lease %s: %w", l.Ref.Key, fenced(err, l))
	}
	return nil
}

// EndAttempt deletes the attempt mark BeginAttempt set, if it still
// holds this token.
func (l Lease) EndAttempt(ctx context.Context, c redis.UniversalClient) error {
	if err := scriptEndAttempt.Run(ctx, c, []string{MetaKey(l.Ref.Key)}, l.Token()).Err(); err != nil {
		return fmt.Errorf("end the attempt under lease %s: %w", l.Ref.Key, err)
	}
	return nil
}

// Release deletes the lease if it still holds this token, so the next
// owner need not wait for the TTL. Releasing a lost lease is not an error.
func (l Lease) Release(ctx context.Context, c redis.UniversalClient) error {
	return l.ReleaseHanding(ctx, c, nil, nil)
}

// ReleaseHanding is Release for a graceful release of a lease covering
// lanes, that hands on entries pending under this owner that are not in
// flight (a halted head between retries, entries read ahead and never
// run): in the same script, fenced, it takes back the delivery this
// owner's read counted on each, so handovers never add up to
// MaxDeliveries, and a lease reading through its generation's group
// parks every lane (release.lua, lib/groups.lua).
func (l Lease) ReleaseHanding(ctx context.Context, c redis.UniversalClient, lanes []string, entries []Entry) error {
	keys := []string{l.Ref.Key}
	var ids []any
	for _, en := range entries {
		keys = append(keys, en.Stream)
		ids = append(ids, en.ID)
	}
	park := 0
	if l.GenGroups {
		keys, park = append(keys, lanes...), len(lanes)
	}
	keys = append(keys, l.Ref.wakeKeys()...) // the owner's field goes with the lease
	args := append([]any{l.Token(), l.ReadGroup(), l.Ref.Group, park}, ids...)
	if err := scriptRelease.Run(ctx, c, keys, args...).Err(); err != nil {
		return fmt.Errorf("release lease %s: %w", l.Ref.Key, err)
	}
	return nil
}

// ParseToken reads a lease token, "<incarnation>:<generation>" where the
// incarnation is "<owner id>~<random>" (a token of an older build has no
// "~<random>"), and returns its owner id and generation.
func ParseToken(token string) (ownerID string, generation int64, err error) {
	inc, gen, err := ParseIncarnation(token)
	if i := strings.LastIndexByte(inc, '~'); i >= 0 {
		inc = inc[:i]
	}
	return inc, gen, err
}

// ParseIncarnation splits a lease token at its last colon into the
// incarnation that holds it and the generation.
func ParseIncarnation(token string) (incarnation string, generation int64, err error) {
	i := strings.LastIndexByte(token, ':')
	if i < 0 {
		return "", 0, fmt.Errorf("lease token %q has no generation", token)
	}
	gen, err := strconv.ParseInt(token[i+1:], 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("lease token %q: %w", token, err)
	}
	return token[:i], gen, nil
}

// HeldError is the error of an acquire that found the lease held; it
// matches ErrLeaseHeld and names the holder's token.
type HeldError struct {
	Key, Token string
	// GenGroups: the holder, when it is the caller's incarnation (a
	// resent acquire finds its first run's lease), reads through its
	// generation's group (Lease.GenGroups).
	GenGroups bool
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("acquire lease %s (held by %s): %v", e.Key, e.Token, ErrLeaseHeld)
}

func (e *HeldError) Is(target error) bool { return target == ErrLeaseHeld }

// errAttemptMark is a lease left unrenewed because Redis refused to
// extend its attempt mark (a write at maxmemory): the next heartbeat tries
// again.
var errAttemptMark = errors.New("its attempt mark could not be extended (Redis refused the write; at maxmemory?), so it was not renewed; the next heartbeat tries again")

// errWrongTypeLease is a lease key holding something other than a string:
// an error reply (Permanent) of that lease alone.
var errWrongTypeLease error = wrongType("WRONGTYPE the lease key holds another type than the string seqby writes")

// wrongType is an error reply built here, as the server's would read.
type wrongType string

func (w wrongType) Error() string { return string(w) }
func (wrongType) RedisError()     {}
