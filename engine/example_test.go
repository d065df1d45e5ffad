package engine_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/engine"
)

// table is an expensive item: built once per worker that needs it, freed
// when no unfinished job needs it any more.
var table = cachepool.Define("example.table", func(ctx context.Context) ([]int, error) {
	t := make([]int, 100)
	for i := range t {
		t[i] = i * i
	}
	return t, nil
})

var lookup = engine.Register("example.lookup", func(ctx context.Context, i int) (int, error) {
	t, err := table.Get(ctx)
	if err != nil {
		return 0, err
	}
	return t[i], nil
}, engine.Uses(table))

var sum = engine.Register("example.sum", func(ctx context.Context, xs []int) (int, error) {
	s := 0
	for _, x := range xs {
		s += x
	}
	return s, nil
})

func Example() {
	// In a real program engine.Init() is the first call in main; this
	// example runs its jobs serially, in this process.
	p := engine.New(engine.Workers(0))
	var parts []*engine.Job[int]
	for i := range 3 {
		parts = append(parts, engine.Queue(p, lookup, i+2))
	}
	var total *engine.Job[int]
	// A scheduler queues the last job once the parts are known.
	p.Go(func(ctx context.Context) error {
		var xs []int
		for _, j := range parts {
			<-j.Done()
			v, err := j.Result()
			if err != nil {
				return err
			}
			xs = append(xs, v)
		}
		total = engine.Queue(p, sum, xs)
		return nil
	})
	if err := p.Run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	v, _ := total.Result()
	fmt.Println("4 + 9 + 16 =", v)
	st := p.Stats().Workers[0].Cache
	fmt.Printf("table built %d time(s), evicted %d time(s)\n", st.Builds, st.Evictions)
	// Output:
	// 4 + 9 + 16 = 29
	// table built 1 time(s), evicted 1 time(s)
}

// wordCount counts the words a command prints: a job that spends its time
// waiting for another process.
var wordCount = engine.Register("example.wordCount", func(ctx context.Context, args []string) (int, error) {
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).Output()
	return len(strings.Fields(string(out))), err
})

// ExampleInProcess runs jobs that wait on commands in goroutines of this
// process, two at a time: a worker process would only relay them.
func ExampleInProcess() {
	p := engine.New(engine.InProcess(2))
	a := engine.Queue(p, wordCount, []string{"echo", "one", "two", "three"})
	b := engine.Queue(p, wordCount, []string{"echo", "four"})
	if err := p.Run(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	na, _ := a.Result()
	nb, _ := b.Result()
	fmt.Println(na, nb)
	// Output: 3 1
}
