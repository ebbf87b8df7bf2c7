package slots

import "github.com/cespare/xxhash/v2"

// Count is the number of slots. It is a power of two so Of can mask.
const Count = 16384

// Slot identifies one of the Count slots a task id hashes into.
type Slot = uint16

// Of returns the slot of a task id: xxhash64(id) mod Count.
func Of(id string) Slot {
	return Slot(xxhash.Sum64String(id) & (Count - 1))
}
