package execflow

import (
	"slices"
	"strings"
	"testing"
)

func TestDedupEnv(t *testing.T) {
	for _, c := range []struct {
		name    string
		in, out []string
	}{
		{"empty", nil, nil},
		{"distinct", []string{"A=1", "B=2"}, []string{"A=1", "B=2"}},
		{"set twice", []string{"A=1", "B=2", "A=3"}, []string{"B=2", "A=3"}},
		{"without =", []string{"PATH=/x", "B", "PATH=/y", "B=", "C=1"}, []string{"PATH=/y", "B=", "C=1"}},
	} {
		if got := dedupEnv(c.in); !slices.Equal(got, c.out) {
			t.Errorf("%s: dedupEnv(%q) = %q, want %q", c.name, c.in, got, c.out)
		}
	}
}

// TestCommandEnv: the base environment holds each name once, none of
// poolrun's variables but the owner mark (last), Options.Env's entries
// over the process's, and no spare capacity; it is built again when the
// process's environment changes, and shared otherwise.
func TestCommandEnv(t *testing.T) {
	t.Setenv("EXECFLOW_BASE", "process")
	t.Setenv("POOLRUN_JOB", "outer")
	t.Setenv("POOLRUN_OTHER", "outer")
	extra := strings.Join([]string{"EXECFLOW_BASE=options", "EXECFLOW_EXTRA=a=b", "EXECFLOW_EXTRA=c",
		"POOLRUN_JOB=x", "POOLRUN_ITEM=x", "POOLRUN_ITEM_REF=x", OwnerEnv + "=x", "POOLRUN_MINE=1"}, "\x00")
	env := commandEnv(extra)
	if len(env) != cap(env) {
		t.Errorf("len %d, cap %d: an append would write into the shared base", len(env), cap(env))
	}
	if got := dedupEnv(env); !slices.Equal(got, env) {
		t.Errorf("a name is set twice:\n%q", env)
	}
	values := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		values[k] = v
	}
	for name, want := range map[string]string{
		"EXECFLOW_BASE": "options", "EXECFLOW_EXTRA": "c", "POOLRUN_MINE": "1",
		"POOLRUN_JOB": "", "POOLRUN_OTHER": "", "POOLRUN_ITEM": "", "POOLRUN_ITEM_REF": "",
	} {
		if got := values[name]; got != want {
			t.Errorf("%s=%q, want %q", name, got, want)
		}
	}
	if last := env[len(env)-1]; last != ownerEntry("") {
		t.Errorf("last entry %q, want the owner mark %q", last, ownerEntry(""))
	}
	if again := commandEnv(extra); &again[0] != &env[0] {
		t.Error("the same environment was built twice")
	}
	t.Setenv("EXECFLOW_LATER", "yes")
	if later := commandEnv(extra); !slices.Contains(later, "EXECFLOW_LATER=yes") {
		t.Error("a variable set after the first build is missing")
	}
}
