package workflow_test

import (
	"errors"
	"fmt"
	"strings"

	"github.com/poolrun/poolrun/internal/workflow"
)

func Example() {
	const file = `
items:
  ref:
    run: zcat ref.gz > "$POOLRUN_ITEM"
jobs:
  - id: split
    run: ./split input
  - id: align-${i}
    foreach: {i: 1..3}
    run: ./align --ref "$POOLRUN_ITEM_REF" --chunk ${i}
    needs: [ref]
    after: [split]
  - id: merge
    run: ./merge
    after: ["align-*"]
`
	w, err := workflow.Parse("align.yaml", []byte(file))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, it := range w.Items {
		fmt.Printf("item %s in $%s: %s\n", it.Name, workflow.EnvName(it.Name), it.Run)
	}
	for _, j := range w.Jobs {
		fmt.Printf("%s: %s", j.ID, j.Run)
		if len(j.After) > 0 {
			fmt.Printf(" [after %s]", strings.Join(j.After, " "))
		}
		if len(j.Needs) > 0 {
			fmt.Printf(" [needs %s]", strings.Join(j.Needs, " "))
		}
		fmt.Println()
	}
	// Output:
	// item ref in $POOLRUN_ITEM_REF: zcat ref.gz > "$POOLRUN_ITEM"
	// split: ./split input
	// align-1: ./align --ref "$POOLRUN_ITEM_REF" --chunk 1 [after split] [needs ref]
	// align-2: ./align --ref "$POOLRUN_ITEM_REF" --chunk 2 [after split] [needs ref]
	// align-3: ./align --ref "$POOLRUN_ITEM_REF" --chunk 3 [after split] [needs ref]
	// merge: ./merge [after align-1 align-2 align-3]
}

func ExampleParse_error() {
	const file = `jobs:
  - id: a
    run: ./a
    after: [b]
  - id: b
    run: ./b
    after: [a]
`
	_, err := workflow.Parse("cycle.yaml", []byte(file))
	fmt.Println(err)
	var werr *workflow.Error
	if errors.As(err, &werr) {
		fmt.Printf("file %s, line %d\n", werr.File, werr.Line)
	}
	// Output:
	// cycle.yaml:2: dependency cycle: a -> b (cycle.yaml:5) -> a
	// file cycle.yaml, line 2
}

func ExampleEnvName() {
	fmt.Println(workflow.EnvName("ref"))
	fmt.Println(workflow.EnvName("index-a.v2"))
	// Output:
	// POOLRUN_ITEM_REF
	// POOLRUN_ITEM_INDEX_A_V2
}
