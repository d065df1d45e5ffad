package shm_test

import (
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/poolrun/poolrun/shm"
)

func Example() {
	// The parent creates the window and publishes the keys still required.
	w, err := shm.Create(shm.DefaultCapacity)
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Publish([]uint64{30, 10, 20}); err != nil {
		log.Fatal(err)
	}

	// A worker maps the same file read-only (here in the same process; a
	// real worker gets w.File() as an inherited descriptor).
	r, err := shm.Open(w.File())
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()

	s, err := r.Snapshot(nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("keys:", s.Keys, "generation:", s.Gen)
	fmt.Println("20 required:", s.Contains(20), "40 required:", s.Contains(40))

	// The same set again does not move the generation; a new one does.
	g1, _ := w.Publish([]uint64{10, 20, 30})
	g2, _ := w.Publish([]uint64{10})
	fmt.Println("generations:", g1, g2)
	// Output:
	// keys: [10 20 30] generation: 2
	// 20 required: true 40 required: false
	// generations: 2 4
}

func ExampleWindow_Publish_overflow() {
	w, err := shm.Create(2)
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	_, err = w.Publish([]uint64{1, 2, 3})
	fmt.Println(err)
	s, _ := w.Snapshot(nil)
	fmt.Println("overflow:", s.Overflow, "contains 99:", s.Contains(99))
	// Output:
	// shm: more keys than the window's capacity: 3 keys, 2 slots
	// overflow: true contains 99: true
}

func ExampleWindow_WaitGen() {
	w, err := shm.Create(shm.DefaultCapacity)
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	r, err := shm.Open(w.File())
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()

	// An idle worker sleeps until the next publish after its last snapshot
	// (here another goroutine stands for the parent).
	s, _ := r.Snapshot(nil)
	go func() {
		time.Sleep(10 * time.Millisecond)
		w.Publish([]uint64{7})
	}()
	gen, err := r.WaitGen(s.Gen+2, time.Now().Add(time.Minute))
	fmt.Println("woken at generation", gen, err)
	s, _ = r.Snapshot(s.Keys)
	fmt.Println("keys:", s.Keys)

	// Nothing else is published: the wait ends at its deadline.
	_, err = r.WaitGen(s.Gen+2, time.Now().Add(10*time.Millisecond))
	fmt.Println(err)
	// Output:
	// woken at generation 2 <nil>
	// keys: [7]
	// shm: deadline passed before the generation was reached
}

func ExampleWindow_Nudge() {
	w, err := shm.Create(8)
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	gen, _ := w.Publish([]uint64{1})

	// A goroutine waits a minute at most for the next publish; the
	// program wants it back sooner, say because it is shutting down.
	done := make(chan error, 1)
	go func() {
		_, err := w.WaitGen(gen+2, time.Now().Add(time.Minute))
		done <- err
	}()
	// A nudge that comes just before the waiter sleeps can miss it: nudge
	// until it has returned.
	for {
		w.Nudge()
		select {
		case err := <-done:
			fmt.Println("returned:", errors.Is(err, shm.ErrNudged))
			return
		case <-time.After(time.Millisecond):
		}
	}
	// Output:
	// returned: true
}
