package procmem

import (
	"runtime"
	"testing"
)

// TestPeakRSS: the peak grows past a large allocation that was touched,
// and never falls.
func TestPeakRSS(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("VmHWM is Linux's")
	}
	before := PeakRSS()
	if before <= 0 {
		t.Fatalf("PeakRSS() = %d", before)
	}
	b := make([]byte, 64<<20)
	for i := range b {
		b[i] = 1
	}
	after := PeakRSS()
	runtime.KeepAlive(b)
	if after < before+48<<20 {
		t.Errorf("PeakRSS %d before touching 64 MiB, %d after", before, after)
	}
	if again := PeakRSS(); again < after {
		t.Errorf("PeakRSS fell from %d to %d", after, again)
	}
}
