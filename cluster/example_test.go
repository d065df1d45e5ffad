package cluster_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/poolrun/poolrun/cluster"
	"github.com/poolrun/poolrun/cluster/hub"
	"github.com/poolrun/poolrun/engine"
)

var double = engine.Register("example.double", func(ctx context.Context, x int) (int, error) {
	return 2 * x, nil
})

// A pool with no worker of its own, and a host agent of one worker that
// joins through the join file. Here the agent is a goroutine of the same
// program, over loopback; on another host it is the same program, whose
// main calls engine.Init and then cluster.Agent (poolrun: poolrun worker
// --join-file FILE -j N).
func ExampleListen() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	joinFile := filepath.Join(dir, "run.join")
	srv, err := hub.Start("127.0.0.1:0") // or cluster.StartHub: a program of its own
	if err != nil {
		fmt.Println(err)
		return
	}
	l, err := cluster.Listen(srv, joinFile)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()
	p := engine.New(engine.RemoteOnly(time.Minute), l.Option())
	var jobs []*engine.Job[int]
	for i := range 3 {
		jobs = append(jobs, engine.Queue(p, double, i+1))
	}
	worker := make(chan error, 1)
	go func() { worker <- cluster.Agent(context.Background(), joinFile, 1, nil) }()
	if err := p.Run(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	var got []int
	for _, j := range jobs {
		v, _ := j.Result()
		got = append(got, v)
	}
	fmt.Println(got)
	fmt.Println("agent:", <-worker)
	// Output:
	// [2 4 6]
	// agent: <nil>
}
