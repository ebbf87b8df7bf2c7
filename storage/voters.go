package storage

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// Voters returns the node's persisted voters (the members it counts its
// majority among, see slots.Voters): nil if none were ever saved.
func (s *Store) Voters() ([]string, error) {
	v, ok, err := s.nodeValue(nodeKeyVoters, "voters")
	if err != nil || !ok {
		return nil, err
	}
	if v == "" {
		return []string{}, nil
	}
	return strings.Split(v, "\n"), nil
}

// nodeValue reads the node-local key k (what names it in errors); ok is
// false if it was never written.
func (s *Store) nodeValue(k []byte, what string) (v string, ok bool, err error) {
	if !s.enter() {
		return "", false, ErrClosed
	}
	defer s.leave()
	b, closer, err := s.db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("storage: read %s: %w", what, err)
	}
	defer closer.Close()
	return string(b), true, nil
}

// SetVoters saves the node's voters durably. Names must not contain a
// newline (member names never do).
func (s *Store) SetVoters(names []string) (err error) {
	if err := s.Failed(); err != nil {
		return err
	}
	if !s.enter() {
		return ErrClosed
	}
	defer s.leave()
	defer s.catch(&err)
	for _, n := range names {
		if n == "" || strings.Contains(n, "\n") {
			return fmt.Errorf("storage: voter name %q: empty or with a newline", n)
		}
	}
	if err := s.db.Set(nodeKeyVoters, []byte(strings.Join(names, "\n")), pebble.Sync); err != nil {
		return fmt.Errorf("storage: save voters: %w", err)
	}
	return nil
}
