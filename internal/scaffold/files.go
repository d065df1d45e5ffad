package scaffold

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Every output file is a 24-byte header followed by fixed-size little-endian
// records:
//
//	offset  size  field
//	     0     4  magic: "PRpl" (placement) or "PRcn" (connectivity)
//	     4     4  format version, uint32 = 1
//	     8     8  Config.Hash of the configuration that wrote it, uint64
//	    16     8  number of records, uint64
//	    24        records: placement    x, y, z float32 (12 bytes, µm)
//	                       connectivity source id, target id uint32 (8 bytes)
const (
	headerSize    = 24
	formatVersion = 1
	placeRecord   = 12
	connRecord    = 8
)

var (
	placeMagic = [4]byte{'P', 'R', 'p', 'l'}
	connMagic  = [4]byte{'P', 'R', 'c', 'n'}
)

// placementPath returns the file Place writes for cellType and ch:
// outDir/placement/<cellType>/<chunk>.bin.
func placementPath(outDir, cellType string, ch Chunk) string {
	return filepath.Join(outDir, "placement", cellType, ch.String()+".bin")
}

// connectivityPath returns the file Connect writes for rule and ch:
// outDir/connectivity/<rule>/<chunk>.bin.
func connectivityPath(outDir, rule string, ch Chunk) string {
	return filepath.Join(outDir, "connectivity", rule, ch.String()+".bin")
}

func newFile(magic [4]byte, hash uint64, records, recSize int) []byte {
	b := make([]byte, headerSize, headerSize+records*recSize)
	copy(b, magic[:])
	binary.LittleEndian.PutUint32(b[4:], formatVersion)
	binary.LittleEndian.PutUint64(b[8:], hash)
	binary.LittleEndian.PutUint64(b[16:], uint64(records))
	return b
}

// checkFile checks the header of b, read from path, and returns its records.
// want is the expected record count, or -1 for any.
func checkFile(path string, b []byte, magic [4]byte, hash uint64, want, recSize int) ([]byte, error) {
	if _, err := checkHeader(path, b, int64(len(b)), magic, hash, want, recSize); err != nil {
		return nil, err
	}
	return b[headerSize:], nil
}

// checkHeader checks the header hdr of the file path of size bytes, and
// returns its record count. want is the expected count, or -1 for any.
func checkHeader(path string, hdr []byte, size int64, magic [4]byte, hash uint64, want, recSize int) (int64, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %s: %s", errBadFile, path, fmt.Sprintf(format, args...))
	}
	if len(hdr) < headerSize || size < headerSize {
		return 0, bad("%d bytes, shorter than the %d-byte header", size, headerSize)
	}
	if [4]byte(hdr[:4]) != magic {
		return 0, bad("magic %q, want %q", hdr[:4], magic[:])
	}
	if v := binary.LittleEndian.Uint32(hdr[4:]); v != formatVersion {
		return 0, bad("format version %d, want %d", v, formatVersion)
	}
	if h := binary.LittleEndian.Uint64(hdr[8:]); h != hash {
		return 0, bad("written for configuration %016x, not this one (%016x)", h, hash)
	}
	n := binary.LittleEndian.Uint64(hdr[16:])
	if want >= 0 && n != uint64(want) {
		return 0, bad("%d records, want %d", n, want)
	}
	if body := uint64(size - headerSize); body%uint64(recSize) != 0 || body/uint64(recSize) != n {
		return 0, bad("%d bytes of records, want %d × %d", body, n, recSize)
	}
	return int64(n), nil
}

// readFile is os.ReadFile with the package's prefix on errors.
func readFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scaffold: %w", err)
	}
	return b, nil
}

// readHeader checks the header of the file at path without reading its
// records, and returns its record count.
func readHeader(path string, magic [4]byte, hash uint64, want, recSize int) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("scaffold: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("scaffold: %w", err)
	}
	hdr := make([]byte, headerSize)
	n, err := io.ReadFull(f, hdr)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return 0, fmt.Errorf("scaffold: %s: %w", path, err)
	}
	return checkHeader(path, hdr[:n], fi.Size(), magic, hash, want, recSize)
}

// writeAtomic writes data to path through a temporary file in the same folder
// (created with the folder if need be) that it renames to path, so path holds
// either its old content or all of data. The file gets mode 0666 and the
// folders mode 0777, less what the umask removes, as any Unix tool's files
// do. The temporary file is created exclusively under a random name, so
// never through a symbolic link; a symbolic link at path is refused
// (errSymlink), neither followed nor replaced. The temporary file is
// removed on error. It does not sync: the guarantee is against an
// interrupted process, not a power cut.
func writeAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return err
	}
	f, err := createTemp(dir, "."+filepath.Base(path)+tempInfix)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return &fs.PathError{Op: "write", Path: path, Err: errSymlink}
	}
	return os.Rename(f.Name(), path)
}

// errSymlink is the error of a write to a path that is a symbolic link.
var errSymlink = errors.New("a symbolic link is there; refusing to write through it or replace it")

// createTemp creates a new file in dir named prefix followed by random
// digits, exclusively (an existing name, a symbolic link included, is never
// opened: another name is tried), with mode 0666 less the umask. os.CreateTemp
// would give it mode 0600 whatever the umask.
func createTemp(dir, prefix string) (*os.File, error) {
	for range 100 {
		name := filepath.Join(dir, prefix+strconv.FormatUint(rand.Uint64(), 36))
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, err
	}
	return nil, &fs.PathError{Op: "createtemp", Path: filepath.Join(dir, prefix+"*"), Err: fs.ErrExist}
}

// tempInfix marks the temporary files of writeAtomic: ".<name>.tmp-<random>".
const tempInfix = ".tmp-"

// RemoveTemp removes the temporary files that writes interrupted by a killed
// process left under outDir/placement and outDir/connectivity, and returns how
// many it removed. A missing folder is not an error. Call it only when no job
// is writing into outDir.
func RemoveTemp(outDir string) (int, error) {
	removed := 0
	var errs []error
	for _, sub := range []string{"placement", "connectivity"} {
		root := filepath.Join(outDir, sub)
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) && path == root {
					return fs.SkipDir
				}
				return err
			}
			if name := d.Name(); d.Type().IsRegular() && strings.HasPrefix(name, ".") && strings.Contains(name, ".bin"+tempInfix) {
				if err := os.Remove(path); err != nil {
					return err
				}
				removed++
			}
			return nil
		})
		errs = append(errs, err)
	}
	return removed, errors.Join(errs...)
}
