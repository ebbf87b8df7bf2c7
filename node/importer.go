package node

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chime-scheduler/chime/ring"
	"github.com/vmihailenco/msgpack/v5"
)

// importer makes this node the active owner of the slots a view gave it.
// For each such slot it first asks every other live member for a newer
// copy (the old owner on a join, the replica holder after a crash, the
// current holder when this node comes back with old data; asking all of
// them is right however many changes happened in a row), applies the
// newest, and only then takes an epoch above every epoch reported and
// starts firing the slot. Until then writes to the slot answer 503 and
// nothing of it fires. If a member does not answer, the import is tried
// again every importRetry while the view still gives the slot to this node.
type importer struct {
	n  *Node
	mu sync.Mutex
	// pending maps each slot to import to the gain that asked for it: an
	// import only clears the entry it started from, so a slot lost and
	// gained again meanwhile is imported again.
	pending map[uint16]uint64
	gen     uint64
	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
}

// importRetry is how often an import whose source did not answer is tried
// again.
const importRetry = 500 * time.Millisecond

// importChunk bounds the slots of one pull request.
const importChunk = 256

func newImporter(n *Node) *importer {
	return &importer{n: n, pending: map[uint16]uint64{}, kick: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
}

// gain queues slots the view gave this node. It never blocks.
func (im *importer) gain(s []uint16) {
	im.mu.Lock()
	for _, x := range s {
		im.gen++
		im.pending[x] = im.gen
	}
	im.mu.Unlock()
	select {
	case im.kick <- struct{}{}:
	default:
	}
}

// idle reports whether no gained slot waits for its import.
func (im *importer) idle() bool {
	im.mu.Lock()
	defer im.mu.Unlock()
	return len(im.pending) == 0
}

// pendingSlots returns the slots waiting for their import, ascending.
func (im *importer) pendingSlots() []uint16 {
	im.mu.Lock()
	out := make([]uint16, 0, len(im.pending))
	for x := range im.pending {
		out = append(out, x)
	}
	im.mu.Unlock()
	slices.Sort(out)
	return out
}

func (im *importer) close() {
	close(im.stop)
	<-im.done
}

func (im *importer) run() {
	defer close(im.done)
	t := time.NewTimer(time.Hour)
	t.Stop()
	for {
		select {
		case <-im.stop:
			return
		case <-im.kick:
		case <-t.C:
		}
		if im.pass() {
			t.Reset(importRetry)
		}
	}
}

// pass imports what is pending; it reports whether something is left.
func (im *importer) pass() bool {
	v := im.n.view.Load()
	if !v.quorum {
		// Cut off in a minority: the majority side owns these slots.
		return true
	}
	im.mu.Lock()
	var todo []uint16
	gens := map[uint16]uint64{}
	for s, g := range im.pending {
		if !v.owns(s) {
			delete(im.pending, s) // moved on again
			continue
		}
		todo = append(todo, s)
		gens[s] = g
	}
	im.mu.Unlock()
	slices.Sort(todo)
	var sources []ring.Member
	for _, m := range v.members {
		if m.Name != im.n.cfg.Name && m.Up() && m.Meta.HTTPAddr != "" {
			sources = append(sources, ring.Member{Name: m.Name, HTTPAddr: m.Meta.HTTPAddr})
		}
	}
	left := false
	for len(todo) > 0 {
		chunk := todo[:min(importChunk, len(todo))]
		todo = todo[len(chunk):]
		if !im.importChunk(sources, chunk, gens) {
			left = true
		}
	}
	return left
}

// importChunk asks every live member for a newer copy of the slots of
// chunk, applies the newest, and owns the slots at an epoch above every
// epoch any of them reported. If a member does not answer, nothing is
// owned: it may hold the newest copy (try again later).
func (im *importer) importChunk(sources []ring.Member, chunk []uint16, gens map[uint16]uint64) bool {
	n := im.n
	op := &writeOp{kind: opOwn, slots: chunk, maxEpoch: map[uint16]uint64{}}
	req := pullRequest{Slots: make([]slotPos, len(chunk))}
	for i, s := range chunk {
		p := n.writer.repl.position(s)
		req.Slots[i] = slotPos{Slot: s, Epoch: p.Epoch, Seq: p.Seq}
	}
	body, _ := msgpack.Marshal(req)
	answers := make([]pullAnswer, len(sources))
	errs := make([]error, len(sources))
	var wg sync.WaitGroup
	for i, src := range sources {
		wg.Go(func() {
			c, err := n.fwd.do(context.Background(), src, http.MethodPost, "/internal/v1/pull", body,
				http.Header{"Content-Type": {"application/msgpack"}}, 0)
			if err == nil && c.status != http.StatusOK {
				err = fmt.Errorf("%d %s", c.status, c.body)
			}
			if err == nil {
				err = msgpack.Unmarshal(c.body, &answers[i])
			}
			errs[i] = err
		})
	}
	wg.Wait()
	best := map[uint16]*replMsg{}
	from := map[string]bool{}
	for i, a := range answers {
		if errs[i] != nil {
			n.log.Debug("pull slots", "from", sources[i].Name, "slots", len(chunk), "err", errs[i])
			return false
		}
		for k, e := range a.Epochs {
			if k < len(chunk) {
				op.maxEpoch[chunk[k]] = max(op.maxEpoch[chunk[k]], e)
			}
		}
		for k := range a.Snapshots {
			m := &a.Snapshots[k]
			if b := best[m.Slot]; b == nil || newer(m.Epoch, m.Seq, b.Epoch, b.Seq) {
				best[m.Slot] = m
				from[sources[i].Name] = true
			}
		}
	}
	for _, m := range best {
		op.repl = append(op.repl, *m)
	}
	if err := n.writer.submitInternal(nil, op); err != nil {
		return false
	}
	im.mu.Lock()
	for _, s := range chunk {
		if im.pending[s] == gens[s] {
			delete(im.pending, s)
		}
	}
	im.mu.Unlock()
	if len(op.owned) > 0 {
		n.loop.gain(op.owned)
		var names []string
		for name := range from {
			names = append(names, name)
		}
		slices.Sort(names)
		n.event("own", "owns "+strconv.Itoa(len(op.owned))+" more slots"+fromWhom(names))
	}
	return true
}

func fromWhom(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return " (newer copies from " + strings.Join(names, ", ") + ")"
}
