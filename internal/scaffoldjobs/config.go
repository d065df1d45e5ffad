package scaffoldjobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/cespare/xxhash/v2"
	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/scaffold"
)

// configRef identifies a plan's configuration in a job's argument: what it
// is (its hash) and where a worker reads it (see the package doc).
type configRef struct {
	// Hash is the configuration's [scaffold.Config.Hash].
	Hash uint64
	// File is the absolute path of the file that holds the configuration as
	// JSON, in the plan's output folder.
	File string
}

// configs is the family of configuration items, one member per
// [configRef], named by the hash and the xxhash64 of the file's path. A
// member's build reads the file, decodes it, checks its hash
// against the ref's and validates it; its value is shared by every job of the
// plan that runs in the process and must not be changed.
var configs = cachepool.DefineFamily("scaffold.config", loadConfig,
	cachepool.MemberName(func(r configRef) string {
		return fmt.Sprintf("%016x@%016x", r.Hash, xxhash.Sum64String(r.File))
	}),
)

// loadConfig builds the configuration item of ref.
func loadConfig(_ context.Context, ref configRef) (*scaffold.Config, error) {
	b, err := os.ReadFile(ref.File)
	if err != nil {
		return nil, fmt.Errorf("scaffoldjobs: configuration: %w", err)
	}
	var cfg scaffold.Config
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", errConfigChanged, ref.File, err)
	}
	if h := cfg.Hash(); h != ref.Hash {
		return nil, fmt.Errorf("%w: %s holds configuration %016x, the job was queued with %016x", errConfigChanged, ref.File, h, ref.Hash)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("scaffoldjobs: configuration %s: %w", ref.File, err)
	}
	return &cfg, nil
}

// configPrefix starts the name of every configuration file.
const configPrefix = ".poolrun-config-"

// writeConfig writes cfg, as JSON, to a new file in out (created if need be)
// with mode 0600 and returns its ref. The file is complete and closed when
// writeConfig returns; on error there is no file.
func writeConfig(cfg *scaffold.Config, out string) (configRef, error) {
	b, err := json.Marshal(cfg)
	if err != nil {
		return configRef{}, fmt.Errorf("scaffoldjobs: encoding the configuration: %w", err)
	}
	if out, err = filepath.Abs(out); err != nil {
		return configRef{}, fmt.Errorf("scaffoldjobs: output folder: %w", err)
	}
	if err := os.MkdirAll(out, 0o777); err != nil {
		return configRef{}, fmt.Errorf("scaffoldjobs: output folder: %w", err)
	}
	ref := configRef{Hash: cfg.Hash()}
	// CreateTemp opens a new name exclusively, with mode 0600.
	f, err := os.CreateTemp(out, fmt.Sprintf("%s%016x-*.json", configPrefix, ref.Hash))
	if err != nil {
		return configRef{}, fmt.Errorf("scaffoldjobs: writing the configuration: %w", err)
	}
	ref.File = f.Name()
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(ref.File)
		return configRef{}, fmt.Errorf("scaffoldjobs: writing the configuration: %w", err)
	}
	return ref, nil
}

// configFile removes a plan's configuration file exactly once: when every job
// of the plan has finished (removeAfter), or on Plan.Close.
type configFile struct {
	path string
	once sync.Once
	err  error         // of the removal; set before gone is closed
	gone chan struct{} // closed once the file is removed
}

// removeAfter removes the file once every job in jobs has finished, or
// returns when it was removed otherwise.
func (f *configFile) removeAfter(jobs []*engine.Job[int]) {
	for _, j := range jobs {
		select {
		case <-j.Done():
		case <-f.gone:
			return
		}
	}
	f.remove()
}

// remove removes the file on its first call and returns the error of that
// removal on every call. A file already gone is not an error.
func (f *configFile) remove() error {
	f.once.Do(func() {
		if err := os.Remove(f.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			f.err = fmt.Errorf("scaffoldjobs: removing the configuration file: %w", err)
		}
		close(f.gone)
	})
	return f.err
}
