package workflow

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// This file reads the fields of a job entry that say how to run it rather
// than what it does: retries, retry_delay, threads, mem and resources;
// and the workflow's resources field, the limits of the named ones.

// MaxRetries is the most retries a job may have: a command that fails
// more often than that is not worth running again.
const MaxRetries = 100

// MaxThreads is the most threads a job may declare, as poolrun run's -j
// is at most that many workers.
const MaxThreads = 4096

// resources are an entry's retries, retry_delay, threads and mem fields.
type resources struct {
	retries *int
	delay   time.Duration
	threads int
	mem     int64
	named   map[string]int64 // resources; shared by the entry's jobs
}

// job sets the fields of j that r holds, and returns j.
func (r *resources) entry(en *Entry) *Entry {
	en.Retries, en.RetryDelay, en.Threads, en.Mem, en.Resources = r.retries, r.delay, r.threads, r.mem, r.named
	return en
}

// resource reads field f (retries, retry_delay, threads or mem) of the job
// called name into r, reporting a mistake.
func (p *parser) resource(r *resources, f field, name string) {
	n := f.value
	switch f.key {
	case "retry_delay":
		r.delay = p.duration(f, name)
		return
	case "mem":
		if n.Kind != yaml.ScalarNode || isNull(n) {
			p.fail(n.Line, "%s: mem must be a size such as 512M, 2G or 1.5GiB, not %s", name, describe(n))
			return
		}
		size, err := ParseSize(n.Value)
		if err != nil {
			p.fail(n.Line, "%s: mem %q: %v", name, n.Value, err)
			return
		}
		r.mem = size
		return
	}
	lo, hi := 0, MaxRetries
	if f.key == "threads" {
		lo, hi = 1, MaxThreads
	}
	if n.Kind != yaml.ScalarNode || isNull(n) {
		p.fail(n.Line, "%s: %s must be a whole number from %d to %d, not %s", name, f.key, lo, hi, describe(n))
		return
	}
	v, err := strconv.Atoi(n.Value)
	if err != nil || v < lo || v > hi {
		p.fail(n.Line, "%s: %s %s: want a whole number from %d to %d", name, f.key, n.Value, lo, hi)
		return
	}
	if f.key == "threads" {
		r.threads = v
	} else {
		r.retries = &v
	}
}

// namedResources reads f, a resources field, of the job called name or (top) of
// the workflow: a mapping of resource names to amounts, whole numbers 0
// or more. It reports a mistake and returns nil for a field with one, and
// for an empty mapping.
func (p *parser) namedResources(f field, name string, top bool) map[string]int64 {
	n := f.value
	what := name + ": resources"
	if top {
		what = "resources"
	}
	if n.Kind != yaml.MappingNode {
		p.fail(n.Line, "%s must be a mapping of resource names to whole numbers, such as {gpu: 1}, not %s", what, describe(n))
		return nil
	}
	fields, ok := p.fields(n, what)
	named := make(map[string]int64, len(fields))
	folded := make(map[string]string, len(fields)) // upper case -> name
	for _, r := range fields {
		v := r.value
		switch {
		case r.key == "threads" || r.key == "mem":
			if top {
				p.fail(r.keyLine, "%s: %s is not a named resource: its limit is poolrun run's %s", what, r.key, map[string]string{"threads": "-j", "mem": "--mem"}[r.key])
			} else {
				p.fail(r.keyLine, "%s: %s is not a named resource: write it as the job's %s: field", what, r.key, r.key)
			}
		case !ResourceName(r.key):
			p.fail(r.keyLine, "%s: %q is not a resource name (a letter or _, then letters, digits or _)", what, r.key)
		case folded[strings.ToUpper(r.key)] != "":
			p.fail(r.keyLine, "%s: %q and %q differ only in case (both would be $%s)", what, folded[strings.ToUpper(r.key)], r.key, ResourceEnv(r.key))
		case v.Kind != yaml.ScalarNode || isNull(v):
			p.fail(v.Line, "%s: %s must be a whole number, 0 or more, not %s", what, r.key, describe(v))
		default:
			amount, err := strconv.ParseInt(v.Value, 10, 64)
			if err != nil || amount < 0 {
				p.fail(v.Line, "%s: %s %s: want a whole number, 0 or more", what, r.key, v.Value)
				ok = false
				continue
			}
			folded[strings.ToUpper(r.key)] = r.key
			named[r.key] = amount
			continue
		}
		ok = false
	}
	if !ok || len(named) == 0 {
		return nil
	}
	return named
}

// ResourceName reports whether s may name a resource: a letter or _, then
// letters, digits or _ (ASCII).
func ResourceName(s string) bool {
	if s == "" || '0' <= s[0] && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '_' {
			return false
		}
	}
	return true
}

// ResourceEnvPrefix begins the name of the environment variable that holds
// what a job takes of a named resource (see [ResourceEnv]).
const ResourceEnvPrefix = "POOLRUN_RES_"

// ResourceEnv returns the name of the environment variable that holds
// what a job's command takes of the resource name: POOLRUN_RES_ then the
// name in upper case, anything but a letter or digit as _ (as [EnvName]
// for items): gpu is POOLRUN_RES_GPU.
func ResourceEnv(name string) string {
	return ResourceEnvPrefix + strings.TrimPrefix(EnvName(name), ItemEnv+"_")
}

// sizeUnits are the units ParseSize takes, in lower case, with their
// multipliers: powers of 1024 whatever the spelling.
var sizeUnits = map[string]float64{
	"": 1, "b": 1,
	"k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10,
	"m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
	"g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30,
	"t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40,
}

// errSize says what a size looks like.
var errSize = errors.New("want a size in bytes, or with a unit K, M, G or T (powers of 1024), such as 512M, 2G or 1.5GiB")

// ParseSize parses a memory size: a whole number of bytes, or a number
// (a fraction allowed) and a unit K, M, G or T, which are powers of 1024
// however they are written (512M, 512MB and 512MiB are all 512 MiB, as a
// batch scheduler such as Slurm reads them; the case does not matter),
// rounded down to a whole byte. A negative size, another unit and a size
// of 8 EiB or more are errors. Job.Mem and poolrun run's --mem are read
// with it.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		i = len(t)
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	mul, ok := sizeUnits[unit]
	if num == "" || !ok {
		return 0, errSize
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, errSize
	}
	if mul == 1 && strings.Contains(num, ".") {
		return 0, errSize // a fraction of a byte
	}
	if v *= mul; v >= math.MaxInt64 {
		return 0, errors.New("too large: want less than 8 EiB")
	}
	return int64(v), nil
}
