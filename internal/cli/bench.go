package cli

import (
	"context"
	"io"
)

// runBench is "poolrun bench" (issue 6, in progress).
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return badInputf("poolrun bench: not available yet")
}
