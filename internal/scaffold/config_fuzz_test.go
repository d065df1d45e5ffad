package scaffold

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"strings"
	"testing"
)

// FuzzConfig checks that ParseConfig never panics, that every problem it
// reports is a *ConfigError that names the file and a line, and that every
// configuration it accepts passes Validate and can be used: its chunks,
// hash and cell counts. The corpus in testdata/fuzz/FuzzConfig holds the
// embedded default, the cerebellum example, problems of every kind, and
// aliases that stand for a billion values or repeat a list many times
// ("alias_*"); TestConfigAliasBombs measures the memory such files take.
func FuzzConfig(f *testing.F) {
	f.Add([]byte(base))
	f.Add(DefaultConfig())
	if data, err := os.ReadFile("../../examples/scaffold-cerebellum.yaml"); err == nil {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig("c.yaml", data)
		if err != nil {
			checkConfigErrors(t, "c.yaml", err)
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("ParseConfig accepted a configuration that Validate refuses: %v", err)
		}
		if len(c.CellTypes) == 0 {
			t.Fatal("no cell type")
		}
		g := c.grid()
		if n := len(c.Chunks()); n != g[0]*g[1]*g[2] || n < 1 || n > maxChunks {
			t.Fatalf("%d chunks, grid %v", n, g)
		}
		c.Hash()
		for _, ct := range c.CellTypes {
			if n, err := c.cells(ct.Name); err != nil || n < 0 || n > maxCellsPerType {
				t.Fatalf("Cells(%s) = %d, %v", ct.Name, n, err)
			}
		}
		for _, r := range c.Rules {
			if !(r.MaxDistance > 0) || math.IsInf(r.MaxDistance, 0) || r.MaxPerTarget < 0 || !(r.Probability >= 0 && r.Probability <= 1) {
				t.Fatalf("rule %+v", r)
			}
		}
	})
}

// checkConfigErrors checks that err, from ParseConfig of file, holds
// only *ConfigError values that name file and a line, at most 20 of them
// and a last "... and N more".
func checkConfigErrors(t *testing.T, file string, err error) {
	t.Helper()
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	if len(errs) > 21 {
		t.Fatalf("%d errors joined, want at most 21", len(errs))
	}
	for i, e := range errs {
		var ce *ConfigError
		if !errors.As(e, &ce) {
			if i == len(errs)-1 && i > 0 && strings.HasPrefix(e.Error(), "... and ") {
				continue
			}
			t.Fatalf("error %d of %d, %q, is not a *ConfigError", i+1, len(errs), e)
		}
		if ce.File != file || ce.Line < 1 || ce.Msg == "" || !strings.HasPrefix(ce.Error(), fmt.Sprintf("%s:%d: ", file, ce.Line)) {
			t.Fatalf("error %q: File %q, Line %d; want the file and a line", ce, ce.File, ce.Line)
		}
	}
}

// configBombs are configurations whose aliases, or sheer number of
// entries, made ParseConfig take gigabytes: every field or problem of an
// element repeated by aliases, and a list of the cell types in the message
// of every rule that names an unknown one.
func configBombs() []struct{ name, in, want string } {
	var fields, types, rules strings.Builder
	for i := range 10_000 {
		fmt.Fprintf(&fields, ", x%d: 1", i)
	}
	for i := range 3000 {
		fmt.Fprintf(&types, "  - {name: t%d, density: 1}\n", i)
		fmt.Fprintf(&rules, "  - {name: r%d, from: a, to: x, max_distance: 1}\n", i)
	}
	withTypes := func(types string) string {
		return strings.Replace(base, "  - name: b\n", types+"  - name: b\n", 1)
	}
	return []struct{ name, in, want string }{
		{
			name: "a cell type with many unknown fields, repeated",
			in:   withTypes("  - &t {name: c, density: 1" + fields.String() + "}\n" + strings.Repeat("  - *t\n", 1000)),
			want: `c.yaml:8: cell_types[1]: unknown field "x0" (want name, density, radius)`,
		},
		{
			name: "a cell type repeated",
			in:   withTypes("  - &t {name: c, density: 1}\n" + strings.Repeat("  - *t\n", 10_000)),
			want: `c.yaml:9: cell_types[2]: an alias repeats cell_types[1] (line 8), and so its name`,
		},
		{
			name: "billion laughs",
			in:   "laughs:\n  l1: &l1 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n  l2: &l2 [*l1, *l1, *l1, *l1, *l1, *l1, *l1, *l1, *l1, *l1]\n" + base,
			want: `c.yaml:1: unknown field "laughs" (want seed, box, cell_types, connections)`,
		},
		{
			name: "many cell types and many rules with an unknown type",
			in:   withTypes(types.String()) + rules.String(),
			want: `c.yaml:3017: connection "r0": to: unknown cell type "x" (known: a, t0, t1, t2, t3, t4, t5, t6, t7, t8, ... (3002 in all))`,
		},
	}
}

// A configuration whose aliases repeat large elements, or that has many
// elements with problems, is answered with an error that names the file
// and the line, in memory of the order of the file's (the YAML library
// takes about 50 bytes per byte of YAML; the largest file here is 0.24 MB)
// rather than the gigabytes it took (4.8 GB for the first, 0.1 MB large,
// repeated only 1000 times).
func TestConfigAliasBombs(t *testing.T) {
	for _, tt := range configBombs() {
		t.Run(tt.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := ParseConfig("c.yaml", []byte(tt.in))
			runtime.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("%d bytes of YAML: %d KiB allocated", len(tt.in), alloc>>10)
			if err == nil {
				t.Fatal("no error")
			}
			checkConfigErrors(t, "c.yaml", err)
			if first := strings.SplitN(err.Error(), "\n", 2)[0]; first != tt.want {
				t.Errorf("first error\n got: %s\nwant: %s", first, tt.want)
			}
			if limit := uint64(32 << 20); alloc > limit {
				t.Errorf("%d MiB allocated, more than %d MiB", alloc>>20, limit>>20)
			}
		})
	}
}
