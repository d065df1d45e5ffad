package test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/poolrun/poolrun/engine"
)

var panicky = engine.Register("test.panic", func(ctx context.Context, x int) (int, error) {
	if x < 0 {
		var m map[string]int
		//lint:ignore SA5000 the point: a runtime panic in a job
		m["boom"] = x
	}
	return x, nil
})

// withChan cannot be encoded by encoding/gob.
type withChan struct{ C chan int }

var takesChan = engine.Register("test.takeschan", func(ctx context.Context, w withChan) (int, error) { return 1, nil })

var returnsChan = engine.Register("test.returnschan", func(ctx context.Context, x int) (withChan, error) {
	return withChan{C: make(chan int)}, nil
})

func TestPanicAndEncoding(t *testing.T) {
	modes(t, func(t *testing.T, tr transport) {
		p := tr.New(t)
		boom := engine.Queue(p, panicky, -1)
		after := engine.Queue(p, panicky, 5, engine.After(engine.Queue(p, panicky, 4)))
		badArg := engine.Queue(p, takesChan, withChan{C: make(chan int)})
		badRes := engine.Queue(p, returnsChan, 1)
		err := p.Run(context.Background())
		if err == nil {
			t.Fatal("Run() = nil, want three failures")
		}
		var pe *engine.PanicError
		if _, err := boom.Result(); !errors.As(err, &pe) || !strings.Contains(fmt.Sprint(pe.Value), "nil map") || !strings.Contains(string(pe.Stack), "failure_test.go") {
			t.Errorf("panicking job: %v (stack %d bytes)", err, len(pe.Stack))
		}
		if v, err := after.Result(); err != nil || v != 5 {
			t.Errorf("a job after the panic: %d, %v (the worker should keep serving)", v, err)
		}
		if _, err := badArg.Result(); badArg.Status() != engine.Failed || !strings.Contains(err.Error(), "encoding the argument") {
			t.Errorf("job with an argument gob cannot encode: %v, %v", badArg.Status(), err)
		}
		if _, err := badRes.Result(); badRes.Status() != engine.Failed || !strings.Contains(err.Error(), "encoding the result") {
			t.Errorf("job with a result gob cannot encode: %v, %v", badRes.Status(), err)
		}
		if n := strings.Count(err.Error(), "\n") + 1; n != 3 {
			t.Errorf("Run() reports %d errors, want 3:\n%v", n, err)
		}
	})
}
