package scaffoldjobs

import (
	"context"
	"fmt"

	"github.com/cespare/xxhash/v2"
	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/scaffold"
)

// indexParam identifies an index: the configuration, the output folder it
// reads from, and the cell type.
type indexParam struct {
	Config ConfigRef
	Out    string
	Type   string
}

// Indexes is the family of index items, one member per (configuration,
// output folder, cell type). A member's build gets the configuration item
// first. Its members report their memory with Size.
var Indexes = cachepool.DefineFamily("scaffold.index",
	func(ctx context.Context, p indexParam) (*scaffold.Index, error) {
		cfg, err := Configs.Item(p.Config).Get(ctx)
		if err != nil {
			return nil, err
		}
		return scaffold.BuildIndex(cfg, p.Type, p.Out, 0)
	},
	cachepool.MemberName(func(p indexParam) string {
		return fmt.Sprintf("%s@%016x", p.Type, xxhash.Sum64String(fmt.Sprintf("%016x\x00%s\x00%s", p.Config.Hash, p.Config.File, p.Out)))
	}),
	cachepool.Size(func(ix *scaffold.Index) int64 { return ix.Bytes() }),
)

// PlaceArg is the argument of a placement job.
type PlaceArg struct {
	Config ConfigRef
	Out    string
	Type   string
	Chunk  scaffold.Chunk
}

// ConnectArg is the argument of a connectivity job.
type ConnectArg struct {
	Config ConfigRef
	Out    string
	Rule   string
	Chunk  scaffold.Chunk
}

// Place places the cells of one type in one chunk; its result is the
// number of cells. Its jobs need the configuration item of their
// [PlaceArg.Config].
var Place = engine.Register("scaffold.place", func(ctx context.Context, a PlaceArg) (int, error) {
	cfg, err := Configs.Item(a.Config).Get(ctx)
	if err != nil {
		return 0, err
	}
	return scaffold.Place(cfg, a.Type, a.Chunk, a.Out)
})

// Connect connects the cells of one chunk by one rule; its result is the
// number of connections. Its jobs need the configuration item of their
// [ConnectArg.Config] and the index of the rule's source type.
var Connect = engine.Register("scaffold.connect", func(ctx context.Context, a ConnectArg) (int, error) {
	cfg, err := Configs.Item(a.Config).Get(ctx)
	if err != nil {
		return 0, err
	}
	rule, err := cfg.Rule(a.Rule)
	if err != nil {
		return 0, err
	}
	ix, err := Indexes.Item(indexParam{Config: a.Config, Out: a.Out, Type: rule.From}).Get(ctx)
	if err != nil {
		return 0, err
	}
	return scaffold.Connect(cfg, rule, a.Chunk, ix, a.Out)
})
