package engine

import "context"

// Map queues one job of fn for each of args, all with the options opts,
// and returns the jobs in the order of args: the most common shape, one
// function over many arguments. It is Queue in a loop; a job's options
// apply to every job (Needs, After, Label, ...).
func Map[A, R any](p *Pool, fn *Func[A, R], args []A, opts ...JobOption) []*Job[R] {
	jobs := make([]*Job[R], len(args))
	for i, a := range args {
		jobs[i] = Queue(p, fn, a, opts...)
	}
	return jobs
}

// RunMap runs fn over args on a pool made with opts, and returns the
// results in the order of args, as errgroup does for goroutines: with the
// first error, that of the first argument whose job did not succeed (a
// *JobError), or Run's own if the run failed otherwise (ctx ended, say).
// The results of the jobs that succeeded are there whatever the error;
// the others are R's zero value. With [FailFast] among opts the pool
// starts no job after the first failure.
func RunMap[A, R any](ctx context.Context, fn *Func[A, R], args []A, opts ...Option) ([]R, error) {
	p := New(opts...)
	jobs := Map(p, fn, args)
	runErr := p.Run(ctx)
	results := make([]R, len(jobs))
	var first error
	for i, j := range jobs {
		v, err := j.Result()
		if err != nil {
			if first == nil {
				first = &JobError{JobID: j.ID(), Func: j.j.fn.name, Err: err}
			}
			continue
		}
		results[i] = v
	}
	if first == nil {
		first = runErr
	}
	return results, first
}
