package engine

import "fmt"

// An EvictPolicy decides when a worker frees the cache items it built. All
// policies run on the same path (the window check before every job, the
// clear at the end of the pool); they differ only in what that path evicts.
// The zero value is [EvictStale].
type EvictPolicy uint8

const (
	// EvictStale, the default, evicts before every job the items that the
	// worker's window (of at least the job's generation) no longer lists.
	// Each worker has a window of its own, which lists the items needed by
	// the jobs sent to that worker and not finished, and by the jobs not
	// sent to any worker yet: an item stays on a worker exactly as long as
	// a job it will run, or a job nobody runs yet, needs it. Jobs running
	// on other workers do not hold it here.
	EvictStale EvictPolicy = iota
	// EvictNever keeps every item a worker built until the end of the pool,
	// as a sync.Once or a package-level map would: fewest builds, most
	// memory. The window is still read, and ignored.
	EvictNever
	// EvictEachJob clears a worker's cache after every job, whatever the
	// job's outcome: least memory, and an item is built again by every job
	// that needs it.
	EvictEachJob
	// EvictPoolWide is the rule of BSB and of poolrun before EvictStale:
	// every worker reads one window that lists the items any unfinished
	// job in the pool needs, so an item stays on every worker that built it
	// while a job on any worker still needs it. Kept for comparison.
	EvictPoolWide

	numPolicies = iota
)

// followsWindow reports whether a worker evicts what its window does not
// list.
func (e EvictPolicy) followsWindow() bool { return e == EvictStale || e == EvictPoolWide }

var policyNames = [...]string{"stale", "never", "each-job", "pool-wide"}

// String returns the policy's short name: "stale", "never", "each-job" or
// "pool-wide".
func (e EvictPolicy) String() string {
	if e < numPolicies {
		return policyNames[e]
	}
	return fmt.Sprintf("policy(%d)", uint8(e))
}
