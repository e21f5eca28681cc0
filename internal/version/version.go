// Package version is the line seqgen -version and seqbyctl -version print.
package version

import (
	"runtime/debug"

	"github.com/seqby/seqby"
)

// modulePath is the tools' module, looked up in the build info.
const modulePath = "github.com/seqby/seqby"

// Line is what a tool's -version prints: its name and the release in the
// source (seqby.Version), which is right however the tool was built (go
// tool from the module proxy, a replace to a local checkout, go build in
// the repository). The build's own module version follows in parentheses
// when it adds something: a pseudo-version or a "+dirty" build of a
// checkout tells which commit, beyond the release it is based on. Pass
// debug.ReadBuildInfo's result (nil when it has none).
func Line(tool string, bi *debug.BuildInfo) string {
	line := tool + " " + seqby.Version
	if v := buildVersion(bi); v != "" && v != seqby.Version {
		line += " (module " + v + ")"
	}
	return line
}

// buildVersion is the version the go command recorded for the tools'
// module, or "" when it is not known: no build info, "(devel)" (go run, go
// test, a build without VCS stamping), or a replace by a local directory,
// whose version is whatever the require line made up (v0.0.0) rather than
// the code's. The module is the main one when the tool is built in its own
// module, and a dependency when the main module is the user's.
func buildVersion(bi *debug.BuildInfo) string {
	if bi == nil {
		return ""
	}
	mod := &bi.Main
	for _, d := range bi.Deps {
		if mod.Path != modulePath && d.Path == modulePath {
			mod = d
		}
	}
	if mod.Path != modulePath {
		return ""
	}
	v := mod.Version
	if mod.Replace != nil {
		v = mod.Replace.Version // "" or "(devel)" for a directory
	}
	if v == "(devel)" {
		return ""
	}
	return v
}
