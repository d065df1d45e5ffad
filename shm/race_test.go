//go:build race

package shm_test

// raceEnabled: the race detector slows every atomic access tenfold, so
// rates measured under it say nothing about the code.
const raceEnabled = true
