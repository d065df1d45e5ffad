package engine_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/engine"
)

// The README's library example, kept here so that it compiles and runs:
// an item built once per worker that needs it, and a function whose jobs
// use it.

var lengths = cachepool.Define("readme.lengths", func(ctx context.Context) (map[string]int, error) {
	return map[string]int{"one": 3, "three": 5}, nil // a file to load, an index to build
})

var length = engine.Register("readme.length", func(ctx context.Context, w string) (int, error) {
	m, err := lengths.Get(ctx) // built on first use in this worker, then a hit
	return m[w], err
}, engine.Uses(lengths))

// ExampleRegister runs jobs on two worker processes (the test binary is its
// own worker: TestMain calls engine.Init first, as main does).
func ExampleRegister() {
	p := engine.New(engine.Workers(2))
	jobs := engine.Map(p, length, strings.Fields("one three")) // a job each, in order
	if err := p.Run(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	for _, j := range jobs {
		fmt.Println(j.Result())
	}
	// Output:
	// 3 <nil>
	// 5 <nil>
}
