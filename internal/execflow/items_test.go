package execflow_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/execflow"
)

// itemsFlow: six jobs use the file item ref; then four jobs, after all of
// them, use the folder item big and check that the artefact of ref that
// their own worker built is gone. Every command logs "PID PATH", where PID
// is the process that ran the shell ($PPID: the worker, or the test process
// in serial mode).
const itemsFlow = `
items:
  ref:
    run: |
      echo "$PPID $POOLRUN_ITEM" >> "$LOG/builds-ref"
      echo data > "$POOLRUN_ITEM"
  big:
    run: |
      echo "$PPID $POOLRUN_ITEM" >> "$LOG/builds-big"
      mkdir "$POOLRUN_ITEM"
      echo x > "$POOLRUN_ITEM/f"
jobs:
  - id: use-${i}
    foreach: {i: 1..6}
    needs: [ref]
    run: |
      test "$(cat "$POOLRUN_ITEM_REF")" = data
      echo "$PPID $POOLRUN_ITEM_REF" >> "$LOG/uses-ref"
  - id: check-${i}
    foreach: {i: 1..4}
    after: ["use-*"]
    needs: [big]
    run: |
      test -f "$POOLRUN_ITEM_BIG/f"
      echo "$PPID $POOLRUN_ITEM_BIG" >> "$LOG/uses-big"
      while read -r pid path; do
        if [ "$pid" = "$PPID" ]; then
          if [ -e "$path" ]; then echo "ref still at $path" >&2; exit 1; fi
          echo "$PPID $path" >> "$LOG/checked"
        fi
      done < "$LOG/builds-ref"
`

// TestItems checks that a worker builds an item once, however many of its
// jobs need it, that all of them see the same artefact, that the artefact
// is deleted once no job needs it (seen by a later job on the same worker),
// and that nothing is left in the scratch root at the end.
func TestItems(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			wf := parse(t, "items.yaml", itemsFlow)
			logDir, root := t.TempDir(), t.TempDir()
			jobs, err := run(t, wf, m.workers, execflow.Options{
				Dir: t.TempDir(), Scratch: root, Env: []string{"LOG=" + logDir},
			})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			for _, id := range sortedKeys(jobs) {
				if st := jobs[id].Status(); st != engine.Succeeded {
					t.Errorf("job %s: %v", id, st)
				}
			}
			for _, item := range []string{"ref", "big"} {
				builds := readLog(t, filepath.Join(logDir, "builds-"+item))
				uses := readLog(t, filepath.Join(logDir, "uses-"+item))
				built := map[string]string{} // worker -> artefact
				for _, b := range builds {
					if prev, ok := built[b[0]]; ok {
						t.Errorf("%s built twice by process %s: %s and %s", item, b[0], prev, b[1])
					}
					built[b[0]] = b[1]
					if !strings.HasPrefix(b[1], root+string(filepath.Separator)+"poolrun-"+b[0]+"-") {
						t.Errorf("%s built at %s, not in a scratch folder of process %s under %s", item, b[1], b[0], root)
					}
					if _, err := os.Lstat(b[1]); !os.IsNotExist(err) {
						t.Errorf("%s's artefact %s is still there after the run (%v)", item, b[1], err)
					}
				}
				for _, u := range uses {
					if path, ok := built[u[0]]; !ok {
						t.Errorf("process %s used %s at %s without building it", u[0], item, u[1])
					} else if path != u[1] {
						t.Errorf("process %s used %s at %s, built at %s", u[0], item, u[1], path)
					}
				}
				if len(builds) == 0 || len(uses) == 0 {
					t.Errorf("%s: %d builds, %d uses", item, len(builds), len(uses))
				}
				if m.workers <= 1 && len(builds) != 1 {
					t.Errorf("%s built %d times by one worker", item, len(builds))
				}
				t.Logf("%s: built %d times, used %d times", item, len(builds), len(uses))
			}
			checked := readLog(t, filepath.Join(logDir, "checked"))
			if m.workers <= 1 && len(checked) == 0 {
				t.Error("no check job saw its worker's build of ref")
			}
			t.Logf("%d checks of a deleted ref", len(checked))
			if left := scratchLeft(t, root); len(left) > 0 {
				t.Errorf("scratch root holds %q after the run", left)
			}
		})
	}
}

// TestItemHandles checks that Queue and ItemHandles agree on the items, and
// that other options make other items.
func TestItemHandles(t *testing.T) {
	wf := parse(t, "items.yaml", itemsFlow)
	opts := execflow.Options{Dir: t.TempDir(), Scratch: t.TempDir()}
	a, err := execflow.ItemHandles(wf, opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := execflow.ItemHandles(wf, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != 2 {
		t.Fatalf("%d handles, want 2", len(a))
	}
	opts.Env = []string{"X=1"}
	c, err := execflow.ItemHandles(wf, opts)
	if err != nil {
		t.Fatal(err)
	}
	for name, h := range a {
		if !strings.HasPrefix(h.Name(), execflow.ItemPrefix+":"+name+"@") {
			t.Errorf("item %s is named %q", name, h.Name())
		}
		if b[name] != h {
			t.Errorf("item %s: two calls give different handles", name)
		}
		if c[name].Key() == h.Key() {
			t.Errorf("item %s: other options, same key %#x", name, h.Key())
		}
	}
	if a["ref"].Key() == a["big"].Key() {
		t.Error("ref and big have the same key")
	}
}
