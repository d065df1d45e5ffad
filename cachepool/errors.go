package cachepool

import (
	"errors"
	"fmt"
)

// ErrPanic is matched, through errors.Is, by every error that reports a
// recovered panic in user code: a build function (returned by [Item.Get]), a
// cleanup, a Size function or a before-build function (passed to the cache's
// error handler, see [Cache.SetErrorHandler]). Use errors.As with
// [*PanicError] for the panic value and the stack.
var ErrPanic = errors.New("cachepool: panic in user code")

// ErrCycle is returned, wrapped with the item's name, by [Item.Get] when it is
// called from within the build of the same item in the same cache, directly or
// through the builds of other items. Waiting would never end.
var ErrCycle = errors.New("cachepool: item needed by its own build")

// ErrBuildExited is returned, wrapped with the item's name, to callers of
// [Item.Get] that were waiting for a build whose goroutine called
// runtime.Goexit (for example through testing.T.FailNow) instead of returning.
// The build is not memoised.
var ErrBuildExited = errors.New("cachepool: build exited without returning")

// PanicError is a panic recovered from user code: a build, cleanup, Size or
// before-build function. It matches [ErrPanic] with errors.Is and, when the
// panic value is an error, that error too.
type PanicError struct {
	// Op names the function that panicked: "build", "cleanup", "size" or
	// "before build" (see [Cache.SetBeforeBuild]).
	Op string
	// Value is the value passed to panic.
	Value any
	// Stack is the stack of the panicking goroutine, as runtime/debug.Stack
	// formats it, captured where the panic was recovered.
	Stack []byte
}

// Error returns "panic: " followed by the panic value. The stack is not part
// of the message; it is in the Stack field.
func (e *PanicError) Error() string {
	return fmt.Sprintf("panic: %v", e.Value)
}

// Unwrap returns [ErrPanic] and, when the panic value is an error, that error,
// so that errors.Is sees both.
func (e *PanicError) Unwrap() []error {
	if err, ok := e.Value.(error); ok {
		return []error{ErrPanic, err}
	}
	return []error{ErrPanic}
}
