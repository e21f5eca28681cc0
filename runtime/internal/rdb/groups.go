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

// MetaGenGroups is the field of a handler's control hash (ControlKey)
// that says its lanes may read through generation groups: set, to the
// engine's clock in ms when first written, by the first engine that
// moves them (MarkGenGroups), before any lane moves, and never removed
// (one field per handler). While it exists an engine of this build
// records its deploy records under GenGroupsLayout from its start on, so
// an engine of the build before, which would read a moved lane from the
// registered start again, refuses to start beside it.
const MetaGenGroups = "gen_groups"

// MarkGenGroups sets handler's MetaGenGroups unless set; run twice, the
// second run changes nothing.
func MarkGenGroups(ctx context.Context, c redis.UniversalClient, handler string) error {
	if err := c.HSetNX(ctx, ControlKey(handler), MetaGenGroups, strconv.FormatInt(time.Now().UnixMilli(), 10)).Err(); err != nil {
		return fmt.Errorf("mark %s's lanes as moving to generation groups (%s): %w", handler, ControlKey(handler), err)
	}
	return nil
}

// GenGroupsMarked reports whether handler's MetaGenGroups is set.
func GenGroupsMarked(ctx context.Context, c redis.UniversalClient, handler string) (bool, error) {
	err := c.HGet(ctx, ControlKey(handler), MetaGenGroups).Err()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read whether %s's lanes moved to generation groups (%s): %w", handler, ControlKey(handler), err)
	}
	return true, nil
}
