package workflow

// The tests check the limits on a workflow's size with workflows near
// them: they lower the limits to these, which keeps those workflows
// small (MaxJobs is 10 million).
func init() {
	limits.jobs, limits.deps, limits.paths, limits.text, limits.values = 100_000, 1_000_000, 1_000_000, 256<<20, 10*100_000
}
