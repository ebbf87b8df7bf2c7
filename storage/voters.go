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
	if !s.enter() {
		return nil, ErrClosed
	}
	defer s.leave()
	v, closer, err := s.db.Get(nodeKeyVoters)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("storage: read voters: %w", err)
	}
	defer closer.Close()
	if len(v) == 0 {
		return []string{}, nil
	}
	return strings.Split(string(v), "\n"), nil
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
