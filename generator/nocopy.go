package generator

import "go/types"

// Messages that must not be copied. A message type holding a lock (a
// sync.Mutex, directly, in an array or through embedding; the
// DoNotCopy of protobuf-generated messages is a [0]sync.Mutex) is copied
// by every value receiver, type assertion to the value type and call with
// it, which go vet's copylocks check reports. seqgen writes such a
// message's methods on *M and moves it as *M through Decode, PartitionKey,
// Correlate and Invoke; its handle methods must take *M.

// lockerType is sync.Locker.
var lockerType = func() *types.Interface {
	nullary := types.NewSignatureType(nil, nil, nil, nil, nil, false)
	return types.NewInterfaceType([]*types.Func{
		types.NewFunc(0, nil, "Lock", nullary),
		types.NewFunc(0, nil, "Unlock", nullary),
	}, nil).Complete()
}()

// noCopy returns the lock type that makes values of t unsafe to copy
// ("sync.Mutex"), or "" when t may be copied. It follows go vet's copylocks
// check: a struct whose pointer is a sync.Locker and whose value is not,
// found through struct fields and array elements.
func noCopy(t types.Type) string {
	return lockIn(t, map[types.Type]bool{})
}

func lockIn(t types.Type, seen map[types.Type]bool) string {
	if t == nil || seen[t] {
		return ""
	}
	seen[t] = true
	for {
		a, ok := t.Underlying().(*types.Array)
		if !ok {
			break
		}
		t = a.Elem()
	}
	st, ok := t.Underlying().(*types.Struct)
	if !ok {
		return ""
	}
	// The lock named is the innermost one, but a type of package sync or
	// sync/atomic is named as itself: a type that embeds a sync.Mutex is a
	// Locker by promotion, but the message says sync.Mutex; an atomic.Int64
	// holds an unexported noCopy, but the message says atomic.Int64.
	isLock := types.Implements(types.NewPointer(t), lockerType) && !types.Implements(t, lockerType)
	inner := ""
	for i := range st.NumFields() {
		if inner = lockIn(st.Field(i).Type(), seen); inner != "" {
			break
		}
	}
	if n, ok := types.Unalias(t).(*types.Named); ok && n.Obj().Pkg() != nil && (n.Obj().Pkg().Path() == "sync" || n.Obj().Pkg().Path() == "sync/atomic") {
		if isLock || inner != "" || n.Obj().Name() == "noCopy" {
			return typeString(t)
		}
	}
	if inner != "" {
		return inner
	}
	if isLock {
		return typeString(t)
	}
	return ""
}
