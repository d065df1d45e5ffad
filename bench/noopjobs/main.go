// Command noopjobs queues n no-op jobs (an int to itself) on a pool, runs
// them, and prints the jobs run per second of Run: the figure that
// bench/sidebyside.sh compares between two builds of poolrun, alternated.
//
//	go run ./bench/noopjobs -n 100000 -w 2
//	go run ./bench/noopjobs -n 100000 -w 2 -inprocess
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/poolrun/poolrun/engine"
)

var noop = engine.Register("noopjobs.noop", func(ctx context.Context, x int) (int, error) { return x, nil })

// inProcess is engine.InProcess where the engine has it (inprocess.go),
// so that this file builds against older trees too.
var inProcess func(n int) engine.Option

func main() {
	engine.Init()
	n := flag.Int("n", 100000, "the jobs to run")
	w := flag.Int("w", 2, "the workers")
	inproc := flag.Bool("inprocess", false, "run the workers in this process (engine.InProcess), not as processes")
	flag.Parse()
	opt := engine.Workers(*w)
	if *inproc {
		if inProcess == nil {
			fmt.Fprintln(os.Stderr, "noopjobs: this build's engine has no InProcess")
			os.Exit(2)
		}
		opt = inProcess(*w)
	}
	p := engine.New(opt)
	for i := range *n {
		engine.Queue(p, noop, i)
	}
	start := time.Now()
	if err := p.Run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "noopjobs:", err)
		os.Exit(1)
	}
	fmt.Printf("%.0f\n", float64(*n)/time.Since(start).Seconds())
}
