package shm

// A Snapshot is a consistent copy of a window's set of keys.
type Snapshot struct {
	// Gen is the generation the copy was taken at (even).
	Gen uint64
	// Keys are the keys, sorted ascending, without duplicates. Empty when
	// Overflow is set.
	Keys []uint64
	// Overflow is set when the published set did not fit the window: every
	// key must then be taken as present.
	Overflow bool
}

// Contains reports whether key is in the snapshot's set; it is true for
// every key when the snapshot is overflowed. It is a binary search over Keys.
func (s Snapshot) Contains(key uint64) bool {
	if s.Overflow {
		return true
	}
	keys := s.Keys
	n := len(keys)
	if n == 0 {
		return false
	}
	// Halving: the steps depend on n alone. The comparison compiles to a
	// branch (the compiler keeps an if that updates a loop's variable as
	// one), which a reader that looks up the same keys from check to
	// check has predicted.
	base := 0
	for n > 1 {
		half := n >> 1
		if keys[base+half] <= key {
			base += half
		}
		n -= half
	}
	return keys[base] == key
}
