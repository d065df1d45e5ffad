package cluster

import "time"

// SetLateWindows makes the agents of this process put the pool's sets in
// their workers' windows d late, after the jobs that follow them.
func SetLateWindows(d time.Duration) { lateWindows = d }

// SetHostSilence makes the pool of l give up a host that it has not
// heard from for d (its agents' leases last half of it); call it before
// the pool runs.
func SetHostSilence(l *Listener, d time.Duration) { l.silence = d }
