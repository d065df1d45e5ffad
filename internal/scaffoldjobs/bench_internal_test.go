package scaffoldjobs

import (
	"bytes"
	"context"
	"encoding/gob"
	"testing"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/internal/scaffold"
)

// BenchmarkJobArg measures what a connectivity job's argument costs: the
// parent's gob encoding (as the engine does it, one encoder per value), and
// the worker's gob decoding followed by what the job does before its work
// (get the configuration, a cache hit after the worker's first job; find the
// rule; find the index item). arg-bytes is the argument's size on the wire.
//
//	go test -run '^$' -bench JobArg -count 6 ./internal/scaffoldjobs/
func BenchmarkJobArg(b *testing.B) {
	cfg := scaffold.Default().Scaled(0.1)
	ref, err := writeConfig(cfg, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	a := connectArg{Config: ref, Out: "/tmp/some/out/folder", Rule: "granule_to_golgi", Chunk: cfg.Chunks()[5]}
	var wire bytes.Buffer
	if err := gob.NewEncoder(&wire).Encode(a); err != nil {
		b.Fatal(err)
	}
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var buf bytes.Buffer
			if err := gob.NewEncoder(&buf).Encode(a); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(wire.Len()), "arg-bytes")
	})
	b.Run("decode", func(b *testing.B) {
		ctx := cachepool.WithCache(context.Background(), cachepool.New())
		if _, err := configs.Item(ref).Get(ctx); err != nil { // the worker's first job
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			var v connectArg
			if err := gob.NewDecoder(bytes.NewReader(wire.Bytes())).Decode(&v); err != nil {
				b.Fatal(err)
			}
			c, err := configs.Item(v.Config).Get(ctx)
			if err != nil {
				b.Fatal(err)
			}
			r, err := c.Rule(v.Rule)
			if err != nil {
				b.Fatal(err)
			}
			indexes.Item(indexParam{Config: v.Config, Out: v.Out, Type: r.From})
		}
	})
	b.Run("first-build", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := loadConfig(context.Background(), ref); err != nil {
				b.Fatal(err)
			}
		}
	})
}
