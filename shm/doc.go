// Package shm is the window through which a poolrun parent tells its worker
// processes which cache items are still required: a fixed-capacity set of
// uint64 keys in a shared memory mapping, with one writer and many readers.
//
// It is the single-host form of an MPI passive-target window. The parent
// [Create]s the window, hands [Window.File] to each worker (as an inherited
// descriptor, for example through [os/exec.Cmd.ExtraFiles]) and
// [Window.Publish]es the whole set whenever it changes. Each worker [Open]s
// the descriptor, which maps the window read-only, and takes a
// [Window.Snapshot] when it wants to know the set, or asks
// [Window.AppendAbsent] which of its own keys the set no longer lists,
// which searches the mapping in place; [Window.Gen], one atomic load, tells
// it whether anything was published since it last looked. No message or
// lock is involved between the processes, and the only system call is the
// wake-up that follows a publish (see below).
//
// # Consistency
//
// Writes go through a seqlock. The writer stores an odd sequence, then the
// keys and their count, then the next even sequence; a reader copies the
// count and keys (or searches them in place) between two loads of the
// sequence and retries unless both saw the same even value. Every shared word is accessed through sync/atomic,
// so the writer's final (even) sequence store is synchronised before the
// reader's load that observes it, and the reader sees every key written
// before it: a snapshot is always exactly one published set, never parts of
// two. The sequence doubles as the window's generation ([Snapshot.Gen],
// [Window.Gen]): it grows with every publish that changes the set and stays
// put when the same set is published again.
//
// A writer that dies in the middle of a publish leaves the sequence odd.
// Readers tell a sequence that stays odd ([ErrWriterStalled] after the stall
// timeout) from one that keeps moving (a busy writer, which only makes them
// retry), so a reader never hangs.
//
// # Waiting for a publish
//
// A worker with nothing to do can sleep until the set changes:
// [Window.WaitGen] blocks until the generation reaches a given value (a
// snapshot's generation plus 2 is the next publish), a deadline passes, or
// the window is closed. On Linux it sleeps in the kernel on a futex over the
// generation's word of the shared mapping, and [Window.Publish] wakes every
// waiting process after each change, so a sleeping worker hears of a publish
// within microseconds without spinning. Readers cannot tell the writer that
// they wait (their mapping is read-only), so every publish that changes the
// set makes the wake-up system call, waiters or not. Elsewhere waiters poll
// every millisecond. On the writer's own window a waiter sleeps in the Go
// scheduler instead, as on a channel. [Window.Nudge] makes waiters return
// early.
//
// # Capacity and overflow
//
// A window holds [DefaultCapacity] keys unless told otherwise. A set with
// more keys is published as "overflowed" ([ErrOverflow]): readers then take
// every key as present ([Snapshot.Contains] is always true), which costs
// memory but can never cause a wrong eviction. Key 0 marks an empty slot and
// cannot be published.
//
// Keys are stored sorted, so [Snapshot.Contains] is a binary search and a
// snapshot is a plain copy that allocates nothing when given room.
//
// # Lifetime
//
// The backing file is an anonymous memory file (memfd on Linux), or else a
// file created exclusively with mode 0600 in the temporary folder and
// unlinked at once. The memory lives as long as some process holds a
// descriptor or a mapping of it: nothing remains on disk after [Window.Close],
// nor after any process is killed.
//
// # Finding a window from outside
//
// [Find] lists the windows that a process holds, through a descriptor or,
// for a reader that closed its descriptor after [Open], through its mapping,
// each with a path under /proc that [Open] can read (Linux only). This is
// how "poolrun inspect PID" finds a pool's window.
//
// # Layout
//
// One page of header (magic number, layout version, capacity, sequence,
// count, overflow flag, each a 64-bit word), then the slots. [Open] checks the
// header field by field: it refuses a file that is not a window with
// [ErrCorrupt], and a window of a layout version it does not read (made by
// another build) with [ErrVersion]. The byte offsets are drawn in layout.go.
package shm
