//go:build linux && cgo

package main

/*
#include <stdlib.h> // defines __GLIBC__ on glibc
#ifdef __GLIBC__
#include <malloc.h>

// mallocArenas and mallocMmapThreshold in memory.go (TestMallocConstants).
#define CHIME_ARENAS 1
#define CHIME_MMAP_THRESHOLD (128 << 10)

// chime_tune_malloc applies M_ARENA_MAX and M_MMAP_THRESHOLD, each unless
// its environment variable is set (glibc has applied that one). It returns
// a mask of what it set: 1 the arenas, 2 the threshold.
static int chime_tune_malloc(int arenas_env, int threshold_env) {
	int set = 0;
	if (!arenas_env && mallopt(M_ARENA_MAX, CHIME_ARENAS) == 1) set |= 1;
	if (!threshold_env && mallopt(M_MMAP_THRESHOLD, CHIME_MMAP_THRESHOLD) == 1) set |= 2;
	return set;
}

static int env_set(const char *name) {
	const char *v = getenv(name);
	return v != NULL && v[0] != '\0';
}

// What the constructor set.
static int chime_malloc_tuned = -1;

// Runs when the binary is loaded, before the Go runtime starts a thread:
// glibc gives each thread that allocates an arena of its own while there
// are fewer than M_ARENA_MAX, and its threads keep using the arenas it
// made. Set later (in serve), the limit left the runtime's first threads
// their own arenas, and a 10M-task ingest peaked as high as without it.
__attribute__((constructor)) static void chime_malloc_init(void) {
	chime_malloc_tuned = chime_tune_malloc(env_set("MALLOC_ARENA_MAX"), env_set("MALLOC_MMAP_THRESHOLD_"));
}
static int chime_malloc_startup(void) { return chime_malloc_tuned; }
static int chime_arenas(void) { return CHIME_ARENAS; }
static int chime_glibc(void) { return 1; }
static int chime_mmap_threshold(void) { return CHIME_MMAP_THRESHOLD; }
#else
static int chime_tune_malloc(int arenas_env, int threshold_env) { return -1; }
static int chime_malloc_startup(void) { return -1; }
static int chime_arenas(void) { return 0; }
static int chime_glibc(void) { return 0; }
static int chime_mmap_threshold(void) { return 0; }
#endif
*/
import "C"

// applyMalloc applies the tuning, skipping what the environment sets, and
// returns the mask of what it set (-1: the C allocator is not glibc's).
func applyMalloc(arenasEnv, thresholdEnv bool) int {
	return int(C.chime_tune_malloc(cbool(arenasEnv), cbool(thresholdEnv)))
}

// mallocGlibc reports whether the C allocator is glibc's.
func mallocGlibc() bool { return C.chime_glibc() == 1 }

// mallocAtStart is the mask the constructor set at load (-1: not glibc's).
func mallocAtStart() int { return int(C.chime_malloc_startup()) }

// mallocSettings returns the values the C side applies.
func mallocSettings() (arenas, threshold int) {
	return int(C.chime_arenas()), int(C.chime_mmap_threshold())
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
