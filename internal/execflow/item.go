package execflow

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cespare/xxhash/v2"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/internal/workflow"
)

// itemPrefix is the prefix of the cachepool family of workflow items: their
// cache names are itemPrefix + ":" + item name + "@" + 16 hexadecimal digits.
const itemPrefix = "poolrun.item"

// itemParam is everything an item's build depends on, as the parent
// computes it and the job's argument carries it to the worker: the family
// parameter, so it is the member's identity. Every field goes into the
// member's name (memberName), so that two parameters that differ never
// share a name or a key.
type itemParam struct {
	Name      string
	Run       string
	Worker    string // the program that holds it; "" for an item with a run command
	File      string
	Line      int
	Dir       string // absolute
	Env       string // Options.Env joined by NUL
	Scratch   string // absolute scratch root
	TailLines int
}

var items = cachepool.DefineFamily(itemPrefix, buildItem,
	cachepool.MemberName(memberName),
	cachepool.Cleanup(removeArtefact),
	cachepool.Size(artefactSize),
)

// memberName gives the item's name and a hash of the whole parameter; it is
// a pure function of p, so every process names p alike.
func memberName(p itemParam) string {
	var h paramHash
	h.str(p.Name)
	h.str(p.Run)
	h.str(p.Worker)
	h.str(p.File)
	h.num(p.Line)
	h.str(p.Dir)
	h.str(p.Env)
	h.str(p.Scratch)
	h.num(p.TailLines)
	return h.name(p.Name)
}

// paramHash hashes the fields of a family parameter, each string with its
// length first, so that no two parameters that differ give the same
// bytes; the zero value is ready to use.
type paramHash struct {
	h *xxhash.Digest
	n [8]byte
}

func (h *paramHash) str(s string) {
	h.num(len(s))
	h.h.WriteString(s)
}

func (h *paramHash) num(v int) {
	if h.h == nil {
		h.h = xxhash.New()
	}
	binary.LittleEndian.PutUint64(h.n[:], uint64(int64(v)))
	h.h.Write(h.n[:])
}

// name is a member's name: name, "@" and the hash in 16 hexadecimal
// digits.
func (h *paramHash) name(name string) string {
	if h.h == nil {
		h.h = xxhash.New()
	}
	return fmt.Sprintf("%s@%016x", name, h.h.Sum64())
}

// buildItem runs the item's command to build its artefact in this process's
// scratch folder and returns the artefact's path.
//
// An item held by a worker program has no artefact: its build and
// cleanup do nothing, and the program frees the item (see program.go).
func buildItem(ctx context.Context, p itemParam) (string, error) {
	if p.Worker != "" {
		return "", nil
	}
	fail := func(err error) error {
		return &itemError{Item: p.Name, File: p.File, Line: p.Line, Err: err}
	}
	path, err := scratch.reserve(p.Scratch, p.Name)
	if err != nil {
		return "", fail(err)
	}
	env := append(commandEnv(p.Env), workflow.ItemEnv+"="+path)
	out, err := runShell(ctx, shellCmd{run: p.Run, dir: p.Dir, env: env, tailLines: p.TailLines})
	switch {
	case err != nil:
		err = fail(err)
	case out.exitCode != 0 || out.signal != "":
		err = &commandError{
			Item: p.Name, File: p.File, Line: p.Line,
			ExitCode: out.exitCode, Signal: out.signal, StderrTail: out.tail,
		}
	default:
		if _, serr := os.Lstat(path); serr != nil {
			err = fail(fmt.Errorf("%w (%s)", errNoArtefact, path))
		}
	}
	if err != nil {
		removeArtefact(path)
		return "", err
	}
	return path, nil
}

// removeArtefact is the items' cleanup: it deletes the artefact and gives
// its place in the scratch folder back.
func removeArtefact(path string) {
	if path == "" {
		return // held by a worker program
	}
	if err := os.RemoveAll(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(os.Stderr, "poolrun: removing item artefact: %v\n", err)
	}
	scratch.release(path)
}

// artefactSize is the total size of the regular files at path.
func artefactSize(path string) int64 {
	var total int64
	filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			total += fi.Size()
		}
		return nil
	})
	return total
}
