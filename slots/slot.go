package slots

import (
	"strings"

	"github.com/cespare/xxhash/v2"
)

// Count is the number of slots. It is a power of two so Of can mask.
const Count = 16384

// Slot identifies one of the Count slots a task id hashes into.
type Slot = uint16

// Of returns the slot of a task id: xxhash64 of its hash key (HashKey)
// mod Count. Ids that share a hash tag share a slot, and so an owner.
func Of(id string) Slot {
	return Slot(xxhash.Sum64String(HashKey(id)) & (Count - 1))
}

// HashKey is the part of id that Of hashes: its hash tag, Redis Cluster's
// rule — when id holds a "{" and, after it, a "}" with at least one
// character between the first "{" and the first "}" that follows it, only
// those characters — else the whole id. "{user42}.invoice-7" and
// "{user42}.mail-3" hash "user42"; "a{}b{c}" hashes the whole id (the
// first tag is empty); "a{{b}}" hashes "{b".
func HashKey(id string) string {
	if i := strings.IndexByte(id, '{'); i >= 0 {
		if j := strings.IndexByte(id[i+1:], '}'); j > 0 {
			return id[i+1 : i+1+j]
		}
	}
	return id
}
