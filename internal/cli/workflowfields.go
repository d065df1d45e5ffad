package cli

// workflowFields is the table of a workflow file's keys in poolrun run's
// help: every key that package workflow's parser takes (decode.go), and
// no other, for it refuses any other.
const workflowFields = `Workflow fields (any other key is an error):
  vars:                          optional: variable name -> value, a string
    NAME: VALUE                  NAME of a-z, 0-9 and _: ${NAME} in jobs and
                                 items; --set NAME=VALUE overrides it
  workdir: DIR                   optional: where the commands run and paths
                                 are read (default: FILE's folder)
  resources: {NAME: N}           optional: the most of resource NAME (gpu,
                                 licence) the running jobs take together;
                                 --resources NAME=N wins; none: no limit
  workers:                       optional: persistent programs (Bazel's JSON
    NAME:                        worker protocol, docs/WORKERS.md)
      run: CMD                   the program; --persistent_worker is appended;
                                 started by each worker that runs its jobs,
                                 ended once no unfinished job needs it
      env: {VAR: VALUE}          optional: more of its environment
  items:                         optional: item name -> how to build it
    NAME:
      run: CMD                   builds the item at "$POOLRUN_ITEM"; a job
                                 that needs it finds it in $POOLRUN_ITEM_NAME
      worker: PROGRAM            instead of run: held in the memory of that
                                 program (python/poolrun.py), which frees it
                                 once the window stops listing it
  jobs:                          required: a list of at least one job
    - id: ID                     required, unique; may use ${var} of foreach
      run: CMD                   a command for sh -c, or:
      worker: PROGRAM            a request to that program of workers, with
      args: [ARG, ...]           these arguments (${var} substituted as is)
      after: [ID or GLOB, ...]   jobs that must succeed first
      needs: [ITEM, ...]         items the command uses
      inputs: [PATH or GLOB]     files it reads, and outputs: files it
      outputs: [PATH or GLOB]    writes (relative to the workdir): a job
                                 whose outputs are up to date is skipped; a
                                 job reading another's output runs after it
      foreach: {VAR: VALUES}     one job per value, VALUES a list [a, b], a
                                 range 1..8 or a glob "data/*.csv" (${VAR},
                                 ${VAR.stem}); several VARs: every combination
      timeout: DURATION          fail the job after it, e.g. 90s, 10m, 1h30m
      retries: N                 run it again up to N times (0 to 100) if it
                                 fails (or times out, or its worker dies)
      retry_delay: DURATION      wait that long before each new run
      threads: N                 it counts N (1 to 4096) against -j
      mem: SIZE                  and SIZE (512M, 2G, 1.5GiB) against --mem
      resources: {NAME: N}       and N (0 or more) of NAME against its limit
                                 (the command has $POOLRUN_RES_NAME)
      desc: TEXT                 what the entry's jobs do, for --list, as
                                 written (no ${var} in it is substituted)
  after, needs, inputs and outputs also take a single string: after: split
`
