//go:build race

package scaffold_test

// raceEnabled shrinks the end-to-end tests under the race detector, which
// makes the connectivity loops some ten times slower.
const raceEnabled = true
