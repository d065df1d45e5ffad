// Package regfile opens and reads the files a user names — a workflow, a
// configuration, a state file, a report, a join file — refusing at once
// whatever is not a regular file.
//
// open(2) of a named pipe (FIFO) waits for a writer, in the kernel, where
// neither a cancelled context nor a signal that the program catches (as
// cmd/poolrun catches SIGINT and SIGTERM) ends the wait; a device such as
// /dev/zero never ends, and opening some devices acts on them (a terminal
// can become the controlling one); a directory fails only when read.
// [Open] therefore stats the path and opens nothing but a regular file,
// without waiting, and checks the open descriptor again; [ReadFile] also
// checks the file's size against the caller's limit before it reads a
// byte, and reads at most one byte more than the limit, should the file
// grow.
//
// # Errors
//
// A path that names something else is refused with a [*NotRegularError],
// which says what it names ("is a named pipe (FIFO), not a regular file",
// "is a directory, not a regular file", "is a device, not a regular
// file") and matches [ErrNotRegular]; a file over the limit with a
// [*TooLargeError], which gives its size and the limit and matches
// [ErrTooLarge]. Both name the path. Any other error is that of
// [os.OpenFile] or of reading, which names the path too; a missing file
// matches [io/fs.ErrNotExist].
package regfile
