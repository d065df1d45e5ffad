//go:build !race

package scaffold_test

const raceEnabled = false
