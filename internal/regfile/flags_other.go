//go:build !unix

package regfile

// openFlags are added to O_RDONLY: none, O_NONBLOCK and O_NOCTTY being
// Unix's.
const openFlags = 0
