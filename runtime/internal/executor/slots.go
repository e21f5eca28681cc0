package executor

import "context"

// Slots bound how many handler attempts run at once in an engine
// (Options.Concurrency). A leased partition's gate takes a slot for each
// attempt (Acquire, Release), after its lease checks; Slots itself is the
// Gate of a handler without a lease: a slot and a live context.
type Slots struct{ c chan struct{} }

// NewSlots returns n slots. Below 1 none can be taken: the InlineBroker's
// executor, which runs no gate, has none.
func NewSlots(n int) *Slots { return &Slots{c: make(chan struct{}, max(n, 0))} }

// Acquire waits for a slot; false, holding nothing, when ctx ended first.
// A ctx that ended as the slot came (a select picks either) is refused
// too: an attempt never starts with its context already done.
func (s *Slots) Acquire(ctx context.Context) bool {
	select {
	case s.c <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	if ctx.Err() != nil {
		s.Release()
		return false
	}
	return true
}

// Release frees a slot Acquire took.
func (s *Slots) Release() { <-s.c }

// Enter takes a slot for an attempt of a handler without a lease
// (Gate): Admitted, or Refused once ctx ended.
func (s *Slots) Enter(ctx context.Context) Admission {
	if !s.Acquire(ctx) {
		return Refused
	}
	return Admitted
}

// Leave frees the attempt's slot (Gate).
func (s *Slots) Leave(bool) { s.Release() }
