//go:build !linux

package bench

import "fmt"

// roleForkWait: BenchmarkForkWait is Linux's alone.
func roleForkWait(string) int {
	fmt.Println("bench: BenchmarkForkWait needs Linux")
	return 2
}
