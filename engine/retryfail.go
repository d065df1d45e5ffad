package engine

import (
	"fmt"
	"time"
)

// RetryFailures makes the job's retries ([Retries], [JobRetries]) apply to
// its failed runs too, not only to the deaths of its workers.
//
// A run that returns an error, panics or passes its timeout (see
// [Timeout]) is recorded as an [Attempt] that ended Failed. The job is
// Queued again, to run after delay (0: at once) on whichever worker takes
// it first; its age places it among the others. Each such run spends one
// retry, as a worker's death does. The last run's failure is the job's.
//
// A run is never retried once the job was cancelled ([Job.Cancel]), the
// pool stops (its context ended, a fatal error) or fail-fast ended it
// ([FailFast]: the first failure that is not retried is the pool's, and
// a job waiting for its delay is then cancelled like any Queued job).
// Negative delay panics.
func RetryFailures(delay time.Duration) JobOption {
	if delay < 0 {
		panic(fmt.Sprintf("engine: RetryFailures(%v): negative", delay))
	}
	return func(o *jobOptions) { o.fails, o.delay = true, delay }
}

// retryFailed queues j, whose run on pl's worker (from start to end)
// failed with err, to run again if RetryFailures lets it and a retry is
// left, and reports whether it did. A job with a delay is Queued at once
// (its status says it will run), and enters the ready queue when the
// delay is over.
func (s *scheduler) retryFailed(pl *place, j *job, start, end time.Time, err error) bool {
	p := s.p
	if !j.retryFails || j.retries <= 0 || j.cancelled || s.fatal != nil || p.state != PoolRunning || p.failed {
		return false
	}
	j.attempts = append(j.attempts, Attempt{Worker: pl.index, PID: pl.pid, Start: start, End: end, Status: Failed, Err: err})
	j.retries--
	j.err = err // for the event
	p.setStatus(j, Queued)
	j.err, j.worker = nil, 0
	if j.retryDelay <= 0 {
		p.queue.push(j)
		return true
	}
	tries := j.tries
	time.AfterFunc(j.retryDelay, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		// Not if it was cancelled meanwhile, or the pool has stopped.
		if j.Status() == Queued && j.tries == tries && p.state == PoolRunning {
			p.queue.push(j)
			p.kick()
		}
	})
	return true
}
