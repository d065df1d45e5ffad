package test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/poolrun/poolrun/engine"
)

var (
	square = engine.Register("test.square", func(ctx context.Context, x int) (int, error) { return x * x, nil })
	divide = engine.Register("test.divide", func(ctx context.Context, a [2]int) (int, error) {
		if a[1] == 0 {
			return 0, fmt.Errorf("%d / 0: division by zero", a[0])
		}
		return a[0] / a[1], nil
	})
)

func TestSingleJob(t *testing.T) {
	modes(t, func(t *testing.T, tr transport) {
		p := tr.New(t)
		j := engine.Queue(p, square, 7)
		if err := p.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		got, err := j.Result()
		if err != nil || got != 49 {
			t.Fatalf("Result() = %d, %v; want 49, nil", got, err)
		}
		if j.Status() != engine.Succeeded {
			t.Errorf("Status() = %v", j.Status())
		}
	})
}

func TestManyJobs(t *testing.T) {
	modes(t, func(t *testing.T, tr transport) {
		const n = 1000
		p := tr.New(t)
		jobs := make([]*engine.Job[int], n)
		for i := range jobs {
			jobs[i] = engine.Queue(p, square, i)
		}
		if err := p.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		for i, j := range jobs {
			if got, err := j.Result(); err != nil || got != i*i {
				t.Fatalf("job %d: %d, %v; want %d", i, got, err, i*i)
			}
		}
		st := p.Stats()
		if total := st.Total().Jobs; total != n {
			t.Errorf("workers ran %d jobs, want %d", total, n)
		}
		t.Logf("stats: %+v", st.Workers)
	})
}

func TestFailingJob(t *testing.T) {
	modes(t, func(t *testing.T, tr transport) {
		p := tr.New(t)
		ok := engine.Queue(p, divide, [2]int{10, 2})
		bad := engine.Queue(p, divide, [2]int{1, 0}, engine.Label("case", "zero"))
		err := p.Run(context.Background())
		var je *engine.JobError
		if !errors.As(err, &je) {
			t.Fatalf("Run() = %v, want a *JobError", err)
		}
		if je.JobID != bad.ID() || je.Func != "test.divide" || je.Labels["case"] != "zero" {
			t.Errorf("JobError = %+v", je)
		}
		if want := "1 / 0: division by zero"; je.Err.Error() != want {
			t.Errorf("JobError.Err = %q, want %q", je.Err, want)
		}
		if bad.Status() != engine.Failed {
			t.Errorf("failing job: %v", bad.Status())
		}
		if v, err := ok.Result(); err != nil || v != 5 {
			t.Errorf("the job that succeeded: %d, %v", v, err)
		}
		t.Logf("Run: %v", err)
	})
}
