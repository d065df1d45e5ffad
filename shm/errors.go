package shm

import "errors"

var (
	// ErrOverflow is returned (wrapped) by [Window.Publish] when the set has
	// more keys than the window has slots. The set is still published, as
	// "overflowed": readers then keep every item until a set that fits is
	// published, so an overflow can cost memory but never a wrong eviction.
	ErrOverflow = errors.New("shm: more keys than the window's capacity")

	// ErrCorrupt is returned (wrapped, with the offending field named) by
	// [Open] when the file is not a window: too short for a header, a wrong
	// magic number, or a capacity or size that cannot be. [Window.Snapshot]
	// returns it when a consistent read shows an impossible count.
	ErrCorrupt = errors.New("shm: not a valid window")

	// ErrVersion is returned (wrapped, with both versions named) by [Open]
	// when the file is a window (its magic number is right) of a layout
	// version this build does not read: most likely it was made by another
	// build of poolrun. It does not match [ErrCorrupt].
	ErrVersion = errors.New("shm: window of an unknown layout version")

	// ErrWriterStalled is returned by [Window.Snapshot] when the sequence
	// stayed odd (a write under way) for longer than the stall timeout: the
	// writer most likely died in the middle of a publish.
	ErrWriterStalled = errors.New("shm: writer stalled in the middle of a publish")

	// ErrZeroKey is returned by [Window.Publish] when a key is 0, the value
	// that marks an empty slot.
	ErrZeroKey = errors.New("shm: key 0 is reserved")

	// ErrGeneration is returned (wrapped) by [Window.PublishAt] for a
	// generation that is odd, 0, or not above the window's.
	ErrGeneration = errors.New("shm: not a generation to publish at")

	// ErrReadOnly is returned by [Window.Publish] on a window mapped by [Open].
	ErrReadOnly = errors.New("shm: window is read-only")

	// ErrDeadline is returned by [Window.WaitGen] when its deadline passed
	// before the window's generation reached the one it waited for.
	ErrDeadline = errors.New("shm: deadline passed before the generation was reached")
	// ErrNudged is returned by [Window.WaitGen] when [Window.Nudge] woke
	// it before the generation was reached.
	ErrNudged = errors.New("shm: nudged before the generation was reached")

	// ErrClosed is returned by the methods of a window after [Window.Close].
	ErrClosed = errors.New("shm: window is closed")
)
