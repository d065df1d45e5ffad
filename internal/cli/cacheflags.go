package cli

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/report"
	"github.com/spf13/pflag"
)

// cacheFlags are the flags that choose how the workers hold cache items:
// the eviction policy, cache-affinity dispatch, eviction while idle and a
// per-worker budget. The zero value is the engine's defaults and adds no
// option.
type cacheFlags struct {
	evict      evictFlag
	noAffinity bool
	noIdle     bool
	budget     byteSize
}

func (f *cacheFlags) register(fs *pflag.FlagSet) {
	fs.Var(&f.evict, "evict", "eviction `POLICY`: stale (the default: a worker frees an item once no job sent to it and no job still to be sent needs it), pool-wide (once no unfinished job in the pool needs it), never (at the end of the pool) or each-job (after every job)")
	fs.BoolVar(&f.noAffinity, "no-affinity", false, "send a free worker the oldest ready job, not one whose items it holds")
	fs.BoolVar(&f.noIdle, "no-idle-eviction", false, "a waiting worker evicts stale items only at its next job, not within a millisecond of their last use")
	fs.Var(&f.budget, "cache-budget", "cap each worker's cache at `SIZE` (bytes, or e.g. 800KiB, 512MiB, 1.5GiB), evicting the item needed furthest ahead first; 0: no cap")
}

// options returns the engine options for the flags that differ from the
// engine's defaults.
func (f *cacheFlags) options() []engine.Option {
	var opts []engine.Option
	if f.evict.set {
		opts = append(opts, engine.Evict(f.evict.policy))
	}
	if f.noAffinity {
		opts = append(opts, engine.Affinity(false))
	}
	if f.noIdle {
		opts = append(opts, engine.IdleEviction(false))
	}
	if f.budget > 0 {
		opts = append(opts, engine.CacheBudget(int64(f.budget)))
	}
	return opts
}

// settings returns the flags as the JSON report states them.
func (f *cacheFlags) settings() report.CacheSettings {
	return report.CacheSettings{Evict: f.evict.policy.String(), Affinity: !f.noAffinity, IdleEviction: !f.noIdle, CacheBudget: int64(f.budget)}
}

// evictPolicies are the policies --evict takes, by name.
var evictPolicies = []engine.EvictPolicy{engine.EvictStale, engine.EvictPoolWide, engine.EvictNever, engine.EvictEachJob}

// evictFlag is the value of --evict: a policy by its short name.
type evictFlag struct {
	policy engine.EvictPolicy // the zero value is EvictStale, the default
	set    bool
}

func (e *evictFlag) String() string { return e.policy.String() }

func (e *evictFlag) Type() string { return "policy" }

func (e *evictFlag) Set(s string) error {
	var names []string
	for _, p := range evictPolicies {
		if p.String() == s {
			e.policy, e.set = p, true
			return nil
		}
		names = append(names, p.String())
	}
	return fmt.Errorf("want one of %s", strings.Join(names, ", "))
}

// byteSize is a flag's number of bytes, given as a whole number of bytes or
// as a number with a binary unit: B, KiB, MiB, GiB or TiB (as GOMEMLIMIT
// spells them; the case of the unit does not matter).
type byteSize int64

func (b *byteSize) String() string {
	if *b == 0 {
		return "0"
	}
	return strconv.FormatInt(int64(*b), 10)
}

func (b *byteSize) Type() string { return "size" }

func (b *byteSize) Set(s string) error {
	n, err := parseByteSize(s)
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}

// byteUnits are the units parseByteSize takes, by lower-case name.
var byteUnits = map[string]float64{"": 1, "b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}

// parseByteSize parses a size such as 1048576, 800KiB, 512MiB or 1.5 GiB
// into bytes, rounded down to a whole byte. Negative sizes, unknown units
// and sizes of 8 EiB or more are errors.
func parseByteSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		i = len(t)
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	const want = "want bytes or a size with a unit B, KiB, MiB, GiB or TiB, such as 512MiB or 1.5GiB"
	mul, ok := byteUnits[unit]
	if num == "" || !ok {
		return 0, errors.New(want)
	}
	if unit == "" || unit == "b" {
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			return 0, errors.New(want)
		}
		return n, nil
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, errors.New(want)
	}
	v *= mul
	if v >= math.MaxInt64 {
		return 0, errors.New("too large: want less than 8 EiB")
	}
	return int64(v), nil
}
