package scaffold_test

import (
	"fmt"
	"log"
	"os"

	"github.com/poolrun/poolrun/internal/scaffold"
)

// Example runs the default workload, shrunk to a thousandth of its volume, in
// one goroutine: every placement, then per source type one index and the
// connectivity of the rules from it. A pool runs the same calls as jobs.
func Example() {
	cfg := scaffold.Default().Scaled(0.001)
	out, err := os.MkdirTemp("", "scaffold-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(out)

	for _, t := range cfg.CellTypes {
		for _, ch := range cfg.Chunks() {
			if _, err := scaffold.Place(cfg, t.Name, ch, out); err != nil {
				log.Fatal(err)
			}
		}
	}
	for _, typ := range cfg.SourceTypes() {
		ix, err := scaffold.BuildIndex(cfg, typ, out, 0)
		if err != nil {
			log.Fatal(err)
		}
		for _, rule := range cfg.RulesFrom(typ) {
			for _, ch := range cfg.Chunks() {
				if _, err := scaffold.Connect(cfg, rule, ch, ix, out); err != nil {
					log.Fatal(err)
				}
			}
		}
	}

	counts, err := scaffold.Summary(cfg, out)
	if err != nil {
		log.Fatal(err)
	}
	sum, err := scaffold.Checksum(cfg, out)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(counts)
	fmt.Printf("checksum: %016x\n", sum)
	// Output:
	// cells       granule               2528
	// cells       glomerulus            975
	// cells       golgi                 9
	// cells       stellate              30
	// connections glomerulus_to_granule 10112
	// connections glomerulus_to_golgi   360
	// connections granule_to_golgi      1800
	// connections granule_to_stellate   1498
	// connections golgi_to_glomerulus   1950
	// checksum: b9c3f6cd78743969
}
