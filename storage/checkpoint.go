package storage

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Checkpoint writes a consistent copy of the store, as of one instant, to
// dir, which must not exist yet (its parent must). Every batch committed
// before the call is in the copy (the WAL is flushed first); later ones are
// not. Files are hard-linked where the filesystem allows (dir on the same
// filesystem costs almost no space), copied otherwise. The copy is a store
// Open can open. The store keeps serving meanwhile.
func (s *Store) Checkpoint(dir string) error {
	if !s.enter() {
		return ErrClosed
	}
	defer s.leave()
	if err := s.db.Checkpoint(dir, pebble.WithFlushedWAL()); err != nil {
		return fmt.Errorf("storage: checkpoint to %q: %w", dir, err)
	}
	return nil
}
