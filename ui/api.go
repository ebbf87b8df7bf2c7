package ui

import "context"

// API is what the dashboard needs from the node serving it. It is defined
// here, by its only consumer, so that ui depends on no node package; the
// binary supplies an adapter.
type API interface {
	// Snapshot returns the cluster snapshot to push to every connected
	// browser. The value is encoded with encoding/json once per push
	// (json.RawMessage passes through unchanged) and is not retained after
	// encoding, so the implementation may reuse it afterwards.
	//
	// Snapshot is called from a single goroutine, once per Options.Interval
	// while at least one browser is connected, never concurrently with
	// itself. It should return within Options.SnapshotTimeout; ctx ends at
	// that timeout or when the handler is closed. An error is pushed to the
	// browsers as an error message and the next interval tries again.
	Snapshot(ctx context.Context) (any, error)
}
