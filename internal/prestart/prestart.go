package prestart

// These mirror the values of the packages that own them, which this one
// cannot import without initialising them first (a test checks that they
// agree).
const (
	// SlackEnv marks a poolrun that raised its timer slack, with the slack
	// it was started with, in nanoseconds (execflow's slackEnv).
	SlackEnv = "POOLRUN_TIMER_SLACK"
	// BatchEnv marks a poolrun that moved itself from SCHED_OTHER to
	// SCHED_BATCH (execflow's batchEnv).
	BatchEnv = "POOLRUN_SCHED_BATCH"
	// TimerSlack is execflow.TimerSlack, in nanoseconds.
	TimerSlack = 10_000_000
	// ManyCommands is the number of commands from which poolrun run raises
	// its timer slack (the cli package's manyCommands).
	ManyCommands = 200
	// StateSuffix is execflow.StateSuffix.
	StateSuffix = ".poolrun-state"
	// maxCount bounds what countJobs reads of a workflow file.
	maxCount = 64 << 20
)
