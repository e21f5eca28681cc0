package runtime

import (
	"sort"

	"github.com/seqby/seqby/runtime/internal/membership"
)

// The engine's record among the other instances (its OwnerID key, its
// announcements, health strikes, faults and deploy records) is a
// membership.Instance; this file holds what runtime exports of it and
// what it passes in.

// deployBuilds groups cs by handler, in name order, into the builds Run
// records in the deploy records: each handler's kind, from its
// consumers' modes, and its routes.
func deployBuilds(cs []consumer) []membership.Build {
	byName := map[string][]consumer{}
	var names []string
	for _, c := range cs {
		if byName[c.reg.Name] == nil {
			names = append(names, c.reg.Name)
		}
		byName[c.reg.Name] = append(byName[c.reg.Name], c)
	}
	sort.Strings(names)
	builds := make([]membership.Build, 0, len(names))
	for _, name := range names {
		reg := byName[name][0].reg
		b := membership.Build{Name: name, Kind: deployKind(byName[name])}
		for _, rt := range reg.Routes {
			b.Routes = append(b.Routes, membership.Route{Category: rt.Category, Type: rt.Type})
		}
		builds = append(builds, b)
	}
	return builds
}

// deployKind is the kind a handler's consumers make it.
func deployKind(cs []consumer) string {
	kind := membership.KindUnkeyed
	for _, c := range cs {
		switch c.mode {
		case modePM:
			return membership.KindSequential
		case modeLeased:
			kind = membership.KindKeyed
		}
	}
	return kind
}

// leaseHandlers is the handler of each of leased, as LeaveMembers takes
// them.
func leaseHandlers(leased []consumer) []string {
	out := make([]string, len(leased))
	for i, c := range leased {
		out[i] = c.reg.Name
	}
	return out
}
