package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/execflow"
	"github.com/spf13/pflag"
)

// stdioFlags are the flags of poolrun run that say what becomes of what
// the commands print: tagged lines, or log files.
type stdioFlags struct {
	tag    bool
	logDir string
}

func (f *stdioFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&f.tag, "tag", false, "prefix each line a command prints with [JOB-ID] (default: on when jobs run in parallel, -j 2 or more, and standard error is a terminal; --tag=false turns it off)")
	fs.StringVar(&f.logDir, "log-dir", "", "write each job's standard output and error to `DIR`/JOB-ID.out and DIR/JOB-ID.err instead of printing them (DIR is made if need be)")
}

// stdio returns the execflow settings of the flags parsed by fs, for a
// pool of the given number of workers whose progress shows on stderr:
// --tag unless given is on when jobs run in parallel on a terminal. It
// makes the log folder (and its parents), mode 0777 less the umask, as
// mkdir -p does: call it once the workflow has been found good.
func (f *stdioFlags) stdio(fs *pflag.FlagSet, workers int, stderr io.Writer) (execflow.Stdio, error) {
	st := execflow.Stdio{Tag: f.tag}
	if !fs.Changed("tag") {
		st.Tag = workers > 1 && isTerminal(stderr)
	}
	if f.logDir != "" {
		dir, err := filepath.Abs(f.logDir)
		if err == nil {
			err = os.MkdirAll(dir, 0o777)
		}
		if err != nil {
			return st, badInputf("poolrun run: --log-dir %s: %v", f.logDir, err)
		}
		st.LogDir = dir
	}
	return st, nil
}

// workerOutput routes what the workers print, for session s: above its
// progress bar while that is up, else to stdout and stderr.
func workerOutput(s *session, stdout, stderr io.Writer) engine.Option {
	outw, errw := newCommandOutput(s, stdout, stderr)
	return engine.WorkerOutput(outw, errw)
}

// printLogDir says, after a run, where the log files are.
func printLogDir(w io.Writer, out execflow.Stdio) {
	if out.LogDir != "" {
		fmt.Fprintf(w, "logs: %s (each job's output in JOB-ID.out and JOB-ID.err)\n", out.LogDir)
	}
}
