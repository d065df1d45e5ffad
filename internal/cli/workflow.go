package cli

import (
	"context"
	"errors"
	"io"

)

const runUsage = `Usage: poolrun run [flags] FILE

Runs the jobs of a YAML workflow FILE on a pool of worker processes. A job
runs a shell command (sh -c) once the jobs it comes after have succeeded.
An item is an artefact (a file or folder) that its own command builds, once
per worker that needs it, in that worker's private scratch folder (on a
memory file system where there is one); a job that needs item "ref" finds
its path in $POOLRUN_ITEM_REF. The artefact is deleted the moment no
unfinished job needs the item any more.

  items:
    ref:                          # item name -> how to build it
      run: zcat data/ref.gz > "$POOLRUN_ITEM"
  jobs:
    - id: split
      run: ./split input
    - id: align-${i}
      foreach: {i: 1..4}          # one job per value: align-1 ... align-4
      run: ./align --ref "$POOLRUN_ITEM_REF" part-${i}
      needs: [ref]
      after: [split]
    - id: merge
      run: ./merge part-*.out
      after: ["align-*"]          # globs over job ids

The workflow is checked before anything runs: an unknown field, a duplicate
id, an unknown dependency or item, a dependency cycle, a bad foreach or a
YAML error is reported as FILE:LINE: what is wrong (exit status 2). A
command that exits non-zero fails its job (exit status 1 at the end), with
its exit status and the last lines of its standard error in the messages
and the report; the other jobs go on unless --fail-fast. Commands inherit
poolrun's environment and working folder, plus $POOLRUN_JOB (the job id).

Example:
  poolrun run -j 4 --report report.json examples/pipeline.yaml
`

func runWorkflow(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f poolFlags
	fs := newFlagSet("run", runUsage, stderr)
	f.register(fs)
	if err := parseFlags(fs, args, stdout); err != nil {
		if errors.Is(err, errHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return badInputf("poolrun run: want one workflow file, got %d arguments", fs.NArg())
	}
	if err := f.check(); err != nil {
		return err
	}
	return badInputf("poolrun run: %s: running workflows is not built yet", fs.Arg(0))
}

