package cluster

import "time"

// SetLateWindows makes the agents of this process put the pool's sets in
// their workers' windows d late, after the jobs that follow them.
func SetLateWindows(d time.Duration) { lateWindows = d }
