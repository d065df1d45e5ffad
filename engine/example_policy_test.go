package engine_test

import (
	"context"
	"fmt"

	"github.com/poolrun/poolrun/engine"
)

// Three jobs that need the same item, under each eviction policy: the item
// is built once, unless the cache is cleared after every job.
func ExampleEvict() {
	for _, pol := range []engine.EvictPolicy{engine.EvictStale, engine.EvictNever, engine.EvictEachJob} {
		p := engine.New(engine.Workers(0), engine.Evict(pol))
		for i := range 3 {
			engine.Queue(p, lookup, i)
		}
		if err := p.Run(context.Background()); err != nil {
			fmt.Println(err)
			return
		}
		st := p.Stats().Workers[0].Cache
		fmt.Printf("%-8s table built %d time(s), evicted %d time(s)\n", pol, st.Builds, st.Evictions)
	}
	// Output:
	// stale    table built 1 time(s), evicted 1 time(s)
	// never    table built 1 time(s), evicted 1 time(s)
	// each-job table built 3 time(s), evicted 3 time(s)
}
