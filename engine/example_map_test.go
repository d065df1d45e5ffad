package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/poolrun/poolrun/engine"
)

var shout = engine.Register("example.shout", func(ctx context.Context, s string) (string, error) {
	if s == "" {
		return "", errors.New("nothing to shout")
	}
	return strings.ToUpper(s) + "!", nil
})

func ExampleMap() {
	// In a real program engine.Init() is the first call in main; this
	// example runs its jobs serially, in this process.
	p := engine.New(engine.Workers(0))
	jobs := engine.Map(p, shout, []string{"hello", "pool"})
	if err := p.Run(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	for _, j := range jobs {
		v, _ := j.Result()
		fmt.Println(v)
	}
	// Output:
	// HELLO!
	// POOL!
}

func ExampleRunMap() {
	words, err := engine.RunMap(context.Background(), shout, []string{"a", "", "c"}, engine.Workers(0))
	fmt.Printf("%q\n", words)
	fmt.Println(err)
	// Output:
	// ["A!" "" "C!"]
	// job 2 (example.shout): nothing to shout
}
