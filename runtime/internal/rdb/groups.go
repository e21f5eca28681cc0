package rdb

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// groupGen reports whether name is handler's consumer group on a lane,
// and which: handler@<n> is lease generation n's (0: a parked lane; see
// lib/groups.lua), handler itself (gen -1) the earlier layout's shared
// group.
func groupGen(name, handler string) (gen int64, ok bool) {
	if name == handler {
		return -1, true
	}
	rest, found := strings.CutPrefix(name, handler+"@")
	if !found || rest == "" || strings.TrimLeft(rest, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(rest, 10, 64)
	return n, err == nil
}

// GroupOf picks handler's group among a lane's groups (XINFO GROUPS), as
// lib/groups.lua's group_of does: the highest generation's handler@<n>,
// else the group named handler. ok is false when the lane has neither.
func GroupOf(gs []redis.XInfoGroup, handler string) (g redis.XInfoGroup, ok bool) {
	best := int64(-2)
	for _, x := range gs {
		if n, mine := groupGen(x.Name, handler); mine && n > best {
			g, ok, best = x, true, n
		}
	}
	return g, ok
}

// LaneGroup names handler's group on stream (GroupOf), or handler when
// the stream or the group does not exist, as the earlier layout named
// every lane's. handler may also be given as one of its generations'
// groups (handler@<n>).
func LaneGroup(ctx context.Context, c redis.UniversalClient, stream, handler string) (string, error) {
	if i := strings.LastIndexByte(handler, '@'); i >= 0 {
		if _, ok := groupGen(handler, handler[:i]); ok {
			handler = handler[:i]
		}
	}
	gs, err := c.XInfoGroups(ctx, stream).Result()
	if noSuchKey(err) {
		return handler, nil
	}
	if err != nil {
		return "", fmt.Errorf("XINFO GROUPS %s: %w", stream, err)
	}
	if g, ok := GroupOf(gs, handler); ok {
		return g.Name, nil
	}
	return handler, nil
}

// ReadGroup is the consumer group the lease's owner reads and acks its
// lanes through: Ref.Group@Generation (GenGroups), else Ref.Group.
func (l Lease) ReadGroup() string {
	if l.GenGroups {
		return GenerationGroup(l.Ref.Group, l.Generation)
	}
	return l.Ref.Group
}

// GenerationGroup is the name of the consumer group through which the
// owner of generation gen of group's lease reads: "<group>@<gen>"; gen 0
// names the group that parks a lane no lease reads (lib/groups.lua).
func GenerationGroup(group string, gen int64) string {
	return group + "@" + strconv.FormatInt(gen, 10)
}
