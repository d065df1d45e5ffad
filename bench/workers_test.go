package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// persistentJobs returns how many inputs BenchmarkPersistentWorkers
// scores: a handful under -short, so that CI's smoke run only checks
// that it works.
func persistentJobs() int {
	if testing.Short() {
		return 4
	}
	return 100
}

// BenchmarkPersistentWorkers runs examples/python as it is, at -j 2: N
// inputs (persistentJobs) scored by a Python tool that takes 0.5 s to
// start and 0.3 s to load its reference, as a persistent worker program
// (score.yaml) and as one process per input (commands.yaml), one after
// the other in every op (which goes first alternates), each in a fresh
// copy of the folder. It reports the wall time of each and their ratio,
// the worker program's over the commands'. poolrun is the command built
// from this tree (poolrunCommand). Skipped where python3 is not
// installed.
func BenchmarkPersistentWorkers(b *testing.B) {
	if _, err := exec.LookPath("python3"); err != nil {
		b.Skip("python3 is not installed")
	}
	src, err := filepath.Abs(filepath.Join("..", "examples", "python"))
	if err != nil {
		b.Fatal(err)
	}
	module, err := filepath.Abs(filepath.Join("..", "python"))
	if err != nil {
		b.Fatal(err)
	}
	n := persistentJobs()
	files := []string{"score.yaml", "commands.yaml"}
	var wall [2]time.Duration
	b.ResetTimer()
	for i := range b.N {
		for k := range files {
			k = (k + i) % len(files)
			b.StopTimer()
			dir := b.TempDir()
			for _, f := range []string{"score.py", files[k]} {
				data, err := os.ReadFile(filepath.Join(src, f))
				if err != nil {
					b.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
					b.Fatal(err)
				}
			}
			cmd := poolrunCommand(b, "run", "-j", "2", "--set", "n="+strconv.Itoa(n), files[k])
			cmd.Dir = dir
			cmd.Env = append(cmd.Environ(), "PYTHONPATH="+module)
			b.StartTimer()
			start := time.Now()
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("%s: %v\n%s", files[k], err, out)
			}
			wall[k] += time.Since(start)
			b.StopTimer()
			if _, err := os.Stat(filepath.Join(dir, "out", strconv.Itoa(n)+".txt")); err != nil {
				b.Fatalf("%s: %v", files[k], err)
			}
			b.StartTimer()
		}
	}
	b.ReportMetric(wall[0].Seconds()/float64(b.N), "worker-s")
	b.ReportMetric(wall[1].Seconds()/float64(b.N), "commands-s")
	b.ReportMetric(wall[0].Seconds()/wall[1].Seconds(), "wall-ratio")
}
