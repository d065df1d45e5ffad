package execflow

import (
	"os"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/poolrun/poolrun/internal/workflow"
)

// A command's environment is a base, the same for every command of a run,
// followed by the names poolrun sets for that command alone: jobEnv,
// threadsEnv, attemptEnv and its resources' for a job and the paths of
// its items ([workflow.EnvName]), or
// [workflow.ItemEnv] for an item's command. The base holds no entry of
// those names, and no name twice, so that the whole needs no
// deduplication when a command starts.

// baseEnv is a base environment, and what it was built from.
type baseEnv struct {
	environ []string // os.Environ() then
	extra   string   // Options.Env, its entries joined by NUL
	env     []string
}

// lastBase is the base environment that this process built last. A run's
// commands take it as long as this process's environment and the run's
// Options.Env are those it was built from: a run builds it at its first
// command, and again only if the process's environment changed since.
var lastBase atomic.Pointer[baseEnv]

// commandEnv returns the base environment of a command: this process's
// environment without the variables whose names begin with envPrefix,
// then the entries of extra ([Options.Env], joined by NUL) less those
// that name what poolrun sets per command, each name once (the last
// entry that sets it wins, as os/exec has it), and last the command's
// [OwnerEnv] mark: the chain of owners this process inherited, if any,
// and its own pair.
//
// poolrun's variables are not inherited: not the engine's worker marker
// ([engine.WorkerEnv]), which would make a poolrun (or any program built
// with the engine) started by a command take itself for a worker, nor the
// job id or item paths of an outer poolrun that started this one.
//
// The result is shared: append to it (it has no spare capacity, so that
// an append copies), never write into it.
func commandEnv(extra string) []string {
	environ := os.Environ()
	if b := lastBase.Load(); b != nil && b.extra == extra && slices.Equal(b.environ, environ) {
		return b.env
	}
	b := &baseEnv{environ: environ, extra: extra, env: buildEnv(environ, extra)}
	lastBase.Store(b)
	return b.env
}

// buildEnv builds commandEnv's result from environ and extra.
func buildEnv(environ []string, extra string) []string {
	env := make([]string, 0, len(environ)+8)
	var outer string // the owner chain of the runs that started this one
	for _, kv := range environ {
		if chain, ok := strings.CutPrefix(kv, OwnerEnv+"="); ok {
			outer = chain
		}
		if !strings.HasPrefix(kv, envPrefix) {
			env = append(env, kv)
		}
	}
	if extra != "" {
		for kv := range strings.SplitSeq(extra, "\x00") {
			if !perCommand(envName(kv)) {
				env = append(env, kv)
			}
		}
	}
	env = dedupEnv(env)
	return slices.Clip(append(env, ownerEntry(outer)))
}

// perCommand reports whether poolrun sets the variable name for each
// command: jobEnv, threadsEnv, attemptEnv, the resources'
// ([workflow.ResourceEnvPrefix]), [workflow.ItemEnv] and the item paths,
// [OwnerEnv].
func perCommand(name string) bool {
	return name == jobEnv || name == threadsEnv || name == attemptEnv || name == OwnerEnv ||
		name == workflow.ItemEnv || strings.HasPrefix(name, workflow.ItemEnv+"_") ||
		strings.HasPrefix(name, workflow.ResourceEnvPrefix)
}

// dedupEnv returns env with each name once, set by its last entry, in
// the order of those last entries, as os/exec gives a command.
func dedupEnv(env []string) []string {
	seen := make(map[string]bool, len(env))
	out := make([]string, 0, len(env))
	for i := len(env) - 1; i >= 0; i-- {
		if k := envName(env[i]); !seen[k] {
			seen[k] = true
			out = append(out, env[i])
		}
	}
	slices.Reverse(out)
	return out
}

// envName is the name of the entry kv: what comes before its first '='
// (or all of it, with none).
func envName(kv string) string {
	name, _, _ := strings.Cut(kv, "=")
	return name
}
