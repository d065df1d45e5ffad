package execflow

// Names of the package's own that its external tests use.

type CommandError = commandError

const (
	EnvPrefix  = envPrefix
	ItemPrefix = itemPrefix
)

var (
	AsCommandError = asCommandError
	ErrBadState    = errBadState
	ErrNoSource    = errNoSource
	ErrNoArtefact  = errNoArtefact
	LogName        = logName
	StateFile      = stateFile
)
