//go:build !unix

package execflow

import "os"

// flock does nothing where there is no flock(2): runs are not kept apart.
func flock(*os.File, int) error { return nil }
