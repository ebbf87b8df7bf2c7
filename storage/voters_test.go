package storage

import (
	"path/filepath"
	"slices"
	"testing"
)

func TestVotersSurviveReopen(t *testing.T) {
	opts := Options{Dir: filepath.Join(t.TempDir(), "data"), Logger: testLogger(t)}
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := s.Voters(); err != nil || v != nil {
		t.Fatalf("Voters of a new store = %v, %v; want nil", v, err)
	}
	if err := s.SetVoters([]string{"n1", "n2"}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetVoters([]string{"n1", "n2", "n3"}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]string{{""}, {"a\nb"}} {
		if err := s.SetVoters(bad); err == nil {
			t.Errorf("SetVoters(%q) succeeded, want an error", bad)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(opts); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, err := s.Voters(); err != nil || !slices.Equal(v, []string{"n1", "n2", "n3"}) {
		t.Errorf("Voters after reopen = %v, %v; want [n1 n2 n3]", v, err)
	}
	if err := s.SetVoters(nil); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Voters(); err != nil || v == nil || len(v) != 0 {
		t.Errorf("Voters after saving none = %#v, %v; want an empty, non-nil list", v, err)
	}
}
