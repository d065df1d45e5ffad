package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/poolrun/poolrun/internal/report"
)

func TestParseByteSize(t *testing.T) {
	for _, c := range []struct {
		name string
		in   string
		want int64 // -1: an error
	}{
		{"bytes", "1048576", 1 << 20},
		{"zero", "0", 0},
		{"B", "512B", 512},
		{"KiB", "800KiB", 800 << 10},
		{"MiB", "512MiB", 512 << 20},
		{"fraction of GiB", "1.5GiB", 3 << 29},
		{"TiB", "2TiB", 2 << 40},
		{"space and case", " 2 mib ", 2 << 20},
		{"fraction of a byte rounds down", "0.5KiB", 512},
		{"empty", "", -1},
		{"negative", "-1", -1},
		{"negative with unit", "-1MiB", -1},
		{"decimal unit", "12MB", -1},
		{"unit alone", "MiB", -1},
		{"fraction of bytes", "1.5", -1},
		{"exponent", "1e3", -1},
		{"words", "lots", -1},
		{"too large", "9000000TiB", -1},
		{"bytes overflow", "99999999999999999999", -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseByteSize(c.in)
			switch {
			case c.want < 0 && err == nil:
				t.Errorf("parseByteSize(%q) = %d, want an error", c.in, got)
			case c.want >= 0 && (err != nil || got != c.want):
				t.Errorf("parseByteSize(%q) = %d, %v; want %d", c.in, got, err, c.want)
			}
		})
	}
}

// TestCacheFlagsBadValue: a bad --cache-budget or --evict is bad usage
// (exit status 2), and the message names the flag.
func TestCacheFlagsBadValue(t *testing.T) {
	for _, args := range [][]string{
		{"scaffold", "--cache-budget", "12MB"},
		{"scaffold", "--cache-budget", "-5"},
		{"scaffold", "--evict", "sometimes"},
		{"run", "--cache-budget", "lots", "workflow.yaml"},
		{"run", "--evict", "stale-ish", "workflow.yaml"},
	} {
		var stdout, stderr bytes.Buffer
		err := Main(context.Background(), args, &stdout, &stderr)
		flagName := "-" + strings.TrimLeft(args[1], "-")
		if ExitCode(err) != ExitBadInput || !strings.Contains(err.Error(), flagName) {
			t.Errorf("poolrun %s: %v (exit %d), want exit %d and an error naming %s", strings.Join(args, " "), err, ExitCode(err), ExitBadInput, flagName)
		}
	}
}

// TestCacheFlagsHelp: the commands that run a pool document the cache flags.
func TestCacheFlagsHelp(t *testing.T) {
	for _, cmd := range []string{"scaffold", "run"} {
		var stdout, stderr bytes.Buffer
		if err := Main(context.Background(), []string{cmd, "--help"}, &stdout, &stderr); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"--cache-budget SIZE", "512MiB", "--evict POLICY", "pool-wide", "each-job", "--no-affinity", "--no-idle-eviction"} {
			if !strings.Contains(stdout.String(), want) {
				t.Errorf("poolrun %s --help lacks %q:\n%s", cmd, want, stdout.String())
			}
		}
	}
}

// TestCacheFlagsReport runs the tiny scaffold with each cache flag and
// checks that the pool ran with them, as its JSON report says, and the
// report's cache figures.
func TestCacheFlagsReport(t *testing.T) {
	for _, c := range []struct {
		name  string
		flags []string
		want  report.CacheSettings
	}{
		{"defaults", nil, report.CacheSettings{Evict: "stale", Affinity: true, IdleEviction: true}},
		{"plain", []string{"--evict", "pool-wide", "--no-affinity", "--no-idle-eviction"}, report.CacheSettings{Evict: "pool-wide"}},
		{"never", []string{"--evict", "never"}, report.CacheSettings{Evict: "never", Affinity: true, IdleEviction: true}},
		// 1 KiB is less than any index: every connection job's own
		// items exceed it.
		{"budget", []string{"--cache-budget", "1KiB"}, report.CacheSettings{Evict: "stale", Affinity: true, IdleEviction: true, CacheBudget: 1 << 10}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "report.json")
			args := slices.Concat([]string{"scaffold", "-j", "2", "--scale", "0.02", "--out", filepath.Join(dir, "out"), "--report", path}, c.flags)
			var stdout, stderr bytes.Buffer
			if err := Main(context.Background(), args, &stdout, &stderr); err != nil {
				t.Fatalf("poolrun %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var r report.Pool
			if err := json.Unmarshal(data, &r); err != nil {
				t.Fatal(err)
			}
			if want := (report.Options{Workers: 2, CacheSettings: c.want}); r.Options != want {
				t.Errorf("options %+v, want %+v", r.Options, want)
			}
			tot := r.Totals
			if tot.SummedPeakBytes <= 0 || tot.SummedPeakBytes > tot.PeakBytes || tot.StaleByteSeconds < 0 {
				t.Errorf("summed peak %d bytes, sum of peaks %d, stale %v byte-seconds", tot.SummedPeakBytes, tot.PeakBytes, tot.StaleByteSeconds)
			}
			var budgetEvictions uint64
			var rss int64
			for _, w := range r.Workers {
				budgetEvictions += w.BudgetEvictions
				rss += w.PeakRSS
				if runtime.GOOS == "linux" && w.PeakRSS <= 0 {
					t.Errorf("worker %d: peak RSS %d", w.Index, w.PeakRSS)
				}
			}
			if tot.BudgetEvictions != budgetEvictions || tot.PeakRSS != rss {
				t.Errorf("totals: %d budget evictions, peak RSS %d; the workers' sum to %d, %d", tot.BudgetEvictions, tot.PeakRSS, budgetEvictions, rss)
			}
			switch c.name {
			case "never":
				if tot.StaleEvictions != 0 {
					t.Errorf("--evict never: %d evictions while the pool ran", tot.StaleEvictions)
				}
			case "budget":
				if tot.BudgetExceeded.Jobs == 0 || tot.BudgetExceeded.MaxBytes <= 1<<10 {
					t.Errorf("--cache-budget 1KiB: %+v, want jobs past the budget", tot.BudgetExceeded)
				}
				if !strings.Contains(stderr.String(), "past --cache-budget 1.0 KiB") {
					t.Errorf("no message about the budget on standard error:\n%s", stderr.String())
				}
			default:
				if tot.BudgetEvictions != 0 || tot.BudgetExceeded.Jobs != 0 {
					t.Errorf("no budget, yet %d budget evictions, %+v", tot.BudgetEvictions, tot.BudgetExceeded)
				}
			}
			if !strings.Contains(stdout.String(), "peak RSS") || !strings.Contains(stdout.String(), "cache: the workers held at most") {
				t.Errorf("the summary lacks peak RSS or the cache line:\n%s", stdout.String())
			}
		})
	}
}
