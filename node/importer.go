package node

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/chime-scheduler/chime/ring"
	"github.com/vmihailenco/msgpack/v5"
)

// importer makes this node the active owner of the slots a view gave it.
// For each such slot it first asks the slot's follower (in the new table
// that is the node that held the slot before: the old owner on a join, a
// replica holder otherwise) for a newer copy, applies it, and only then
// takes the slot's next epoch and starts firing it. Until then writes to
// the slot answer 503 and nothing of it fires. A follower that does not
// answer is asked again every importRetry while the view still gives the
// slot to this node.
type importer struct {
	n       *Node
	mu      sync.Mutex
	pending map[uint16]bool
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
	return &importer{n: n, pending: map[uint16]bool{}, kick: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
}

// gain queues slots the view gave this node. It never blocks.
func (im *importer) gain(s []uint16) {
	im.mu.Lock()
	for _, x := range s {
		im.pending[x] = true
	}
	im.mu.Unlock()
	select {
	case im.kick <- struct{}{}:
	default:
	}
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
	im.mu.Lock()
	var todo []uint16
	for s := range im.pending {
		if !v.owns(s) {
			delete(im.pending, s) // moved on again
			continue
		}
		todo = append(todo, s)
	}
	im.mu.Unlock()
	slices.Sort(todo)
	bySource := map[string][]uint16{}
	sources := map[string]ring.Member{}
	for _, s := range todo {
		f, ok := v.table.Follower(s)
		name := ""
		if ok {
			name = f.Name
			sources[name] = f
		}
		bySource[name] = append(bySource[name], s)
	}
	left := false
	for name, list := range bySource {
		for len(list) > 0 {
			chunk := list[:min(importChunk, len(list))]
			list = list[len(chunk):]
			if !im.importChunk(name, sources[name], chunk) {
				left = true
			}
		}
	}
	return left
}

// importChunk pulls chunk from source (none: no other member) and owns it.
func (im *importer) importChunk(name string, source ring.Member, chunk []uint16) bool {
	n := im.n
	op := &writeOp{kind: opOwn, slots: chunk, maxEpoch: map[uint16]uint64{}}
	if name != "" {
		req := pullRequest{Slots: make([]slotPos, len(chunk))}
		for i, s := range chunk {
			p := n.writer.repl.position(s)
			req.Slots[i] = slotPos{Slot: s, Epoch: p.Epoch, Seq: p.Seq}
		}
		body, _ := msgpack.Marshal(req)
		c, err := n.fwd.do(context.Background(), source, http.MethodPost, "/internal/v1/pull", body,
			http.Header{"Content-Type": {"application/msgpack"}}, 0)
		if err != nil || c.status != http.StatusOK {
			n.log.Debug("pull slots", "from", name, "slots", len(chunk), "err", err, "status", c.status)
			return false
		}
		var ans pullAnswer
		if err := msgpack.Unmarshal(c.body, &ans); err != nil {
			n.log.Warn("pull slots: bad answer", "from", name, "err", err)
			return false
		}
		op.repl = ans.Snapshots
		for i, e := range ans.Epochs {
			if i < len(chunk) {
				op.maxEpoch[chunk[i]] = e
			}
		}
	}
	if err := n.writer.submitInternal(nil, op); err != nil {
		return false
	}
	im.mu.Lock()
	for _, s := range chunk {
		delete(im.pending, s)
	}
	im.mu.Unlock()
	if len(op.owned) > 0 {
		n.loop.gain(op.owned)
		n.event("own", "owns "+strconv.Itoa(len(op.owned))+" more slots"+fromWhom(name))
	}
	return true
}

func fromWhom(name string) string {
	if name == "" {
		return ""
	}
	return " (synced from " + name + ")"
}
