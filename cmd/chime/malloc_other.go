//go:build !(linux && cgo)

package main

// Without cgo pebble allocates from the Go heap, and off Linux the C
// allocator is not glibc's: there is nothing to tune.

func applyMalloc(bool, bool) int              { return -1 }
func mallocGlibc() bool                       { return false }
func mallocAtStart() int                      { return -1 }
func mallocSettings() (arenas, threshold int) { return 0, 0 }
