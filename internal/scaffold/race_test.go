//go:build race

package scaffold

// raceEnabled shrinks the end-to-end tests under the race detector, which
// makes the connectivity loops some ten times slower.
const raceEnabled = true
