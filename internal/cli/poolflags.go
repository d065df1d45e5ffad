package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/spf13/pflag"
)

// poolFlags are the flags every command that runs a pool takes.
type poolFlags struct {
	jobs        int
	serial      bool
	failFast    bool
	capacity    int
	quiet       bool
	report      string
	retries     int
	timeout     time.Duration
	cache       cacheFlags
	listen      string // address of the pool's server for remote workers; "" none
	joinFile    string
	joinTimeout time.Duration
	tlsCert     string // with --listen: the server's own certificate and key
	tlsKey      string
}

// register registers the flags of a command that runs one pool: -j,
// --serial, the common ones and the cache flags.
func (f *poolFlags) register(fs *pflag.FlagSet) {
	fs.IntVarP(&f.jobs, "jobs", "j", runtime.NumCPU(), fmt.Sprintf("run `N` worker processes, 0 to %d, at most the number of jobs (0: as --serial)", maxWorkers))
	fs.BoolVar(&f.serial, "serial", false, "run the jobs one by one in this process (same results, no workers; same as -j 0)")
	fs.StringVar(&f.listen, "listen", "", "let workers join from elsewhere (poolrun worker) through a server on `HOST:PORT` (poolrun-hub, found beside poolrun, on PATH or as $POOLRUN_HUB; TLS, with the pool's own certificates, unless on loopback); needs --join-file. Output folders must be on storage every host sees, at the same path: a worker that cannot write there is refused")
	fs.StringVar(&f.joinFile, "join-file", "", "with --listen: write what a worker needs to join (address, credential, TLS trust, output folders) to `FILE`, mode 0600")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "with --listen: the server presents the certificate of `FILE` (PEM, then any intermediates; it must cover the --listen host), over TLS even on loopback, instead of one made for the pool; the join file carries it for the workers to trust")
	fs.StringVar(&f.tlsKey, "tls-key", "", "with --tls-cert: the certificate's private key, `FILE` (PEM)")
	f.joinTimeout = 2 * time.Minute
	fs.Var((*durationFlag)(&f.joinTimeout), "join-timeout", "with --listen and -j 0 (no local worker): give up when no worker has been there for `D`")
	f.registerCommon(fs)
	f.cache.register(fs)
}

// registerCommon registers the flags that every command running pools
// takes. poolrun bench takes only these, and sets the worker counts and the
// cache options itself, per run.
func (f *poolFlags) registerCommon(fs *pflag.FlagSet) {
	fs.BoolVar(&f.failFast, "fail-fast", false, "stop at the first failed job: start no other job")
	fs.IntVar(&f.capacity, "capacity", 1000, fmt.Sprintf("give the window of required items `N` slots, 1 to %d (more items than slots: workers keep everything)", maxCapacity))
	fs.BoolVar(&f.quiet, "quiet", false, "print no progress and no summary table")
	fs.StringVar(&f.report, "report", "", "write a JSON report of every job and worker to `FILE`")
	fs.IntVar(&f.retries, "retries", 0, fmt.Sprintf("run a job again, up to `N` more times (0 to %d), when its worker dies under it; a job that fails is not retried", maxRetries))
	fs.Var((*durationFlag)(&f.timeout), "timeout", "fail a job that runs longer than `D` (a duration: 90s, 10m, 1h30m; 0: no limit); its worker is replaced if it does not stop within 5s")
}

// durationFlag is a flag of type time.Duration whose error says what a
// duration looks like.
type durationFlag time.Duration

func (d *durationFlag) String() string { return time.Duration(*d).String() }

func (d *durationFlag) Type() string { return "duration" }

func (d *durationFlag) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("want a duration with its unit, such as 90s, 10m or 1h30m")
	}
	*d = durationFlag(v)
	return nil
}

// maxRetries bounds --retries: a job that kills its worker more often than
// that is not worth running again.
const maxRetries = 100

// maxWorkers bounds -j (and bench's worker counts): each worker is a
// process with a Go runtime of its own, about 10 MiB before any item, so
// that a mistyped -j 100000 would start a process per job of a large
// workflow.
const maxWorkers = 4096

// maxCapacity is the most slots a window may have: the maximum of package
// shm (its maxCapacity), which refuses larger windows when the pool starts.
const maxCapacity = 1 << 24

// check checks the flags that register registers. -j 0 means serial, as
// --serial does, so the two together agree.
func (f *poolFlags) check() error {
	if f.jobs < 0 || f.jobs > maxWorkers {
		return badInputf("poolrun: -j %d: want a number of workers from 1 to %d (or 0: serial, as --serial)", f.jobs, maxWorkers)
	}
	if err := checkListen(f.listen, f.joinFile); err != nil {
		return err
	}
	if err := checkTLSFlags(f.listen, f.tlsCert, f.tlsKey); err != nil {
		return err
	}
	if err := f.checkCommon(); err != nil {
		return err
	}
	if f.joinFile == "" {
		return nil
	}
	return checkOwnFile("poolrun: --join-file", f.joinFile,
		keptFile{"the --report", f.report}, keptFile{"the --tls-cert", f.tlsCert}, keptFile{"the --tls-key", f.tlsKey})
}

// checkCommon checks the flags that registerCommon registers: the
// capacity's range, and that the report can be written where it is asked
// for (see checkReportPath), so that a mistyped path or a folder that
// cannot be written is refused before the pool runs rather than after.
func (f *poolFlags) checkCommon() error {
	if f.capacity < 1 || f.capacity > maxCapacity {
		return badInputf("poolrun: --capacity %d: want a number of slots from 1 to %d", f.capacity, maxCapacity)
	}
	if f.retries < 0 || f.retries > maxRetries {
		return badInputf("poolrun: --retries %d: want a number of retries from 0 to %d", f.retries, maxRetries)
	}
	if f.timeout < 0 {
		return badInputf("poolrun: --timeout %v: want a duration of 0 (no limit) or more", f.timeout)
	}
	if f.report != "" {
		return checkReportPath(f.report)
	}
	return nil
}

// checkReportPath refuses a --report path that could not be written when
// the pool has run: one whose folder is missing or not a folder, one that
// is a folder, one that is not poolrun's to replace (checkOwnFile), and
// one in whose folder no file can be made (a read-only folder or file
// system, a name too long). The last is tried for real: a
// file of the shape of the temporary file that the report is written
// through (see writeReport) is made in the folder and removed, since
// asking access(2) would tell root yes where the write then fails.
func checkReportPath(path string) error {
	dir := filepath.Dir(path)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return badInputf("poolrun: --report %s: no folder %s to write it in", path, dir)
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return badInputf("poolrun: --report %s: is a folder; want a file name", path)
	}
	if err := checkOwnFile("poolrun: --report", path); err != nil {
		return err
	}
	probe, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the probe's name would only confuse
		}
		return badInputf("poolrun: --report %s: cannot write a file in %s: %v", path, dir, err)
	}
	probe.Close()
	if err := os.Remove(probe.Name()); err != nil {
		return fmt.Errorf("poolrun: --report %s: %w", path, err)
	}
	return nil
}

// capWorkers lowers -j to n, the number of jobs queued before the pool
// starts: the pool never runs more workers than it has jobs (it starts
// them as jobs need them, see engine.Workers), and the report and the
// progress display then say how many it could run. n < 1 changes
// nothing.
func (f *poolFlags) capWorkers(n int) {
	if n >= 1 && f.jobs > n {
		f.jobs = n
	}
}

// workers is the number of worker processes: 0 for serial (--serial or
// -j 0).
func (f *poolFlags) workers() int {
	if f.serial {
		return 0
	}
	return f.jobs
}
