package scaffoldjobs

import "errors"

// errConfigChanged is returned (in the message of a job's error) when the
// configuration file a job's [configRef] names does not hold the configuration
// of the ref's hash: it was changed, replaced or cut short after [Queue] wrote
// it.
var errConfigChanged = errors.New("scaffoldjobs: configuration file changed since it was queued")
