package shm

// This file holds every pointer conversion over the mapping; the rest of the
// package uses the typed accessors defined here. (wait_linux.go hands the
// address of the generation word, computed here, to the kernel, and does no
// arithmetic of its own.)
//
// Layout of a window with capacity C (all integers are little-endian on the
// machines we run on, and native-endian in general: writer and readers are
// the same binary on the same host):
//
//	offset  size  field
//	     0     8  magic     ("poolrunW", magicNumber)
//	     8     8  version   (layoutVersion)
//	    16     8  capacity  (C, number of slots)
//	    24     8  seq       seqlock sequence = generation; odd while a write is under way
//	 24|28   (4)  genWord   low 32 bits of seq, the futex word of WaitGen (24 little-, 28 big-endian)
//	    32     8  count     number of live keys in slots[0:count], sorted ascending
//	    40     8  overflow  1 when the published set had more than C keys
//	    48  4048  (reserved, zero)
//	  4096   8*C  slots     key i at 4096 + 8*i; slots past count are stale
//	   ...        (padding to a multiple of the page size)
//
// The header occupies the whole first page (headerSize) so that the slots
// start page-aligned too. Every field is 8-byte aligned and is only read or
// written through sync/atomic.
//
// The generation word. Readers sleep in [Window.WaitGen] on a futex, which
// compares and waits on a 32-bit word, while seq is 64 bits. The word is the
// half of seq that holds its 32 least significant bits: bytes 24..27 on a
// little-endian machine, 28..31 on a big-endian one (offGenWord). Every store
// to seq adds 1 (odd, then even), so every store changes that half, and each
// publish changes it twice; the most significant half changes only once in
// 2^32 stores, so waiting on it would miss publishes. A waiter loads the whole
// of seq (atomically, 64 bits), decides from it, and hands the kernel its low
// 32 bits as the value to compare: the kernel then sleeps only if the word
// still holds them. The low halves of two different sequences are equal only
// when 2^32 stores (2^31 publishes) separate them, which cannot happen
// between a waiter's load and its system call. Go code never loads the word
// on its own (a 32-bit atomic access inside a 64-bit atomic word is outside
// the Go memory model); only the kernel reads it.
//
// The wake-up needs no field of its own: the writer wakes the word's waiters
// after each publish that changes the set, whether or not any reader waits,
// because readers map the window read-only and so cannot register anywhere
// the writer could look (see [Window.Publish]). The bytes are those of
// layout version 1, which therefore stays 1: a writer built before
// [Window.WaitGen] existed does not wake waiters, but it never meets a
// reader that waits, since a pool's parent and workers are one binary.

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/cpu"
	"golang.org/x/sys/unix"
)

const (
	magicNumber   uint64 = 0x576e75726c6f6f70 // the bytes "poolrunW" read as a little-endian word
	layoutVersion uint64 = 1

	offMagic    = 0
	offVersion  = 8
	offCapacity = 16
	offSeq      = 24
	offCount    = 32
	offOverflow = 40
	headerSize  = 4096
)

// offGenWord returns the byte offset of the 32-bit half of seq that holds its
// least significant bits, the futex word of [Window.WaitGen]: offSeq on a
// little-endian machine, offSeq+4 on a big-endian one.
func offGenWord() int {
	if cpu.IsBigEndian {
		return offSeq + 4
	}
	return offSeq
}

// header gives typed access to the fields of a mapped window.
type header struct {
	magic, version, capacity *atomic.Uint64
	seq, count, overflow     *atomic.Uint64
	slots                    []atomic.Uint64

	// genWord is the low half of seq, for the kernel's futex calls only:
	// Go code reads seq as a whole (see the layout comment).
	genWord *uint32
}

// word returns the 64-bit word at byte offset off of the mapping.
// The mapping is page-aligned, so every multiple of 8 is 8-byte aligned.
func word(m []byte, off int) *atomic.Uint64 {
	_ = m[off+7] // bounds check
	return (*atomic.Uint64)(unsafe.Pointer(&m[off]))
}

// mapHeader returns the accessors of mapping m, whose slots hold capacity keys.
// The caller has checked that len(m) >= mappingSize(capacity).
func mapHeader(m []byte, capacity int) header {
	h := header{
		magic:    word(m, offMagic),
		version:  word(m, offVersion),
		capacity: word(m, offCapacity),
		seq:      word(m, offSeq),
		count:    word(m, offCount),
		overflow: word(m, offOverflow),
		genWord:  (*uint32)(unsafe.Pointer(&m[offGenWord()])),
	}
	if capacity > 0 {
		_ = word(m, headerSize+8*(capacity-1)) // bounds check of the last slot
		h.slots = unsafe.Slice((*atomic.Uint64)(unsafe.Pointer(&m[headerSize])), capacity)
	}
	return h
}

// search reports whether key is among slots[0:n], which the caller has
// bounded by the capacity: a binary search of atomic loads in place. Under
// a publish in progress the loads may see a mixture of two sets, and the
// answer is then meaningless but the search stays within the slots; the
// caller's seqlock discards it (see [Window.AppendAbsent]).
func (h *header) search(n int, key uint64) bool {
	if n == 0 {
		return false
	}
	slots := h.slots[:n]
	// Halving, as in [Snapshot.Contains].
	base := 0
	for n > 1 {
		half := n >> 1
		if slots[base+half].Load() <= key {
			base += half
		}
		n -= half
	}
	return slots[base].Load() == key
}

// retire replaces the pages of mapping m, at the same addresses, with
// private zero pages that no file backs, in one mmap call (MAP_FIXED
// replaces a mapping atomically: no instant leaves the range unmapped).
// Close calls it instead of unmapping, so that a read that runs
// concurrently with Close and takes no lock ([Window.Gen],
// [Window.Snapshot], [Window.AppendAbsent]) reads 0 rather than fault.
// The window's file is released at once; the zero pages stay reserved
// until the Window is unreachable (see Close).
func retire(m []byte) error {
	_, err := unix.MmapPtr(-1, 0, unsafe.Pointer(&m[0]), uintptr(len(m)),
		unix.PROT_READ, unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_FIXED)
	return err
}
