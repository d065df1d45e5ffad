package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/poolrun/poolrun/internal/workflow"
	"github.com/spf13/pflag"
)

// workflowFlags are the flags of poolrun run that say how to read the
// workflow file: -C and --set.
type workflowFlags struct {
	chdir string
	set   setFlag
}

func (f *workflowFlags) register(fs *pflag.FlagSet) {
	fs.StringVarP(&f.chdir, "directory", "C", "", "change to `DIR` before reading the workflow file, as make -C does (every relative path is then relative to DIR)")
	fs.Var(&f.set, "set", "set a variable of the workflow, over its vars: entry (`NAME=VALUE`; repeatable)")
}

// enter changes to the folder of -C, if any. It must be called before
// anything reads a relative path.
func (f *workflowFlags) enter() error {
	if f.chdir == "" {
		return nil
	}
	fi, err := os.Stat(f.chdir)
	switch {
	case err != nil:
		return badInputf("poolrun run: -C %s: %v", f.chdir, unwrapPathError(err))
	case !fi.IsDir():
		return badInputf("poolrun run: -C %s: not a folder", f.chdir)
	}
	if err := os.Chdir(f.chdir); err != nil {
		return badInputf("poolrun run: -C %s: %v", f.chdir, unwrapPathError(err))
	}
	return nil
}

// defaultFile is the workflow file that poolrun run reads when it is
// given none, as make reads the Makefile of the current folder.
const defaultFile = "poolrun.yaml"

// workflowArgs splits poolrun run's arguments into the workflow file and
// the targets. The first argument is the file when its name ends in .yaml
// or .yml, or when it exists. Otherwise, if there is a poolrun.yaml here
// (defaultFile), that is the file and every argument is a target, as make
// takes targets for its Makefile; if not, the first argument is still the
// file, for the error that names it, and no argument at all is an error.
// It must be called after -C.
func workflowArgs(args []string) (file string, targets []string, err error) {
	if len(args) > 0 && workflowName(args[0]) {
		return args[0], args[1:], nil
	}
	if len(args) > 0 {
		if _, err := os.Lstat(args[0]); err == nil {
			return args[0], args[1:], nil
		}
	}
	if _, err := os.Lstat(defaultFile); errors.Is(err, fs.ErrNotExist) {
		if len(args) > 0 {
			return args[0], args[1:], nil
		}
		return "", nil, badInputf("poolrun run: no workflow file given, and no %s here; see 'poolrun help run'", defaultFile)
	}
	return defaultFile, args, nil
}

// load reads the workflow file at path with the variables of --set, and
// selects the jobs that targets need (all with no targets). It returns
// the selected workflow and, for a selection, the ids of the jobs it
// leaves out.
func (f *workflowFlags) load(path string, targets []string) (*workflow.Workflow, map[string]bool, error) {
	wf, err := workflow.LoadWith(path, workflow.Options{Set: f.set.vars})
	if err != nil {
		return nil, nil, badInput(err)
	}
	if len(targets) == 0 {
		return wf, nil, nil
	}
	sel, err := wf.Select(targets)
	if err != nil {
		msg := indent(err.Error())
		if slices.ContainsFunc(targets, workflowName) {
			msg += "\n    (one workflow file at a time: the arguments after it are targets)"
		}
		return nil, nil, badInputf("poolrun run: %s", msg)
	}
	in := make(map[string]bool, len(sel.Jobs))
	for _, j := range sel.Jobs {
		in[j.ID] = true
	}
	others := make(map[string]bool, len(wf.Jobs)-len(sel.Jobs))
	for _, j := range wf.Jobs {
		if !in[j.ID] {
			others[j.ID] = true
		}
	}
	return sel, others, nil
}

func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// setFlag is --set: NAME=VALUE pairs, a later one for the same name
// winning.
type setFlag struct {
	vars map[string]string
}

func (f *setFlag) String() string {
	names := make([]string, 0, len(f.vars))
	for name := range f.vars {
		names = append(names, name)
	}
	sort.Strings(names)
	for i, name := range names {
		names[i] = name + "=" + f.vars[name]
	}
	return strings.Join(names, ",")
}

func (f *setFlag) Type() string { return "NAME=VALUE" }

func (f *setFlag) Set(s string) error {
	name, value, ok := strings.Cut(s, "=")
	switch {
	case !ok:
		return fmt.Errorf("want NAME=VALUE, with an =")
	case name == "":
		return fmt.Errorf("want NAME=VALUE, with a name before the =")
	}
	if f.vars == nil {
		f.vars = make(map[string]string)
	}
	f.vars[name] = value
	return nil
}
