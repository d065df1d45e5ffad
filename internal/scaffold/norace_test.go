//go:build !race

package scaffold

const raceEnabled = false
