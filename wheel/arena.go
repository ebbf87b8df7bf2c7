package wheel

import "time"

// nilIdx marks the end of a list and an empty bucket.
const nilIdx int32 = -1

// node is one entry. Entries live in one slice and link to each other by
// index, so the garbage collector sees one allocation instead of one per
// timer, and a node costs 32 bytes.
type node struct {
	id  string
	due int64 // ns since start; saturated at math.MinInt64/MaxInt64
	// next links the bucket list, or the free list for a free node.
	next int32
	// prev links the bucket list (nilIdx at the head). For an entry in the
	// ready heap it is the entry's position in the heap instead.
	prev int32
}

// arena owns the node storage and the id index.
type arena struct {
	nodes []node
	free  int32            // head of the free list through node.next
	index map[string]int32 // id -> node; holds exactly the live entries
	// exact holds the original due of entries whose offset saturated. It is
	// nil until the first such entry: realistic dues never need it.
	exact map[int32]time.Time
}

func newArena() arena {
	return arena{free: nilIdx, index: make(map[string]int32)}
}

// alloc returns a node for id, reusing a free one if possible, and indexes
// it. The caller sets due and places it.
func (a *arena) alloc(id string) int32 {
	i := a.free
	if i != nilIdx {
		a.free = a.nodes[i].next
	} else {
		i = int32(len(a.nodes))
		a.nodes = append(a.nodes, node{})
	}
	a.nodes[i] = node{id: id, next: nilIdx, prev: nilIdx}
	a.index[id] = i
	return i
}

// release unindexes node i and puts it on the free list. The caller has
// already unlinked it from its bucket or heap.
func (a *arena) release(i int32) {
	n := &a.nodes[i]
	delete(a.index, n.id)
	a.forgetExact(i)
	*n = node{next: a.free, prev: nilIdx}
	a.free = i
}

// rememberExact records the original due of a node whose offset saturated.
func (a *arena) rememberExact(i int32, due time.Time) {
	if a.exact == nil {
		a.exact = make(map[int32]time.Time)
	}
	a.exact[i] = due
}

// forgetExact drops the original due of node i, if any.
func (a *arena) forgetExact(i int32) {
	if len(a.exact) > 0 {
		delete(a.exact, i)
	}
}
