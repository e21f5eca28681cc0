package runtime

import "strings"

// Capabilities is the set of features a broker advertises.
type Capabilities uint32

// The capabilities a broker can advertise.
const (
	// StreamPartitioning: the broker keeps keyed handlers sequential per
	// key (one stream and one owner per key). Required by every keyed
	// handler (Registration.Sequential with a Key).
	StreamPartitioning Capabilities = 1 << iota
	// ConsumerGroups: handlers share work through consumer groups, and a
	// message survives a crash of the instance handling it.
	ConsumerGroups
)

// Has reports whether every capability in want is in c.
func (c Capabilities) Has(want Capabilities) bool { return c&want == want }

// String lists the capabilities, e.g. "StreamPartitioning|ConsumerGroups".
func (c Capabilities) String() string {
	var s []string
	if c.Has(StreamPartitioning) {
		s = append(s, "StreamPartitioning")
	}
	if c.Has(ConsumerGroups) {
		s = append(s, "ConsumerGroups")
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, "|")
}

// Broker runs registered handlers. Register checks every Registration
// against the broker's Capabilities and against everything registered
// before, and fails at registration, never at run time.
type Broker interface {
	// Name labels the broker in errors ("redis", "inline").
	Name() string
	// Capabilities is what the broker advertises.
	Capabilities() Capabilities
	// Register adds handlers; see Registry.Add for the checks.
	Register(regs ...Registration) error
}
