// Package workflow reads poolrun workflow files: YAML descriptions of shell
// commands to run as a graph of jobs, and of the per-worker artefacts
// ("items") that those jobs need.
//
// [Parse] and [Load] ([ParseWith] and [LoadWith] with variables from the
// command line) check a whole file before anything runs and return
// either a [Workflow] whose jobs are fully expanded and resolved, or an
// [*Errors] that lists every mistake found (up to [MaxErrors]), each an
// [*Error] of the form "FILE:LINE: what is wrong". This package only reads
// files; running them is the business of the engine and of package
// github.com/poolrun/poolrun/internal/execflow.
//
// # A workflow file
//
//	items:
//	  ref:                                # item name
//	    run: zcat data/ref.gz > "$POOLRUN_ITEM"
//	jobs:
//	  - id: split
//	    run: ./split input
//	  - id: align-${i}
//	    foreach: {i: 1..8}
//	    run: ./align --ref "$POOLRUN_ITEM_REF" --chunk ${i}
//	    needs: [ref]
//	    after: [split]
//	  - id: merge
//	    run: ./merge
//	    after: [align-*]
//
// The top level is a mapping with these fields, and no others:
//
//   - jobs (required): a list of job entries, at least one.
//   - items (optional): a mapping from item name to item.
//   - vars (optional): a mapping from variable name to value, a string;
//     see "Variables" below.
//   - workdir (optional): the workflow's working folder, where the
//     commands run and against which inputs, outputs and foreach globs
//     are read: a folder relative to the workflow file's, or absolute,
//     that must exist (${NAME} of vars expands in it). Without it, the
//     workflow file's folder. It becomes [Workflow.Dir].
//   - workers (optional): the persistent worker programs, a mapping from
//     program name (valid as an item name is) to a program; see "Worker
//     programs" below. It becomes [Workflow.Workers].
//   - resources (optional): the limits of named resources, a mapping from
//     name to the most of it that running jobs take together, a whole
//     number 0 or more (resources: {gpu: 2, licence: 1}), into
//     [Workflow.Resources]; poolrun run's --resources wins, name by name.
//     A resource that a job takes and that has a limit nowhere is not
//     counted: it has no limit (as in Snakemake). threads and mem are not
//     named resources: their limits are -j and --mem.
//
// An item has one field: run, or worker (see "Worker programs"). run is a
// command for sh -c that builds the item at
// the path in $POOLRUN_ITEM (the constant [ItemEnv]). A worker runs it the
// first time one of its jobs needs the item and deletes the file when no
// unfinished job needs it any more. Item names start with a letter or a
// digit and go on with letters, digits, '_', '-' and '.'. A job that needs
// item NAME finds its path in the environment variable [EnvName](NAME):
// POOLRUN_ITEM_ followed by NAME in upper case with every character other
// than A-Z and 0-9 replaced by '_' (item "ref-2" is $POOLRUN_ITEM_REF_2).
// Two items whose names give the same variable are refused.
//
// A job entry has these fields, and no others:
//
//   - id (required): the job's name. After foreach substitution it is made
//     of ASCII letters, digits and the characters _ - . / : + = @, so that it can
//     never be mistaken for a pattern in after. Ids are unique.
//   - run: a command for sh -c. A job has run, or worker and args:
//   - worker: the name of a program of workers that the job is a request
//     to, into [Job.Worker], and args: the request's arguments, a list of
//     strings (empty ones allowed) in which ${...} is substituted as it
//     stands, unquoted, into [Job.Args]. See "Worker programs".
//   - after: job ids, or patterns with *, ? and [...] as in [path.Match],
//     that must succeed before this job runs. A pattern is matched against
//     every job id of the file (after foreach expansion) except the job's
//     own, and must match at least one. A plain id must exist.
//   - needs: names of items that the job uses.
//   - inputs: files the job reads, and outputs: files it writes; see
//     "Inputs and outputs" below.
//   - foreach: expands the entry into several jobs; see below.
//   - timeout: how long the job's command may run, as a duration of Go's
//     [time.ParseDuration] with a unit: 90s, 2m, 1h30m, 500ms. It must be
//     more than zero; every job of a foreach entry has the same. Parsed
//     into [Job.Timeout] (0 when the field is absent: no limit of the
//     job's own); running the workflow enforces it. There is no default
//     for all jobs in the file.
//   - retries: how many more times to run the job's command when it fails
//     (exits non-zero, or passes its timeout, which then bounds each run)
//     or its worker dies: a whole number from 0 to [MaxRetries], into
//     [Job.Retries] (nil when absent: poolrun run's --retries then says;
//     retries: 0 keeps a job from being retried whatever --retries says).
//   - retry_delay: how long to wait before each new run, a duration as for
//     timeout, more than zero, into [Job.RetryDelay].
//   - threads: the threads the command uses, 1 to [MaxThreads], into
//     [Job.Threads]: poolrun run counts them against -j (default 1).
//   - mem: the memory the command uses, a size (see [ParseSize]: 512M, 2G,
//     1.5GiB; units are powers of 1024), into [Job.Mem]: poolrun run
//     counts it against --mem.
//   - resources: what the command takes of named resources, a mapping
//     from name to a whole number 0 or more (resources: {gpu: 1}), into
//     [Job.Resources]: poolrun run counts each against its limit (see the
//     top level's resources), and the command finds the amount in
//     [ResourceEnv](NAME), $POOLRUN_RES_ then NAME in upper case
//     ($POOLRUN_RES_GPU). A name is a letter or _, then letters, digits
//     or _; two names that differ only in case are refused, and so are
//     threads and mem (the job's own fields).
//   - desc: a line of text that says what the entry's jobs do, into
//     [Job.Desc] as written (${...} is not substituted in it); poolrun run
//     --list shows it.
//
// after and needs take a list (after: [a, b]) or a single string (after: a).
// A job also runs after every job one of whose outputs is one of its
// inputs, without an after entry: see "Inferred dependencies".
// Quote a pattern that starts with * (after: ["*-merge"]): YAML reads *name
// as an alias. Duplicates are dropped. Dependencies must not form a cycle. The order of
// jobs in the file does not matter for dependencies: a job may run after one
// written below it.
//
// # Worker programs
//
//	workers:
//	  py:
//	    run: python3 score.py
//	    env: {MODEL_DIR: models}
//	items:
//	  model: {worker: py}
//	jobs:
//	  - id: score-${i}
//	    foreach: {i: 1..100}
//	    worker: py
//	    args: ["in/${i}.txt"]
//	    needs: [model]
//
// A program has run, its command line (${NAME} of vars substituted, as in
// an item's run), and, optionally, env: a mapping from variable name
// (letters, digits and _, not starting with a digit) to a string
// (${NAME} of vars substituted), sorted by name into [Worker.Env].
// Running the workflow starts the program on each worker that runs one
// of its jobs and sends it their requests (docs/WORKERS.md, in the
// repository, has the protocol). An item with worker: NAME instead of
// run is held in that program's memory: only jobs of that program may
// need it. A job with both run and worker, an item with both, args
// without worker, and a worker that workers does not define are errors.
//
// # foreach
//
// foreach maps variable names to values, and the entry is repeated once for
// every combination of values:
//
//	jobs:
//	  - id: chunk-${i}
//	    foreach: {i: 1..8}               # i = 1, 2, ..., 8
//	    run: ./work --chunk ${i}
//	  - id: sample-${s}-${k}
//	    foreach: {s: [a, b], k: 0..2}    # a-0 a-1 a-2 b-0 b-1 b-2
//	    run: ./sample ${s} ${k}
//	    after: [chunk-*]
//
// The values of a variable are a non-empty list of strings
// ([a, b, c]; numbers are taken as written), an inclusive integer range
// "A..B" with A <= B (negative ends allowed), or a glob of files. If either end of a range is
// written with a leading zero, every value is padded with zeros to the
// width of the wider end: 01..10 gives 01, 02, ..., 10, which keeps ids in
// order when sorted as text. With several variables the jobs come in the
// order of nested loops, the first variable outermost. There is no plain
// list form (foreach: [a, b]): every variable has a name. Variable names
// start with a lower-case letter and go on with lower-case letters, digits
// and '_'. A foreach variable may not have the name of a variable of vars
// or of [Options.Set]: that is an error, not a silent choice of one.
//
// A string with *, ? or [ is a glob, as inputs take them (see [Glob]),
// relative to the working folder (or absolute): there is one value per
// file or folder that it matches, its path as the glob gives it
// (data/a.csv), in lexical order. It is read when the workflow is read,
// before anything runs: it finds the files that exist then, not those
// that the jobs will make. A glob that matches nothing is an error.
// Quote it, as in the example below: YAML reads *name as an alias.
//
//	jobs:
//	  - id: count-${f.stem}
//	    foreach: {f: "data/*.csv"}     # f = data/a.csv, data/b.csv, ...
//	    run: wc -l < ${f} > out/${f.stem}.n
//	    inputs: ["${f}"]
//	    outputs: ["out/${f.stem}.n"]
//
// ${name.stem} is the base name of the value of name without its last
// extension (a for data/a.csv, x.tar for x.tar.gz; the whole base name
// when it has no other part, as .env), ${name.name} the base name (a.csv)
// and ${name.dir} the folder (data; . for a.csv): for every variable,
// not only a glob's. A range and a glob may use ${NAME} of vars
// (foreach: {i: "1..${n}"}); the values of a list are taken as written.
//
// ${name} is replaced by the variable's value in id, run, and every entry
// of after, needs, inputs and outputs (so after: ["split-${i}"] pairs jobs
// one to one). The value is not scanned again. In id, after, needs,
// inputs and outputs it is inserted as it is; in run it is quoted for the
// shell, so that it is text, never shell code: see "Values in run
// commands". Every foreach expansion must give distinct ids. YAML gives braces a
// meaning inside [ ] and { }: quote strings there that contain ${...}, as
// in after: ["split-${i}"], or write the list one entry per line.
//
// In run commands, and only there, the shell keeps what is its own:
//
//   - $name, ${NAME} (starting with an upper-case letter or '_', as
//     environment variables do: "${POOLRUN_ITEM_REF}") and other forms
//     such as ${name:-default} are left untouched for the shell.
//   - ${name}, with a lower-case name, is always a foreach variable: one the
//     entry does not define is an error, so that a typo does not silently
//     become an empty shell variable. Write $name, or $${name}, which reaches
//     the shell as ${name}, for a shell variable in braces.
//
// In id, after, needs, inputs and outputs, every ${...} must name a
// variable of the entry or of the workflow. The same rules apply to item
// commands, which see only the workflow's variables.
//
// # Values in run commands
//
// A value is text, never shell code: wherever ${name} stands in a run
// command (a job's or an item's), the command gets exactly the bytes of
// the value. poolrun quotes the value for the place where it stands:
//
//   - Unquoted (also inside $(...) and (...)), the value is one word, or
//     a part of one: as it is if it is made only of letters, digits and
//     _ - . / , : + @ (so that a command of plain words is still executed
//     without a shell), else in single quotes. An empty value is an
//     empty word.
//   - Inside "...", each \ $ ` and " of the value gets a backslash.
//   - Inside '...', each ' of the value closes the quote, is written \'
//     and opens it again.
//   - In a # comment, each line of the value stays in the comment.
//
// For example, with the value it's "$x".csv:
//
//	run: wc -l < ${f}      # wc -l < 'it'\''s "$x".csv'
//	run: wc -l < "${f}"    # wc -l < "it's \"\$x\".csv"
//	run: wc -l < '${f}'    # wc -l < 'it'\''s "$x".csv'
//
// So a file named $(rm x) is a name, and --set 'opts=-a -b' is one
// argument. For the rare value that is meant as shell text (options
// given with --set, part of a variable's name), write ${name:raw}, or
// ${f.stem:raw} and the like: the value is pasted as it is, and the
// values after it are quoted for the shell text it makes. Only run
// commands take :raw.
//
// Where poolrun cannot tell how the shell will read a value, it pastes a
// value made only of the bytes above and refuses any other, with the
// line: inside `...` (write $(...)), inside a ${...} or $((...)) of the
// shell's own, and anywhere after a << here-document, a $'...', or a case
// inside $(...) or (...). Assign the value to a shell variable before
// (v=${f}; then "$v" anywhere), or write ${f:raw}. A ${name} right after
// a \, after $NAME (whose name the value would lengthen) or after an
// unquoted ~ (which would take it for a user's name) is refused whatever
// its value: write $${NAME}${name} for NAME's value followed by the
// value, "~"${name} for the text, or ${name:raw} for the shell's reading.
//
// # Variables
//
// vars gives variables to the whole file, as foreach gives them to an
// entry; [Options.Set] (poolrun run --set NAME=VALUE) overrides their
// values, and may give a value to a variable that the file uses as
// ${NAME} without a vars entry (so that a run without it fails). A
// variable of Options.Set that is neither in vars nor written ${NAME}
// anywhere in the file is an error, so that a mistyped name is not
// silently of no effect.
//
//	vars:
//	  ref: hg38
//	  n: "8"
//	jobs:
//	  - id: align-${i}
//	    foreach: {i: "1..${n}"}
//	    run: ./align --ref ${ref} --chunk ${i}
//	    outputs: ["out/${ref}-${i}.bam"]
//
// Names follow the rules of foreach variables (a lower-case letter, then
// lower-case letters, digits and '_'); values are strings, not scanned
// again, and quoted in run commands as foreach values are (see "Values in
// run commands"). ${NAME} of vars
// goes wherever a foreach variable goes (id, run, after, needs, inputs,
// outputs, item commands), and also in workdir and in the ranges and
// globs of foreach. [Job.Vars] holds only a job's foreach values.
//
// # Inputs and outputs
//
// inputs and outputs take a list of strings (or a single string), each a
// path or a pattern with *, ? and [...] as in [path/filepath.Match] (write
// \[ for a [ in a name; as in the shell, a name that begins with a dot is
// matched only by a pattern that begins with one: see [Glob]), relative to
// the working folder (the workflow file's folder, or workdir), where
// poolrun run runs the commands too, or absolute. Duplicates are dropped; they become [Job.Inputs] and
// [Job.Outputs].
//
//	jobs:
//	  - id: clean
//	    run: ./clean raw.csv > clean.csv
//	    inputs: [raw.csv]
//	    outputs: [clean.csv]
//	  - id: plot-${k}
//	    foreach: {k: [a, b]}
//	    run: ./plot ${k} clean.csv > plot-${k}.png
//	    inputs: [clean.csv]
//	    outputs: ["plot-${k}.png"]
//	    after: [clean]
//
// They make a run incremental, as make and Snakemake are (package execflow
// does it, poolrun run's -n shows it): a job whose outputs all exist, none
// older than its inputs or than the outputs of the jobs it runs after, and
// whose command is the one that made them (poolrun keeps a hash of each
// job's command in a state file beside the workflow file, whatever the
// workdir, .FILE.poolrun-state),
// is skipped, and the jobs after it go on as after a success; a job after
// one that runs, runs too. A job without outputs always runs. A job that
// fails has its outputs removed, and a command that exits 0 without
// writing one of them fails its job.
//
// A failed job's outputs are removed (those its command wrote), so an
// output must lie inside the working folder, below it: an output that
// resolves elsewhere once variables are in ("../x", "/out/*", or
// "${d}/out/*" with an empty d) or once the symbolic links of its folder
// are followed, that is the folder itself, that would
// match the workflow file or poolrun's own files beside it ([StateFile],
// [LockFile]; also when a workdir above the workflow's folder holds them),
// or that would reach into a .git folder is refused, with the path it
// resolves to. The root folder cannot be the working folder.
//
// A file is the output of one job at most, and never a source: Parse
// refuses, with the lines of both, two jobs whose outputs could name
// the same file (the same path; a pattern that can match another's path
// or pattern, compared part by part, so that out/*.txt meets out/b-* and
// out/a/* does not meet out/b/*; a path or pattern inside another's
// folder output), and an output pattern that can match an input path
// that no job makes, unless the job that reads it runs after the
// pattern's (it then reads what that job makes). [Workflow.Claims] finds
// an output that could name one of poolrun's own files (a log, a report).
//
// # Inferred dependencies
//
// As in make, a job runs after every job that makes one of its inputs,
// without an after entry: [Job.After] holds those jobs too, and
// [Job.Inferred] says which came only from files, and through which
// input. An input is compared with the other jobs' output paths, not
// with their output patterns:
//
//   - an input path names the job whose output is the same path, once
//     both are made absolute against the working folder and cleaned
//     (./a/../b.txt is b.txt);
//   - an input pattern names every job with an output path that it
//     matches, part by part, names that begin with a dot only where the
//     pattern's part does (merge's inputs: ["parts/*.txt"] names every
//     job with an output parts/NAME.txt);
//   - an output pattern names nothing: it says which files a job may
//     write, not which it writes, and cannot be compared with another
//     pattern. Write after for a job that reads what one writes.
//
// A job is never inferred to run after itself (a job may read and update
// the same file). A cycle through inferred dependencies is an error as
// one through after is.
//
// # Checks
//
// [Load] reads only a regular file: a named pipe, a device (an endless one
// such as /dev/zero) or a directory is refused at once. It refuses a file
// larger than [MaxFileSize] (16 MiB) with [regfile.ErrTooLarge], from its size,
// before reading it.
//
// Parse reports every mistake it finds, not only the first: after one,
// it goes on with what it can still check (a field with a mistake is left
// out, and a job entry without a usable id with it, whose ids an after
// entry may then not find: such unresolved after entries are not
// reported). It stops at a YAML syntax error, or at a limit on the
// workflow's size. It reports one mistake per line at most, so that a
// foreach entry's mistake is reported once, not once per job, and lists
// them by line, up to [MaxErrors]; [Errors.More] counts the others.
//
// Parse refuses, with the line of the offending text: YAML syntax errors; a
// second YAML document in the file; unknown or repeated fields anywhere;
// a job without id or run; a timeout that is not a duration of more than
// zero; resources that are not a mapping of names to whole numbers 0 or
// more, with a bad name, or naming threads or mem; vars that is not a mapping of valid names to strings; a variable
// of [Options.Set] that is not a valid name, or that the file neither
// declares nor uses (these have no line: FILE: --set NAME: ...); a run
// command with a NUL byte (written "\0" in YAML, or from a value), which
// no command can take; a value that poolrun cannot quote where it stands
// in a run command, and ${name:raw} outside one; a foreach
// variable with the name of one of vars or --set; a workdir that is not
// an existing folder; a foreach glob that matches no file; an item
// without run; bad ids or item names; two
// items with the same environment variable; a duplicate job id (naming the
// line of the first); after naming an unknown job or a pattern matching
// none; needs naming an unknown item; a malformed pattern in inputs or
// outputs; an output outside the working folder (links followed), or
// that could match the workflow file, its state or lock file or a .git
// folder; outputs of two jobs that could name one file, or an output
// pattern that could match a source; workdir: /; a dependency cycle (naming its path,
// a -> b (FILE:LINE) -> a, where each job runs after the next, with the
// line of each job other than the first, whose line the error has, and
// the input that makes each inferred dependency of the path); a bad foreach (not a
// mapping, an empty list, a bad range, an unknown variable, ids repeated by
// the expansion); a file with no jobs; more than [MaxJobs] jobs,
// [MaxDependencies] dependencies, [MaxPaths] inputs and outputs, 256 MiB of
// ids, commands and paths or a million
// foreach values (a job's variables times the jobs of its entry, summed
// over the entries) after expansion; after patterns that
// would take more than a second or so to match (a pattern with a fixed
// start or end, such as "chunk-*" or "*-${i}", is cheap; thousands of
// different patterns such as "*-${i}-*" over thousands of jobs are not).
// YAML anchors and aliases are allowed; merge keys (<<) are not. An alias
// is read where it is used as what it stands for, never expanded into a
// copy, and the limits above count what the aliases stand for as they are
// read: however many values the aliases stand for (nine levels of lists of
// ten aliases, a "billion laughs", stand for a billion), the answer is an
// error with a line, in about the time and memory of a parse of the file. An alias that
// repeats a whole job entry is refused, as it repeats the job's ids.
//
// The line of a YAML syntax error is that of the mistake where the YAML
// library's own is not (it often names the line before the enclosing
// block): the file is cut after a line and the cut decoded again, starting
// from the last line the library read before it failed, which usually
// costs one more parse of the file.
//
// # Targets
//
// [Workflow.Select] keeps the jobs that targets name (ids, or patterns as
// after takes them) and every job they run after, directly or not,
// inferred dependencies included, as make runs a target and what it
// needs: poolrun run FILE TARGET... runs that. A target that matches no
// id is a file, a folder or a glob of files, and names the jobs whose
// outputs make it ([Workflow.Makers]). A target that names no job either
// way is an error that names the ids and the outputs closest to it.
//
// # Order
//
// [Workflow.Jobs] lists the expanded jobs in file order, except that a job
// is moved down, as little as needed, below the jobs it runs after: a
// caller can queue the jobs in slice order and every dependency is already
// queued. Each job's After lists job ids in file order.
package workflow
