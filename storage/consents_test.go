package storage

import (
	"path/filepath"
	"slices"
	"testing"
)

func TestConsentsSurviveReopen(t *testing.T) {
	opts := Options{Dir: filepath.Join(t.TempDir(), "data"), Logger: testLogger(t)}
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := s.Consents(); err != nil || v != nil {
		t.Fatalf("Consents of a new store = %v, %v; want nil", v, err)
	}
	want := []Consent{{Owner: "n1", Taker: "n2", Inc: 7, Term: 1}, {Owner: "n1", Taker: "n3", Inc: 1<<64 - 1, Term: 3}}
	if err := s.SetConsents(want[:1]); err != nil {
		t.Fatal(err)
	}
	if err := s.SetConsents(want); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]Consent{{{Owner: "", Taker: "n2"}}, {{Owner: "n1", Taker: "a\tb"}}, {{Owner: "a\nb", Taker: "n2"}}} {
		if err := s.SetConsents(bad); err == nil {
			t.Errorf("SetConsents(%v) succeeded, want an error", bad)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(opts); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, err := s.Consents(); err != nil || !slices.Equal(v, want) {
		t.Errorf("Consents after reopen = %v, %v; want %v", v, err, want)
	}
	if err := s.SetConsents(nil); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Consents(); err != nil || v != nil {
		t.Errorf("Consents after saving none = %v, %v; want none", v, err)
	}
}

func TestParseConsentsRejects(t *testing.T) {
	for _, bad := range []string{"n1", "n1\tn2\t1", "n1\tn2\tx\t1", "n1\tn2\t1\t-1", "\tn2\t1\t1", "n1\tn2\t1\t1\n"} {
		if _, err := parseConsents(bad); err == nil {
			t.Errorf("parseConsents(%q) succeeded, want an error", bad)
		}
	}
}
