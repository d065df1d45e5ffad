package engine

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestReadyQueueOrder(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	var q readyQueue
	var model []int
	for range 5000 {
		if len(model) > 0 && rng.IntN(3) == 0 {
			low := slices.Min(model)
			if got := q.peek().id; got != low {
				t.Fatalf("peek: job %d, want the lowest id %d", got, low)
			}
			q.pop()
			model = slices.DeleteFunc(model, func(id int) bool { return id == low })
			continue
		}
		id := rng.IntN(1000) + 1
		if slices.Contains(model, id) {
			continue
		}
		q.push(&job{id: id})
		model = append(model, id)
	}
	slices.Sort(model)
	for _, want := range model {
		if got := q.peek(); got == nil || got.id != want {
			t.Fatalf("draining: got %v, want job %d", got, want)
		}
		q.pop()
	}
	if q.peek() != nil {
		t.Fatal("queue not empty after draining")
	}
}
