// Package scaffoldjobs runs the scaffold workload ([scaffold]) on an engine
// pool: one placement job per (cell type, chunk), then one connectivity job
// per (rule, chunk).
//
// # Cache items
//
// Two kinds of item, both families ([cachepool.DefineFamily]) since their
// names are known only at run time:
//
//   - The configuration: decoded from its file, checked against
//     the hash the job was queued with, and validated. Every job of a plan
//     needs it, so a worker builds it once, on its first job of the plan, and
//     every later job on that worker finds it in the cache.
//   - The spatial index of a rule's source type, built from every
//     placement file of that type. The connectivity jobs of the rules from
//     that type need it; a worker builds it once, on its first such job. Its
//     build gets the configuration item (a hit: the job got it first).
//
// Jobs declare both with [engine.Needs], so the pool's window lists an item
// while an unfinished job needs it, and a worker frees it before its next job
// once the last of them has finished (the configuration at the end of the
// plan, an index when the connectivity of its type is done).
//
// # How a worker gets the configuration
//
// A job's argument carries a reference to the configuration (its
// [scaffold.Config.Hash] and the path of a file that holds it), never the
// configuration itself: a small argument whatever the configuration's size
// (bench/README.md has BenchmarkJobArg's figures), and no JSON decoding
// per job. [Queue] writes the file once, before it queues any
// job, in the output folder as ".poolrun-config-<hash>-<random>.json", with
// mode 0600 and an exclusive create (never over another file).
//
// Why a file, and why there: a worker process receives nothing from its parent
// but job arguments, and workers on other hosts (a later step) will share the
// output folder but not memory nor /tmp. The output folder is the one place
// that every worker of the plan can already read. The write is atomic for
// readers because of its order: the path reaches workers only in the
// arguments of jobs queued after the file was complete and closed. A worker
// that reads a file whose content does not hash to the reference's hash
// (changed, truncated) fails its job, saying that the configuration file
// changed since it was queued; it never computes
// with another configuration than the one its job was queued with.
//
// The file is removed when every job of the plan has finished, whatever
// their outcome: succeeded, failed, cancelled by fail-fast or aborted because
// the pool's context ended. [Queue] adds a scheduler ([engine.Pool.Go]) that
// waits for the removal, so [engine.Pool.Run] returns only once the file is
// gone; a failure to remove it is the scheduler's error, reported by Run.
// A caller that queues a plan and then does not run the pool calls
// [Plan.Close]. Only a parent killed outright (SIGKILL) leaves the file
// behind; its name says what it is.
//
// # Lifetimes and caveats
//
//   - The configuration file exists from [Queue] until the plan's jobs have
//     finished; a worker keeps its decoded copy as long as the pool's window
//     lists the item, so a file removed early fails only the jobs of workers
//     that had not built it yet.
//   - Each Queue names a new file, so each plan has its own configuration and
//     index items, even for the same configuration and output folder: two
//     plans never share a file that one of them would remove. A process that
//     queues many plans registers a few items per plan (cachepool keeps the
//     registrations of family members for the life of the process).
package scaffoldjobs
