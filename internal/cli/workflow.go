package cli

import (
	"context"
	"io"
)

func runWorkflow(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return badInputf("poolrun run: not available yet")
}
