package execflow_test

import (
	"context"
	"fmt"
	"os"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/execflow"
	"github.com/poolrun/poolrun/internal/workflow"
)

func Example() {
	wf, err := workflow.Parse("hello.yaml", []byte(`
items:
  greeting:
    run: echo "hello, world" > "$POOLRUN_ITEM"
jobs:
  - id: greet
    needs: [greeting]
    run: cat "$POOLRUN_ITEM_GREETING"
  - id: fail
    after: [greet]
    run: echo "no luck" >&2; exit 3
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	scratch, err := os.MkdirTemp("", "example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(scratch)

	p := engine.New(engine.Workers(0)) // serial: the commands write to this process's stdout
	jobs, err := execflow.Queue(p, wf, execflow.Options{Scratch: scratch})
	if err != nil {
		fmt.Println(err)
		return
	}
	p.Run(context.Background())
	fmt.Println("greet:", jobs["greet"].Status())
	_, err = jobs["fail"].Result()
	if ce, ok := execflow.AsCommandError(err); ok {
		fmt.Printf("fail: exit status %d, line %d, stderr %q\n", ce.ExitCode, ce.Line, ce.StderrTail)
	}
	// Output:
	// hello, world
	// greet: succeeded
	// fail: exit status 3, line 9, stderr "no luck"
}

// A batch queued by a scheduler of the pool: the first commands start
// while the others are queued.
func ExampleBatch() {
	wf, err := workflow.Parse("steps.yaml", []byte(`
jobs:
  - {id: one, run: echo one}
  - {id: two, run: echo two, after: [one]}
  - {id: three, run: echo three, after: [two]}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	scratch, err := os.MkdirTemp("", "example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(scratch)

	b, err := execflow.Prepare(wf, execflow.Options{Scratch: scratch}) // every check, nothing queued
	if err != nil {
		fmt.Println(err)
		return
	}
	p := engine.New(engine.Workers(0))
	var jobs map[string]*engine.Job[execflow.Result]
	p.Go(func(context.Context) error {
		jobs = b.Queue(p)
		return nil
	})
	if err := p.Run(context.Background()); err != nil { // Run waits for its schedulers
		fmt.Println(err)
		return
	}
	fmt.Println(len(jobs), "jobs, three:", jobs["three"].Status())
	// Output:
	// one
	// two
	// three
	// 3 jobs, three: succeeded
}
