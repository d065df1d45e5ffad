package engine

import "fmt"

// An EvictPolicy decides when a worker frees the cache items it built. All
// policies run on the same path (the window check before every job, the
// clear at the end of the pool); they differ only in what that path evicts.
// The zero value is [EvictStale].
type EvictPolicy uint8

const (
	// EvictStale, the default, evicts before every job the items that the
	// window (of at least the job's generation) no longer lists: an item
	// stays exactly as long as some unfinished job in the pool needs it.
	EvictStale EvictPolicy = iota
	// EvictNever keeps every item a worker built until the end of the pool,
	// as a sync.Once or a package-level map would: fewest builds, most
	// memory. The window is still read, and ignored.
	EvictNever
	// EvictEachJob clears a worker's cache after every job, whatever the
	// job's outcome: least memory, and an item is built again by every job
	// that needs it.
	EvictEachJob

	numPolicies = iota
)

var policyNames = [...]string{"stale", "never", "each-job"}

// String returns the policy's short name: "stale", "never" or "each-job".
func (e EvictPolicy) String() string {
	if e < numPolicies {
		return policyNames[e]
	}
	return fmt.Sprintf("policy(%d)", uint8(e))
}
