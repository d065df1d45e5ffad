package scaffoldjobs

import (
	"context"
	"fmt"
	"slices"

	"github.com/poolrun/poolrun/cachepool"
	"github.com/poolrun/poolrun/engine"
	"github.com/poolrun/poolrun/internal/scaffold"
)

// Plan is the scaffold workload queued on a pool.
type Plan struct {
	// Place holds the placement jobs, by cell type then chunk; Connect the
	// connectivity jobs, by rule then chunk.
	Place   []*engine.Job[int]
	Connect []*engine.Job[int]
	// ConfigItem is the configuration item, which every job needs.
	ConfigItem cachepool.Handle
	// IndexItems are the index items the connectivity jobs need, by cell
	// type.
	IndexItems map[string]cachepool.Handle

	// ref names the configuration in every job's argument; its file exists
	// until every job of the plan has finished (or Close).
	ref  configRef
	file *configFile
}

// Queue queues the whole workload of cfg, writing under out (created if need
// be), on p. It validates cfg and writes it to a new file in out, which is
// removed once every job it queued has finished, before p's Run returns (see
// the package doc). Call it before p's Run has returned: it adds a scheduler
// with [engine.Pool.Go].
func Queue(p *engine.Pool, cfg *scaffold.Config, out string) (*Plan, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("scaffoldjobs: invalid configuration: %w", err)
	}
	ref, err := writeConfig(cfg, out)
	if err != nil {
		return nil, err
	}
	cfgItem := configs.Item(ref)
	plan := &Plan{
		ref: ref, ConfigItem: cfgItem,
		IndexItems: map[string]cachepool.Handle{},
		file:       &configFile{path: ref.File, gone: make(chan struct{})},
	}
	chunks := cfg.Chunks()
	byType := map[string][]*engine.Job[int]{}
	for _, ct := range cfg.CellTypes {
		for _, ch := range chunks {
			j := engine.Queue(p, place, placeArg{Config: ref, Out: out, Type: ct.Name, Chunk: ch},
				engine.Needs(cfgItem),
				engine.Label("type", ct.Name), engine.Label("chunk", ch.String()))
			byType[ct.Name] = append(byType[ct.Name], j)
			plan.Place = append(plan.Place, j)
		}
	}
	for _, r := range cfg.Rules {
		item, ok := plan.IndexItems[r.From]
		if !ok {
			item = indexes.Item(indexParam{Config: ref, Out: out, Type: r.From})
			plan.IndexItems[r.From] = item
		}
		var sources []engine.Dep
		for _, j := range byType[r.From] {
			sources = append(sources, j)
		}
		for _, ch := range chunks {
			j := engine.Queue(p, connect, connectArg{Config: ref, Out: out, Rule: r.Name, Chunk: ch},
				engine.After(sources...), engine.After(byType[r.To][ch.Index]),
				engine.Needs(cfgItem, item),
				engine.Label("rule", r.Name), engine.Label("chunk", ch.String()))
			plan.Connect = append(plan.Connect, j)
		}
	}
	// The goroutine removes the file; the scheduler makes Run wait for it
	// and report its error. The goroutine is not the scheduler itself
	// because a pool that fails to start its workers cancels every job but
	// never starts its schedulers.
	go plan.file.removeAfter(slices.Concat(plan.Place, plan.Connect))
	p.Go(func(context.Context) error {
		// Not ctx: when it ends, the pool finishes every job (cancelled or
		// aborted) before it waits for schedulers, so the file goes then.
		<-plan.file.gone
		return plan.file.err
	})
	return plan, nil
}

// Close removes the plan's configuration file now, if it is still there,
// and returns the error of that removal. The file goes anyway once every job
// of the plan has finished; Close is for a caller that queued the plan and
// then does not run the pool. Called while the pool runs, it makes the jobs
// of workers that have not read the configuration yet fail. Close may be
// called more than once.
func (p *Plan) Close() error {
	return p.file.remove()
}
