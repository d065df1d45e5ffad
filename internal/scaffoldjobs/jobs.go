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
	Config configRef
	Out    string
	Type   string
}

// indexes is the family of index items, one member per (configuration,
// output folder, cell type). A member's build gets the configuration item
// first. Its members report their memory with Size.
var indexes = cachepool.DefineFamily("scaffold.index",
	func(ctx context.Context, p indexParam) (*scaffold.Index, error) {
		cfg, err := configs.Item(p.Config).Get(ctx)
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

// placeArg is the argument of a placement job.
type placeArg struct {
	Config configRef
	Out    string
	Type   string
	Chunk  scaffold.Chunk
}

// connectArg is the argument of a connectivity job.
type connectArg struct {
	Config configRef
	Out    string
	Rule   string
	Chunk  scaffold.Chunk
}

// place places the cells of one type in one chunk; its result is the
// number of cells. Its jobs need the configuration item of their
// [placeArg.Config].
var place = engine.Register("scaffold.place", func(ctx context.Context, a placeArg) (int, error) {
	cfg, err := configs.Item(a.Config).Get(ctx)
	if err != nil {
		return 0, err
	}
	return scaffold.Place(cfg, a.Type, a.Chunk, a.Out)
})

// connect connects the cells of one chunk by one rule; its result is the
// number of connections. Its jobs need the configuration item of their
// [connectArg.Config] and the index of the rule's source type.
var connect = engine.Register("scaffold.connect", func(ctx context.Context, a connectArg) (int, error) {
	cfg, err := configs.Item(a.Config).Get(ctx)
	if err != nil {
		return 0, err
	}
	rule, err := cfg.Rule(a.Rule)
	if err != nil {
		return 0, err
	}
	ix, err := indexes.Item(indexParam{Config: a.Config, Out: a.Out, Type: rule.From}).Get(ctx)
	if err != nil {
		return 0, err
	}
	return scaffold.Connect(cfg, rule, a.Chunk, ix, a.Out)
})
