package shm

// This file holds every pointer conversion over the mapping; the rest of the
// package uses the typed accessors defined here.
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
//	    32     8  count     number of live keys in slots[0:count], sorted ascending
//	    40     8  overflow  1 when the published set had more than C keys
//	    48  4048  (reserved, zero)
//	  4096   8*C  slots     key i at 4096 + 8*i; slots past count are stale
//	   ...        (padding to a multiple of the page size)
//
// The header occupies the whole first page (headerSize) so that the slots
// start page-aligned too. Every field is 8-byte aligned and is only read or
// written through sync/atomic.

import (
	"sync/atomic"
	"unsafe"
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

// header gives typed access to the fields of a mapped window.
type header struct {
	magic, version, capacity *atomic.Uint64
	seq, count, overflow     *atomic.Uint64
	slots                    []atomic.Uint64
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
	}
	if capacity > 0 {
		_ = word(m, headerSize+8*(capacity-1)) // bounds check of the last slot
		h.slots = unsafe.Slice((*atomic.Uint64)(unsafe.Pointer(&m[headerSize])), capacity)
	}
	return h
}
