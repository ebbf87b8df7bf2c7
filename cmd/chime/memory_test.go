package main

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

func TestByteSizeFlag(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr string
	}{
		{"256MiB", 256 << 20, ""},
		{"1GiB", 1 << 30, ""},
		{"512KiB", 512 << 10, ""},
		{"2TiB", 2 << 40, ""},
		{"1000B", 1000, ""},
		{"123456789", 123456789, ""},
		{"0", 0, ""},
		{"off", 0, ""},
		{"256MB", 0, "want a size"},
		{"256 MiB", 0, "want a size"},
		{"-1MiB", 0, "want a size"},
		{"MiB", 0, "want a size"},
		{"1.5GiB", 0, "want a size"},
		{"", 0, "want a size"},
		{"9000000TiB", 0, "out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var b byteSize
			err := b.Set(tt.in)
			switch {
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Set(%q) = %v, want an error containing %q", tt.in, err, tt.wantErr)
				}
			case err != nil:
				t.Fatalf("Set(%q) = %v, want nil", tt.in, err)
			case int64(b) != tt.want:
				t.Fatalf("Set(%q) gave %d, want %d", tt.in, int64(b), tt.want)
			}
		})
	}
}

func TestFormatBytes(t *testing.T) {
	tests := []struct {
		in   int64
		want string
	}{
		{0, "off"},
		{256 << 20, "256MiB"},
		{3 << 30, "3GiB"},
		{1536 << 20, "1536MiB"},
		{1000, "1000B"},
		{4096, "4KiB"},
	}
	for _, tt := range tests {
		if got := formatBytes(tt.in); got != tt.want {
			t.Errorf("formatBytes(%d) = %q, want %q", tt.in, got, tt.want)
		}
		var b byteSize
		if err := b.Set(tt.want); err != nil || int64(b) != tt.in {
			t.Errorf("Set(formatBytes(%d)) = %d, %v, want the same size back", tt.in, int64(b), err)
		}
	}
}

func TestSplitMemory(t *testing.T) {
	tests := []struct {
		limit   int64
		want    memoryBudget
		wantErr string
	}{
		{0, memoryBudget{}, ""},
		// the store's own defaults, 80 MiB other, 96 MiB Go
		{256 << 20, memoryBudget{Limit: 256 << 20, Cache: 32 << 20, MemTable: 16 << 20, Other: 80 << 20, Go: 96 << 20}, ""},
		{128 << 20, memoryBudget{Limit: 128 << 20, Cache: 16 << 20, MemTable: 8 << 20, Other: 40 << 20, Go: 48 << 20}, ""},
		{1 << 30, memoryBudget{Limit: 1 << 30, Cache: 128 << 20, MemTable: 64 << 20, Other: 320 << 20, Go: 384 << 20}, ""},
		// memtables stop at 64 MiB; Go gets what they leave
		{4 << 30, memoryBudget{Limit: 4 << 30, Cache: 512 << 20, MemTable: 64 << 20, Other: 1280 << 20, Go: 2112 << 20}, ""},
		{127 << 20, memoryBudget{}, "--memory-limit 127MiB: want at least 128MiB (or off)"},
		{1, memoryBudget{}, "want at least 128MiB"},
	}
	for _, tt := range tests {
		t.Run(formatBytes(tt.limit), func(t *testing.T) {
			got, err := splitMemory(tt.limit)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("splitMemory(%d) = %v, want an error containing %q", tt.limit, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("splitMemory(%d) = %+v, %v, want %+v", tt.limit, got, err, tt.want)
			}
			if sum := got.Cache + 3*int64(got.MemTable) + got.Other + got.Go; sum != tt.limit {
				t.Errorf("splitMemory(%d) parts sum to %d, want the limit", tt.limit, sum)
			}
		})
	}
}

// TestTuneMallocKeepsEnvironment: a MALLOC_ARENA_MAX or
// MALLOC_MMAP_THRESHOLD_ in the environment (which glibc has applied at
// start) is not overridden.
func TestTuneMallocKeepsEnvironment(t *testing.T) {
	if !mallocGlibc() {
		t.Skip("not glibc's malloc (or no cgo): nothing is tuned")
	}
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"none set", nil, "[M_ARENA_MAX=1 M_MMAP_THRESHOLD=131072]"},
		{"arenas set", map[string]string{"MALLOC_ARENA_MAX": "4"}, "[M_MMAP_THRESHOLD=131072]"},
		{"threshold set", map[string]string{"MALLOC_MMAP_THRESHOLD_": "65536"}, "[M_ARENA_MAX=1]"},
		{"both set", map[string]string{"MALLOC_ARENA_MAX": "4", "MALLOC_MMAP_THRESHOLD_": "65536"}, "[]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := fmt.Sprint(tuneMalloc(func(k string) string { return tt.env[k] }))
			if got != tt.want {
				t.Errorf("tuneMalloc(%v) = %s, want %s", tt.env, got, tt.want)
			}
		})
	}
}

// TestMallocConstants: what the C side applies is what memory.go documents
// (and logs), and the constructor applied it when the test binary loaded
// (the test environment sets neither variable).
func TestMallocConstants(t *testing.T) {
	if !mallocGlibc() {
		t.Skip("not glibc's malloc (or no cgo): nothing is tuned")
	}
	if a, m := mallocSettings(); a != mallocArenas || m != mallocMmapThreshold {
		t.Errorf("C applies M_ARENA_MAX=%d M_MMAP_THRESHOLD=%d, want %d and %d", a, m, mallocArenas, mallocMmapThreshold)
	}
	if os.Getenv("MALLOC_ARENA_MAX") == "" && os.Getenv("MALLOC_MMAP_THRESHOLD_") == "" && mallocAtStart() != 3 {
		t.Errorf("mallocAtStart() = %d, want 3: the constructor set both", mallocAtStart())
	}
}
