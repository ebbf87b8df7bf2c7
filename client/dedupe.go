package client

import (
	"errors"
	"sync"
)

// Errors of Deduper.Admit.
var (
	// ErrDuplicate: the fire id was admitted before.
	ErrDuplicate = errors.New("chime: duplicate fire")
	// ErrStaleEpoch: the fire comes from a slot epoch below one already
	// seen for its slot, that is from an owner that has been deposed.
	ErrStaleEpoch = errors.New("chime: fire from a stale slot epoch")
)

// Deduper decides which fires a receiver acts on. Delivery is at least
// once: a fire may come again (a retry, or a repeat after a crash or a
// failover, with the same fire id), and after a failover a deposed owner
// may still send for a while (with a lower slot epoch than the new one).
//
// Use it as: Admit; on nil act on the fire, and if acting failed, Forget
// it so that the retry is admitted; answer 2xx for ErrDuplicate and
// ErrStaleEpoch (the fire was handled, or will be by the current owner).
// Implementations are safe for concurrent use.
type Deduper interface {
	// Admit records f and returns nil when it is new, ErrDuplicate when
	// its FireID was admitted before, ErrStaleEpoch when its SlotEpoch is
	// below the highest admitted for its Slot (a SlotEpoch of 0, from a
	// standalone node, is never stale).
	Admit(f Fire) error
	// Forget drops fire id, so that it is admitted again.
	Forget(fireID string)
}

// MemoryDeduper is an in-memory Deduper of one process: it remembers the
// last Size fire ids (the oldest are forgotten first) and the highest
// epoch per slot. A receiver with several processes or that restarts
// needs a shared, durable one (the same rules over a database).
type MemoryDeduper struct {
	mu struct {
		sync.Mutex
		seen   map[string]int // fire id → its place in ring
		ring   []string       // the remembered ids, oldest at next
		next   int
		epochs map[uint16]uint64
	}
}

var _ Deduper = (*MemoryDeduper)(nil)

// NewMemoryDeduper returns a deduper that remembers size fire ids (at
// least 1). Size it for the fires of the longest span a repeat can come
// in: the retries of a fire take up to about 2 hours at most (100
// retries, 60 s apart), a failover seconds.
func NewMemoryDeduper(size int) *MemoryDeduper {
	d := &MemoryDeduper{}
	size = max(size, 1)
	d.mu.seen = make(map[string]int, size)
	d.mu.ring = make([]string, size)
	d.mu.epochs = map[uint16]uint64{}
	return d
}

// Admit implements Deduper.
func (d *MemoryDeduper) Admit(f Fire) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if f.SlotEpoch > 0 {
		if top := d.mu.epochs[f.Slot]; f.SlotEpoch < top {
			return ErrStaleEpoch
		}
		d.mu.epochs[f.Slot] = f.SlotEpoch
	}
	if _, ok := d.mu.seen[f.FireID]; ok {
		return ErrDuplicate
	}
	if old := d.mu.ring[d.mu.next]; old != "" && d.mu.seen[old] == d.mu.next {
		delete(d.mu.seen, old) // unless forgotten and admitted again since
	}
	d.mu.ring[d.mu.next] = f.FireID
	d.mu.seen[f.FireID] = d.mu.next
	d.mu.next = (d.mu.next + 1) % len(d.mu.ring)
	return nil
}

// Forget implements Deduper.
func (d *MemoryDeduper) Forget(fireID string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.mu.seen, fireID)
}
