package shm

// Hooks for the external tests of this package.

// CreateWithTempFile is Create using the temporary-file fallback instead of
// an anonymous memory file.
func CreateWithTempFile(capacity int) (*Window, error) {
	saved := createFileHook
	createFileHook = createTempFile
	defer func() { createFileHook = saved }()
	return Create(capacity)
}

// BreakSeq leaves the window's sequence odd, as a writer that died in the
// middle of a publish would.
func BreakSeq(w *Window) { w.h.seq.Store(w.h.seq.Load() | 1) }

// Mapping returns the window's mapped bytes.
func Mapping(w *Window) []byte { return w.mapping }

const (
	HeaderSize    = headerSize
	MagicNumber   = magicNumber
	LayoutVersion = layoutVersion
)

// Wake wakes the waiters of the window's generation without publishing, as
// a spurious wake-up would.
func Wake(w *Window) { wakeAll(w.h.genWord) }

// Waiting returns the number of goroutines of this process in WaitGen on w.
func Waiting(w *Window) int64 { return w.waiting.Load() }
