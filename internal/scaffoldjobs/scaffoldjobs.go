// Package scaffoldjobs runs the scaffold workload ([scaffold]) on an engine
// pool: one placement job per (cell type, chunk), then one connectivity job
// per (rule, chunk), each of which needs the cache item "spatial index of
// the rule's source type". An index is built once per worker that needs it
// and freed when the last connectivity job of the rules that use it has
// finished.
package scaffoldjobs

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cespare/xxhash/v2"
	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/scaffold"
)

// indexParam identifies an index: the configuration (as its canonical
// JSON), the output folder it reads from, and the cell type.
type indexParam struct {
	Config string
	Out    string
	Type   string
}

// Indexes is the family of index items, one member per (configuration,
// output folder, cell type). Its members report their memory with Size.
var Indexes = cachepool.DefineFamily("scaffold.index",
	func(ctx context.Context, p indexParam) (*scaffold.Index, error) {
		cfg, err := decodeConfig(p.Config)
		if err != nil {
			return nil, err
		}
		return scaffold.BuildIndex(cfg, p.Type, p.Out, 0)
	},
	cachepool.MemberName(func(p indexParam) string {
		return fmt.Sprintf("%s@%016x", p.Type, xxhash.Sum64String(p.Config+"\x00"+p.Out))
	}),
	cachepool.Size(func(ix *scaffold.Index) int64 { return ix.Bytes() }),
)

// PlaceArg is the argument of a placement job.
type PlaceArg struct {
	Config string // canonical JSON of the configuration
	Out    string
	Type   string
	Chunk  scaffold.Chunk
}

// ConnectArg is the argument of a connectivity job.
type ConnectArg struct {
	Config string
	Out    string
	Rule   string
	Chunk  scaffold.Chunk
}

// Place places the cells of one type in one chunk; its result is the
// number of cells.
var Place = engine.Register("scaffold.place", func(ctx context.Context, a PlaceArg) (int, error) {
	cfg, err := decodeConfig(a.Config)
	if err != nil {
		return 0, err
	}
	return scaffold.Place(cfg, a.Type, a.Chunk, a.Out)
})

// Connect connects the cells of one chunk by one rule; its result is the
// number of connections.
var Connect = engine.Register("scaffold.connect", func(ctx context.Context, a ConnectArg) (int, error) {
	cfg, err := decodeConfig(a.Config)
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

func encodeConfig(cfg *scaffold.Config) (string, error) {
	b, err := json.Marshal(cfg)
	return string(b), err
}

func decodeConfig(s string) (*scaffold.Config, error) {
	var cfg scaffold.Config
	if err := json.Unmarshal([]byte(s), &cfg); err != nil {
		return nil, fmt.Errorf("scaffold configuration: %w", err)
	}
	return &cfg, nil
}

// Plan is the scaffold workload queued on a pool.
type Plan struct {
	Config  *scaffold.Config
	Out     string
	Place   []*engine.Job[int]
	Connect []*engine.Job[int]
	// IndexItems are the index items the connectivity jobs need, by cell
	// type.
	IndexItems map[string]cachepool.Handle
}

// Queue queues the whole workload of cfg, writing under out, on p.
func Queue(p *engine.Pool, cfg *scaffold.Config, out string) (*Plan, error) {
	js, err := encodeConfig(cfg)
	if err != nil {
		return nil, err
	}
	plan := &Plan{Config: cfg, Out: out, IndexItems: map[string]cachepool.Handle{}}
	chunks := cfg.Chunks()
	byType := map[string][]*engine.Job[int]{}
	for _, ct := range cfg.CellTypes {
		for _, ch := range chunks {
			j := engine.Queue(p, Place, PlaceArg{Config: js, Out: out, Type: ct.Name, Chunk: ch},
				engine.Label("type", ct.Name), engine.Label("chunk", ch.String()))
			byType[ct.Name] = append(byType[ct.Name], j)
			plan.Place = append(plan.Place, j)
		}
	}
	for _, r := range cfg.Rules {
		item, ok := plan.IndexItems[r.From]
		if !ok {
			item = Indexes.Item(indexParam{Config: js, Out: out, Type: r.From})
			plan.IndexItems[r.From] = item
		}
		var sources []engine.Dep
		for _, j := range byType[r.From] {
			sources = append(sources, j)
		}
		for _, ch := range chunks {
			j := engine.Queue(p, Connect, ConnectArg{Config: js, Out: out, Rule: r.Name, Chunk: ch},
				engine.After(sources...), engine.After(byType[r.To][ch.Index]),
				engine.Needs(item),
				engine.Label("rule", r.Name), engine.Label("chunk", ch.String()))
			plan.Connect = append(plan.Connect, j)
		}
	}
	return plan, nil
}
