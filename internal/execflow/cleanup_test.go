package execflow_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/execflow"
)

// TestScratchCleanup kills a worker with SIGKILL while its job runs, on a
// pool with execflow.ScratchCleanup: the worker's scratch folder is removed
// while the pool still runs (a job on the other worker sees it go), not
// by a later sweep, and nothing is left when Run returns.
func TestScratchCleanup(t *testing.T) {
	wf := parse(t, "cleanup.yaml", `
items:
  ref:
    run: echo data > "$POOLRUN_ITEM"
jobs:
  - id: victim
    needs: [ref]
    run: |
      ls -d "$ROOT"/poolrun-$PPID-* > "$LOG/folder"
      echo $PPID > "$LOG/worker.tmp"; mv "$LOG/worker.tmp" "$LOG/worker"
      kill -KILL $PPID; exec sleep 30
  - id: observer
    run: |
      i=0
      while [ ! -e "$LOG/worker" ]; do
        i=$((i+1)); [ $i -lt 3000 ] || { echo "the victim did not start" >&2; exit 1; }
        sleep 0.01
      done
      w=$(cat "$LOG/worker")
      i=0
      while ls -d "$ROOT"/poolrun-$w-* >/dev/null 2>&1; do
        i=$((i+1)); [ $i -lt 1000 ] || { echo "the scratch folder of worker $w is still there" >&2; exit 1; }
        sleep 0.01
      done
`)
	logDir, root := t.TempDir(), t.TempDir()
	opts := execflow.Options{Scratch: root, Env: []string{"LOG=" + logDir, "ROOT=" + root}}
	p := engine.New(engine.Workers(2), execflow.ScratchCleanup(opts))
	jobs, err := execflow.Queue(p, wf, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	err = p.Run(ctx)
	if !errors.Is(err, engine.ErrWorkerDied) {
		t.Errorf("Run: %v, want ErrWorkerDied", err)
	}
	if st := jobs["victim"].Status(); st != engine.Aborted {
		t.Errorf("victim is %v, want aborted", st)
	}
	if folder := readFile(t, filepath.Join(logDir, "folder")); folder == "" {
		t.Error("the victim's worker had no scratch folder: the test proves nothing")
	}
	if _, err := jobs["observer"].Result(); err != nil {
		t.Errorf("observer: %v", err)
	}
	if left := scratchLeft(t, root); len(left) > 0 {
		t.Errorf("scratch root holds %q after the run", left)
	}
}
