package contract

import "time"

// Halt is runtime.Halt's copy, with the same fields in the same order:
// runtime converts it ((*runtime.Halt)(h)). It describes an entry that
// cannot be processed; runtime.Halt documents each field.
type Halt struct {
	Handler     string
	Category    string
	Key         string
	Stream      string
	EntryID     string
	MessageType string
	MessageID   string
	Reason      string
	Permanent   bool
	Err         error
	Owner       string
	Generation  int64
	At          time.Time
	Alerts      int
}
