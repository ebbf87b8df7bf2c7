package main

import (
	"strings"
	"testing"
	"time"
)

func TestSinceUntilLimit(t *testing.T) {
	cases := []struct {
		name, since, until string
		limit              int
		err                string
	}{
		{"none", "", "", 0, ""},
		{"both", "2026-01-02T03:04:05Z", "2026-01-03T00:00:00.5Z", 1000, ""},
		{"bad since", "yesterday", "", 10, "task retry: --since must be an RFC 3339 time"},
		{"bad until", "", "2026-13-01T00:00:00Z", 10, "task retry: --until must be an RFC 3339 time"},
		{"negative limit", "", "", -1, "task retry: --limit must be in 0..1000, got -1"},
		{"limit too big", "", "", 1001, "task retry: --limit must be in 0..1000, got 1001"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var since, until time.Time
			err := sinceUntilLimit("task retry", tc.since, tc.until, tc.limit, &since, &until)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.since != "" && !since.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) {
				t.Errorf("since = %v", since)
			}
			if tc.until != "" && !until.Equal(time.Date(2026, 1, 3, 0, 0, 0, 5e8, time.UTC)) {
				t.Errorf("until = %v", until)
			}
			if tc.since == "" && !since.IsZero() {
				t.Errorf("since set without a flag: %v", since)
			}
		})
	}
}
