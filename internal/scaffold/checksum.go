package scaffold

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/cespare/xxhash/v2"
)

// outputFile is one file a complete run writes.
type outputFile struct {
	rel     string // path relative to outDir, with '/' separators
	magic   [4]byte
	want    int // expected record count, -1 if unknown
	recSize int
	typeIdx int // index into Counts.Cells or Counts.Connections
}

// outputs lists every file of a complete run in the fixed order of the
// checksum: placement files by cell type then chunk, then connectivity files
// by rule then chunk, types and rules in configuration order.
func (c *Config) outputs() ([]outputFile, error) {
	chunks := c.Chunks()
	var out []outputFile
	for i, t := range c.CellTypes {
		counts, err := c.counts(t.Name)
		if err != nil {
			return nil, err
		}
		for j, ch := range chunks {
			rel := filepath.ToSlash(placementPath("", t.Name, ch))
			out = append(out, outputFile{rel, placeMagic, counts[j], placeRecord, i})
		}
	}
	for i, r := range c.Rules {
		for _, ch := range chunks {
			rel := filepath.ToSlash(connectivityPath("", r.Name, ch))
			out = append(out, outputFile{rel, connMagic, -1, connRecord, i})
		}
	}
	return out, nil
}

// Checksum returns xxhash64 over every output file of a complete run of cfg
// under outDir, in a fixed order (placement files by cell type then chunk,
// then connectivity files by rule then chunk): for each, its path relative to
// outDir with '/' separators, a zero byte, its length as a little-endian
// uint64, and its content. Each file's header is checked first. Other files
// under outDir are ignored.
//
// Runs of the same configuration give the same checksum whatever the number
// of workers, the order of jobs or the cache policy.
func Checksum(cfg *Config, outDir string) (uint64, error) {
	if err := cfg.Validate(); err != nil {
		return 0, fmt.Errorf("scaffold: checksum: invalid configuration: %w", err)
	}
	files, err := cfg.outputs()
	if err != nil {
		return 0, err
	}
	hash := cfg.Hash()
	d := xxhash.New()
	for _, f := range files {
		path := filepath.Join(outDir, filepath.FromSlash(f.rel))
		b, err := readFile(path)
		if err != nil {
			return 0, err
		}
		if _, err := checkFile(path, b, f.magic, hash, f.want, f.recSize); err != nil {
			return 0, err
		}
		d.WriteString(f.rel)
		d.Write([]byte{0})
		d.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(b))))
		d.Write(b)
	}
	return d.Sum64(), nil
}

// Counts is what a run produced: cells per type and connections per rule, in
// configuration order.
type Counts struct {
	Cells       []Count // one per cell type
	Connections []Count // one per rule
}

// Count is the number of cells of a type or of connections of a rule.
type Count struct {
	Name string
	N    int64
}

// String returns one line per cell type and per rule:
// "cells       granule  1234" and "connections g_to_g     5678".
func (c *Counts) String() string {
	w := 0
	for _, x := range append(c.Cells[:len(c.Cells):len(c.Cells)], c.Connections...) {
		w = max(w, len(x.Name))
	}
	var b strings.Builder
	for _, x := range c.Cells {
		fmt.Fprintf(&b, "cells       %-*s %d\n", w, x.Name, x.N)
	}
	for _, x := range c.Connections {
		fmt.Fprintf(&b, "connections %-*s %d\n", w, x.Name, x.N)
	}
	return b.String()
}

// Summary counts the cells per type and the connections per rule of a complete
// run of cfg under outDir, from the headers of the output files (whose sizes
// it checks, without reading the records).
func Summary(cfg *Config, outDir string) (*Counts, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("scaffold: summary: invalid configuration: %w", err)
	}
	files, err := cfg.outputs()
	if err != nil {
		return nil, err
	}
	c := &Counts{}
	for _, t := range cfg.CellTypes {
		c.Cells = append(c.Cells, Count{Name: t.Name})
	}
	for _, r := range cfg.Rules {
		c.Connections = append(c.Connections, Count{Name: r.Name})
	}
	hash := cfg.Hash()
	for _, f := range files {
		n, err := readHeader(filepath.Join(outDir, filepath.FromSlash(f.rel)), f.magic, hash, f.want, f.recSize)
		if err != nil {
			return nil, err
		}
		if f.magic == placeMagic {
			c.Cells[f.typeIdx].N += n
		} else {
			c.Connections[f.typeIdx].N += n
		}
	}
	return c, nil
}
