package engine_test

import (
	"context"
	"fmt"
	"time"

	"github.com/poolrun/poolrun/engine"
)

// counter is a window as a transport that carries the pool's sets to
// another host would make it: here it hands each set straight to the
// worker process, with the next generation.
type counter struct {
	w         *engine.WorkerProcess
	gen, pubs uint64
}

// Only the pool's scheduler publishes, one publish at a time.
func (c *counter) Publish(keys []uint64) bool {
	c.gen += 2
	c.pubs++
	over, _ := c.w.Publish(keys, c.gen)
	return over
}
func (c *counter) Gen() uint64       { return c.gen }
func (c *counter) Publishes() uint64 { return c.pubs }
func (c *counter) Close()            {}

// A worker process started apart from the pool, as a host agent starts
// the workers of its host: the agent relays the pool's frames to it and
// its replies back (here the pool is in the same process, and the streams
// go to it directly), and publishes the pool's sets in its window.
func ExampleStartWorkerProcess() {
	var wp *engine.WorkerProcess
	p := engine.New(engine.RemoteOnly(time.Minute), engine.Joiner(func(ctx context.Context, p *engine.Pool) {
		var err error
		wp, err = engine.StartWorkerProcess(p.WindowCapacity(), nil, nil)
		if err != nil {
			fmt.Println(err)
			return
		}
		p.Admit(engine.RemoteWorker{Jobs: wp.Jobs(), Control: wp.Control(), Replies: wp.Replies(), Window: &counter{w: wp}})
	}))
	var jobs []*engine.Job[int]
	for i := range 3 {
		jobs = append(jobs, engine.Queue(p, lookup, i+2))
	}
	if err := p.Run(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	var vs []int
	for _, j := range jobs {
		v, _ := j.Result()
		vs = append(vs, v)
	}
	fmt.Println(vs)
	fmt.Println("worker process:", wp.Wait())
	// Output:
	// [4 9 16]
	// worker process: <nil>
}
