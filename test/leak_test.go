package test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/poolrun/poolrun/engine"
)

// TestNoGoroutineLeak runs pools one after another, with workers and
// serially, and checks that each leaves no goroutine behind.
func TestNoGoroutineLeak(t *testing.T) {
	run := func(workers int) {
		p := engine.New(engine.Workers(workers), engine.OnEvent(func(engine.Event) {}), engine.Tick(time.Millisecond))
		for i := range 20 {
			engine.Queue(p, square, i)
		}
		if err := p.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	run(2) // warm up what the runtime starts once
	run(0)
	before := runtime.NumGoroutine()
	for range 3 {
		run(2)
		run(0)
	}
	// Goroutines that have been told to end may take a moment to do so.
	deadline := time.Now().Add(20 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if after := runtime.NumGoroutine(); after > before {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines before, %d after six pools:\n%s", before, after, buf[:runtime.Stack(buf, true)])
	}
}
