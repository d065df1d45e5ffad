package cli

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

// gogc returns the garbage collector's target, in percent.
func gogc() uint64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestLessGC: lessGC raises the collector's target to runGCPercent until
// the first collection, after which the target is what it was; with GOGC
// set, it changes nothing.
func TestLessGC(t *testing.T) {
	// A run of an earlier test may have raised the target: a collection
	// puts it back.
	for deadline := time.Now().Add(10 * time.Second); lessGCPending.Load(); {
		if time.Now().After(deadline) {
			t.Fatal("an earlier lessGC was not undone 10 s after a collection")
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	if v, ok := os.LookupEnv("GOGC"); ok {
		os.Unsetenv("GOGC")
		defer os.Setenv("GOGC", v)
	}
	lessGC()
	if got := gogc(); got != runGCPercent {
		t.Fatalf("after lessGC the target is %d%%, want %d%%", got, runGCPercent)
	}
	lessGC() // raised already: it must not put back 400% after the collection
	runtime.GC()
	deadline := time.Now().Add(10 * time.Second)
	for gogc() != 100 {
		if time.Now().After(deadline) {
			t.Fatalf("the target is still %d%% 10 s after a collection, want 100%%", gogc())
		}
		time.Sleep(time.Millisecond)
	}
	for lessGCPending.Load() {
		time.Sleep(time.Millisecond)
	}
	if got := gogc(); got != 100 {
		t.Fatalf("after the collection the target is %d%%, want 100%%", got)
	}

	t.Setenv("GOGC", "100")
	debug.SetGCPercent(150)
	lessGC()
	if got := gogc(); got != 150 {
		t.Errorf("with GOGC set, lessGC changed the target to %d%%", got)
	}
}
