package engine_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/poolrun/poolrun/engine"
)

// wait waits for d or for its context to end, whichever comes first.
var wait = engine.Register("example.wait", func(ctx context.Context, d time.Duration) (string, error) {
	select {
	case <-time.After(d):
		return "done", nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
})

// A job past its time is Failed with an error that wraps
// context.DeadlineExceeded; the others run as usual. With worker
// processes, Retries would also run again a job whose worker died.
func ExampleTimeout() {
	p := engine.New(engine.Workers(0), engine.Timeout(time.Minute), engine.Retries(2))
	slow := engine.Queue(p, wait, time.Hour, engine.JobTimeout(50*time.Millisecond))
	quick := engine.Queue(p, wait, time.Millisecond)
	err := p.Run(context.Background())
	fmt.Println("pool timed out:", errors.Is(err, context.DeadlineExceeded))
	_, serr := slow.Result()
	fmt.Println("slow:", slow.Status(), "-", serr)
	v, _ := quick.Result()
	fmt.Println("quick:", quick.Status(), "-", v, "after", len(quick.Attempts()), "attempt(s)")
	// Output:
	// pool timed out: true
	// slow: failed - timed out after 50ms
	// quick: succeeded - done after 1 attempt(s)
}

// Cancelling a running job cancels its context: it ends Cancelled when it
// returns.
func ExampleJob_Cancel() {
	p := engine.New(engine.Workers(0))
	long := engine.Queue(p, wait, time.Hour)
	p.Go(func(ctx context.Context) error {
		for long.Status() != engine.Running {
			time.Sleep(time.Millisecond)
		}
		return long.Cancel("not needed any more")
	})
	if err := p.Run(context.Background()); err != nil {
		fmt.Println(err)
	}
	_, err := long.Result()
	fmt.Println(long.Status(), "-", err)
	// Output:
	// cancelled - cancelled: not needed any more
}
