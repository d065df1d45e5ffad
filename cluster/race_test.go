//go:build race

package cluster_test

// raceEnabled: the tests run under the race detector.
const raceEnabled = true
