// Package execflow runs a parsed workflow file (package
// github.com/poolrun/poolrun/internal/workflow) on an engine pool: each job
// of the file becomes a job of the pool that runs its command with
// /bin/sh -c, and each item of the file becomes a cache item whose value is
// a file or folder that the item's command builds in the worker's scratch
// folder.
//
// # Jobs
//
// [Queue] queues every job of a workflow on a pool, in the workflow's order,
// as a call of the one registered function named funcName. A job's after
// list becomes engine.After and its needs list engine.Needs with the item
// handles, so that the pool's window lists an item while an unfinished job
// needs it. Each job carries the label [LabelID] with its workflow id.
//
// In the worker, the job first gets every item it needs (building those the
// worker does not hold yet, see below), then runs its command:
//
//   - with /bin/sh -c, in [Options.Dir], stdin from /dev/null; or, like
//     make, directly (without the shell's start, which costs as much as a
//     short command's) when it is made of plain words: letters, digits
//     and _-./,:=+@% only, separated by blanks, its first word neither an
//     assignment nor one of the shell's reserved words and built-ins (echo
//     and pwd among them). The shell would only split such a command into
//     its words and execute the first, found on the command's PATH; one
//     that cannot be started so (not found, not executable, a script
//     without #!) goes to /bin/sh -c after all, which says why with its
//     exit status (127, 126);
//   - with the worker's environment (which is poolrun's) less every
//     variable whose name begins with envPrefix (the engine's worker
//     marker, engine.WorkerEnv, and whatever an outer poolrun set), plus
//     [Options.Env], plus POOLRUN_JOB=<id>, POOLRUN_THREADS=<threads:, 1
//     without>, POOLRUN_ATTEMPT=<the run, from 1: engine.JobAttempt> and
//     POOLRUN_RES_<NAME>=<amount> for each of its resources:
//     ([workflow.ResourceEnv]), plus POOLRUN_ITEM_<NAME>=<path>
//     for every item it needs ([workflow.EnvName]), plus the mark
//     [OwnerEnv]: the tags (pid and start time) of the pool's process and
//     of the worker, after the mark the pool's process bears itself when
//     a command of an outer poolrun started it; what the command starts
//     inherits it;
//   - in a process group of its own; the command (the shell, or the
//     program executed directly) is killed with SIGKILL if
//     the worker process dies (Linux' parent-death signal), and the pool's
//     process then kills every process that bears the dead worker's mark
//     ([ScratchCleanup]). When the workers are goroutines of the pool's
//     process (serial mode, engine.InProcess: poolrun run), the command
//     dies with that process, and a [Janitor] kills what bears the
//     pool's mark;
//   - started with syscall.ForkExec by the goroutine of the job, which
//     waits for its exit in waitid (wait4 elsewhere than on Linux), and
//     stops it through context.AfterFunc when the job's context ends; its
//     output pipes are copied by a goroutine each, which waits in the
//     runtime's network poller (command.go, exit_linux.go);
//   - with no descriptor of the worker's but its standard output (the
//     worker marks the descriptors the engine gives it close-on-exec, and
//     Go opens every other one so), so that nothing a command leaves behind
//     can hold the worker's pipes or write into its protocol;
//   - its standard output and standard error go where [Options.Stdio]
//     says: through the engine's job output (engine.JobOutput: in a worker
//     process, the worker's own, which the pool's process passes on to
//     its engine.WorkerOutput writers in whole lines), each line prefixed
//     with the job's id when Stdio.Tag is set, or to the job's own files
//     in Stdio.LogDir; the lines of commands that run at once interleave,
//     each whole. With Stdio.Echo the command itself comes first, on the
//     job output, its lines after "[ID] ". The last [Options.TailLines] lines of its standard error
//     are kept for the [Result] or the error.
//
// A command that exits with a non-zero status, or is killed by a signal,
// fails its job with a *commandError. A job's error reaches the pool's
// process as an *engine.RemoteError that holds only its message (in serial
// mode too: the engine sends it the same way); asCommandError turns it
// back into a commandError.
//
// # Retries
//
// A job with retries (workflow.Job.Retries, else [Options.Retries]) is
// queued with engine.JobRetries and engine.RetryFailures: a run that
// fails (its command exits non-zero or is killed, an output is missing,
// an item cannot be built, or the run passes its timeout, which bounds
// each run) goes back to the pool's queue, after the job's retry_delay,
// and runs again on whichever worker takes it, as does a run whose worker
// died; the job fails when its retries are spent. A run is never retried
// once the pool is interrupted, the job cancelled, or fail-fast has
// stopped the pool. The retry loop is the engine's, not a loop in the
// worker: the pool's process sees every run (events, engine.Job.Attempts,
// the report), a run's timeout is the engine's, fail-fast and
// interruptions stop the retries there, and a retried job does not hold
// a worker while it waits for its delay. Each failed run removes what
// its command wrote of the outputs before the next run starts (see
// "Outputs of a failed job"). [FailureOf] reads the exit status, signal
// and standard error's tail back from a run's error.
//
// # Resources
//
// A job's threads and mem (workflow.Job.Threads, Mem) become
// engine.JobResources (slots and bytes): a pool with an engine.Capacity
// runs at once only the jobs that fit in it (poolrun run: -j slots and
// --mem bytes).
//
// # Stopping
//
// When the job's context ends (the pool is interrupted, the job passes
// its timeout, or the worker is told to stop), the command's whole
// process group gets SIGTERM, and SIGKILL killGrace later if any process
// of the group is still there. When the shell ends on its own, processes
// it left running in its group get the same treatment: SIGTERM, then
// SIGKILL after killGrace.
//
// A process that left the group (setsid, or a group of its own) still
// bears the command's owner in its [OwnerEnv] mark, which numbers each
// command of a worker: once the group is gone, such processes are killed
// with SIGKILL, found in /proc, an item's command's too. A look through
// /proc reads the environment of every process of the host, so the looks
// are shared: one begins at a command's end unless one began less than a
// second ago; the next then begins a second after that one, for every
// command that ended meanwhile. So a job's processes are gone when its
// result is known, or at most a second later when commands end faster
// than that; [Janitor.Close], at the end of a pool whose commands run in
// its own process (poolrun run), kills at once what is left.
//
// [Suspend] stops (SIGSTOP) every process of a pool's work (its workers'
// process groups and every process that bears the pool's mark), and
// continues them later: the other half of a terminal's Ctrl-Z, which
// reaches the pool's process alone.
//
// # Skipping what is done
//
// A job's inputs and outputs (workflow.Job's Inputs and Outputs: paths and
// patterns relative to the workflow's working folder, workflow.Workflow's
// Dir, whatever [Options.Dir] is; poolrun run gives that folder as
// Options.Dir too) make a run incremental, as make's. [NewPlan] decides,
// before anything runs and in the workflow's order, which jobs run and why
// ([Decision], [Reason]), and which are skipped: those that the state file
// records as the makers of their outputs, whose outputs all exist, none
// older than their inputs or than the outputs of the jobs they run after,
// whose command is the one that made their outputs, whose input patterns
// match the files they matched when the job last ran ([MatchedInputs]),
// and that run after no job that runs. A job without outputs always
// runs, and [PlanOptions.Force] names jobs that run whatever their files
// say. NewPlan fails ([errNoSource]) when an input that no job makes
// (workflow.Job.Sources) does not exist, unless its job runs after one
// without outputs, which may make anything.
// [Plan.WriteText] and [Plan.WriteDot] show a plan; [Queue] with
// [Options.Plan] queues the jobs it skips with engine.Skip, so that they
// end Skipped, need no item, and let the jobs after them run.
//
// The commands that made the outputs are known from the workflow's state
// file, stateFile: ".NAME.poolrun-state" beside the workflow file NAME, a
// small JSON file that maps each job id to a hash of its command, says
// whether its outputs are done, and lists the files it made that its
// output patterns match ([Result.Outputs]). A job's outputs are its
// output paths and those files, never whatever else a pattern matches: a
// job the file does not record as their maker runs ([NotMade]), so a
// job that never ran is never done, and a file beside its outputs that
// it did not make is neither its output nor removed. [Plan.Begin], before anything runs,
// records every job with outputs that the plan runs as started; the pool
// option [Plan.Recorder] records each as done once it succeeds, or as
// failed, while the run goes on; [Plan.Save] writes what the run made once
// it ended. So a job is done only once it succeeded: after a run that was
// cut off (kill -9, a power cut) or failed, the next plan runs the job
// again ([Incomplete], [LastFailed]) whatever the times of its outputs
// say. The file is written atomically (a temporary file in the same
// folder, synced, renamed, and the folder synced; mode 0666 less the
// umask). NewPlan reads it only when some job declares outputs and writes
// nothing; a job the file does not know is judged by the times of its
// files alone. [LockWorkflow] keeps a second run of the workflow from
// running while one does: both would write the state file and the
// outputs.
//
// # Outputs of a failed job
//
// A job's worker checks its declared outputs right after the command, in
// [Queue]'s registered function. Before the command it moves the job's
// last outputs aside (its output paths and the files the state file
// records as its own, unless its inputs name them too: a rename to
// .NAME.poolrun-aside in the same folder; one left there by a run that
// was cut off is put back first), makes the folders the outputs lie in,
// and notes what the outputs stand for (modification time, size, inode).
// The command thus starts from nothing, as a first run does. When the job
// succeeds, the last outputs are dropped and each output path that is a
// folder gets the time of the job's end; when it fails, they are put back
// once what the command wrote is removed. When the command
// exits 0, an output path where there is nothing, or a pattern that
// matches no file of the job's (one the command created or changed, or
// one the state file records as the job's), fails the job with an error
// that names it (errOutputNotWritten); an output that is as it was is
// made (cp -p, a make with nothing to do). The files of the job's that
// its patterns match become [Result.Outputs]. When the command fails, is
// killed, or is stopped because the job was cancelled, timed out or the
// pool was interrupted, or when an output is missing, the worker removes
// what the command wrote of the outputs (make's .DELETE_ON_ERROR): every
// file at an output path or recorded as the job's that was not there
// before or has changed since, every other file a pattern matches that
// was not there before, and every folder that was not there before, with
// what it holds; a file as it was, a folder that was there, and a file
// that was there before and is not the job's stay, whatever happened to
// it (a user who saved a source that the pattern matches keeps the
// edit). The job's error then ends with a line that names what was
// removed ([RemovedLine] finds it). A job that the pool's interruption
// stops is Aborted before its run returns, and the pool drops the error
// that the run returns then: for a run in the pool's own process (its
// workers goroutines of it), [Interrupted] gives that line. Doing it in
// the worker means that a job is never seen Failed with what it
// half-wrote still there, and that the check can fail the job, which the
// pool's process, learning of the job's end after its dependents may
// have started, could not. A worker that dies under its job cannot clean
// up, and nobody else knows what it wrote: its outputs are left, and the
// state file says the job failed. Outputs lie inside the workflow's
// working folder, also once symbolic links are followed (package
// workflow refuses others, and the worker neither takes for an output
// nor removes a file whose folder resolves elsewhere), and the workflow
// file, its state file, the working folder and the folders above them
// are never removed. [Prepare] refuses outputs that could match a job's
// log file in [Stdio.LogDir].
//
// # Items
//
// An item's command builds the artefact at the path in $POOLRUN_ITEM, a name
// that does not exist yet in the worker process's scratch folder. Its build
// fails if the command fails or exits 0 without creating anything at the
// path (errNoArtefact). The artefact is deleted (os.RemoveAll) when the
// worker evicts the item, that is when no unfinished job of the pool needs
// it any more (exactly as in-memory items are freed), or when the worker
// ends. The item's size in the cache statistics is the total size of the
// artefact's files: on a memory file system, the memory it holds.
//
// The items are members of one cachepool family (prefix itemPrefix) named
// itemPrefix + ":" + item name + "@" + 16 hexadecimal digits that hash
// everything the build depends on (its name and command, its place in the
// workflow file, the folder, the extra environment, the scratch root, the
// number of standard error lines kept). A job's argument carries
// these parameters, so a worker names, keys and builds exactly the item the
// parent put in the window. [ItemHandles] returns the handles, for reports.
//
// # Worker programs
//
// A program of the workflow's workers (workflow.Worker) is a cache item
// of each worker that runs one of its jobs, a member of the family
// programPrefix (program.go): its build starts the program, its cleanup
// ends it, so that it lives while some unfinished job of the pool needs
// it, as any item does, and each of its jobs needs it. Its command line
// gets --persistent_worker, and it starts as a command does (directly or
// with /bin/sh -c, in a process group of its own, with the parent-death
// signal and the [OwnerEnv] mark) with the environment of a command, less
// the job's own variables, plus its env, POOLRUN_PROGRAM (its name),
// POOLRUN_PROGRAM_ITEMS (the items it holds, NAME=KEY with the key in 16
// hexadecimal digits, separated by commas) and, where the worker reads a
// window, POOLRUN_WINDOW_FD=3 with the window's file on descriptor 3
// (engine.JobWindow). Its standard error goes where a command's does,
// tagged "[worker NAME] ", or to worker-NAME.log in Stdio.LogDir.
//
// A job of the program is a request in Bazel's JSON worker protocol, one
// line each way: its args, requestId 0, and a field poolrun with its id,
// attempt and the items it needs that the program holds. The response's
// exit code is the job's; its output is the job's output, as a command's
// standard output is, and the tail of it is kept when it failed. A job's
// peak memory is the program's (VmHWM) after the request. A program that
// ends during a request, or answers what is not a response, fails the
// job (with its exit status or signal, and its standard error's tail)
// and is ended; one that exited between requests is started again by the
// next job. The cleanup closes the program's input and waits for its exit
// for programGrace, then sends its group SIGTERM, and SIGKILL
// programGrace later (at once, and killGrace later, for a program in the
// middle of a request: the job's context ended, or it answered garbage).
//
// The items a program holds are workflow items whose build and cleanup do
// nothing: the pool's window lists them while a job needs them, as it
// lists any item, and the program reads the window and frees them itself
// (python/poolrun.py, in the repository).
//
// # Scratch folders
//
// Each process that builds items (a worker, or the parent in serial mode
// and with in-process workers) makes a private scratch folder, mode 0700, named poolrun-<pid>-<random>
// under the scratch root ([Options.Scratch], by default [DefaultScratch]),
// and first writes into it a marker file that names the process.
// The folder exists while it holds an artefact or a build is in progress:
// the cleanup of the last artefact removes it too (a later build makes a new
// one). So a worker that ends normally, or is told to stop, leaves nothing
// behind. A process killed with SIGKILL cannot clean up: the pool's
// process removes the folder of a worker that dies the moment it learns of
// the death, when the pool was made with [ScratchCleanup]; and
// [SweepScratch] removes the folders of processes that no longer exist,
// poolrun's own temporary folders ([MakeTempDir]) included, and only
// folders that hold poolrun's marker (never one that merely has such a
// name); poolrun calls it when it starts.
//
// A scratch folder is made under a random name with an exclusive create, so
// a name that exists already, a symbolic link planted there included, is
// never used; it is then opened without following links and made mode
// 0700 whatever the umask, and the marker is created in it exclusively,
// mode 0600. The artefacts are inside, where no other user can reach.
//
// # The janitor
//
// A pool whose commands run in its own process has no worker process to
// see it die: [StartJanitor] starts a janitor in a process group of its
// own, /bin/sh waiting on its standard input, a pipe whose write end the
// pool's process alone holds. When that process dies (killed with
// SIGKILL, say), the shell executes this same program with [JanitorEnv]
// set, which kills every process of this user's whose mark ([OwnerEnv])
// names the pool's process (by its pid and start time: a process that had
// the pid earlier is another), an inner run's commands included, and
// removes its scratch folders, its workflow's lock file and its join file
// ([Options.JoinFile]), then exits. A janitor that ends before the pool's
// process (killed, say) is replaced at once by another, and the pool's
// process says so on its standard error. [Janitor.Close], once the pool
// has run, kills what the pool's commands left outside their process
// groups that is still to be killed (see "Stopping") and dismisses the
// janitor, which exits doing nothing. A program that starts a
// janitor must call [Init] early in main (and in TestMain of a test binary
// that plays it), right after engine.Init: in the janitor it does the
// janitor's work and exits; elsewhere it returns at once. The janitor
// refuses to run when its standard input is not a pipe (started by hand).
// It does not bear the mark that its pool's process inherited from an
// outer run: when that run's janitor ends the inner run, the inner run's
// janitor is left to remove the inner run's scratch folders.
//
// # Caveats
//
//   - A process that a command starts in a new process group or session
//     is killed by its mark once the command has ended, with SIGKILL and
//     without the group's SIGTERM and grace, and up to a second after
//     the command's end when commands end faster than that (see
//     "Stopping"): a worker process that exits within that second (at its
//     pool's end) leaves it running. One that drops [OwnerEnv] from its
//     environment, or changes its real user id (su, setuid(2)), escapes
//     that, the end of a dead worker's processes, the janitor and
//     [Suspend].
//   - Where the kernel has no pidfds (before Linux 5.3), a process found
//     by its mark is signalled by its pid once its start time was checked
//     again: should it end and its pid be taken between the check and the
//     signal, the newcomer gets the signal.
//   - A process killed with SIGKILL before it could start its janitor,
//     or right after its janitor, before it could start another, leaves
//     what its commands started, and its scratch folders until the next
//     [SweepScratch].
//   - A worker whose parent dies is sent SIGTERM by the engine and stops
//     its commands as above. A worker stopped (SIGSTOP, Ctrl-Z) when its
//     parent is killed with SIGKILL stays stopped, with its commands, until
//     it is continued; then it ends.
//   - Standard output and error of parallel jobs interleave.
package execflow
