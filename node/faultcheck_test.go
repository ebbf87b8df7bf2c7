package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

// The checker of the fault tests: what the receiver saw, against what the
// cluster acknowledged (shared DESIGN §1).

// checkOpts selects the checks beyond the always-on ones.
type checkOpts struct {
	// repeatable lists when a fault allowed a node's fires to be repeated
	// (the harness records a window per crash and per node cut off from
	// the majority). Every other repeat is a violation: the receiver
	// answers every callback 200 (after a short delay), so a fire id that
	// arrives twice is a fire sent again although its first attempt
	// succeeded.
	repeatable []faultWindow
	// quiet lists nodes that must send nothing within a time range (a
	// minority cut off), of every slot or of some.
	quiet []quietRange
}

// quietRange: node must not fire in [from, to) any slot in slots, or any
// slot at all if slots is nil.
type quietRange struct {
	node     string
	from, to time.Time
	slots    map[uint16]bool
	why      string
}

// checkFires checks the fires (in arrival order) and returns every
// violation, each a sentence that names slot, epochs, nodes and times:
//
//   - per slot, each epoch is fired by exactly one node, and epochs never
//     go down in arrival order (a fire at a lower epoch after one at a
//     higher epoch means a deposed owner still fired): at most one node
//     fires a slot at a time;
//   - every fire carries the sender's name and the slot epoch;
//   - no fire arrives before its due time;
//   - every acknowledged task fired at least once at its acknowledged due
//     time; a deleted one never fired after its DELETE was acknowledged,
//     nor a replaced one at its old due time after the replacement was;
//   - a fire id arrives twice only if its first copy came from a node
//     within one of that node's opts.repeatable windows;
//   - and no node fires within its opts.quiet ranges.
//
// Arrival order is send order: the harness delays and drops nothing on
// the way to the receiver, and fake time stands still while a callback
// crosses the in-memory network.
func checkFires(fires []fire, acked, replaced, gone map[string]time.Time, opts checkOpts) []string {
	var bad []string
	badf := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	type slotState struct {
		byEpoch map[uint64]fire // the first fire of each epoch
		top     fire            // the first fire at the highest epoch so far
	}
	perSlot := map[uint16]*slotState{}
	fired := map[string]bool{} // task id + due
	seen := map[string]fire{}
	for _, f := range fires {
		if f.Node == "" || f.Epoch == 0 {
			badf("%s: no X-Chime-Node or X-Chime-Slot-Epoch", f)
		}
		if f.At.Before(f.Due) {
			badf("%s arrived %v before its due time", f, f.Due.Sub(f.At))
		}
		if d, ok := gone[f.TaskID]; ok && f.At.After(d) {
			badf("%s: the task was deleted at %s", f, sinceEpoch(d))
		}
		if r, ok := replaced[f.TaskID]; ok && f.At.After(r) && !f.Due.Equal(acked[f.TaskID]) {
			badf("%s: an old version fired; the task was replaced at %s to be due %s", f, sinceEpoch(r), sinceEpoch(acked[f.TaskID]))
		}
		for _, q := range opts.quiet {
			if f.Node == q.node && !f.At.Before(q.from) && f.At.Before(q.to) && (q.slots == nil || q.slots[f.Slot]) {
				badf("%s (slot %d): %s must fire nothing of it from %s to %s: %s", f, f.Slot, q.node, sinceEpoch(q.from), sinceEpoch(q.to), q.why)
			}
		}
		if prev, ok := seen[f.FireID]; ok && !allowedRepeat(prev, opts.repeatable) {
			badf("%s repeats a completed fire (%s) that no fault excuses", f, prev)
		} else if !ok {
			seen[f.FireID] = f
		}
		fired[f.TaskID+"@"+f.Due.String()] = true

		st := perSlot[f.Slot]
		if st == nil {
			st = &slotState{byEpoch: map[uint64]fire{}, top: f}
			perSlot[f.Slot] = st
		}
		if first, ok := st.byEpoch[f.Epoch]; ok && first.Node != f.Node {
			badf("slot %d epoch %d fired by two nodes: %s, then %s", f.Slot, f.Epoch, first, f)
		} else if !ok {
			st.byEpoch[f.Epoch] = f
		}
		switch {
		case f.Epoch < st.top.Epoch:
			badf("slot %d: deposed owner fired: %s after %s", f.Slot, f, st.top)
		case f.Epoch > st.top.Epoch:
			st.top = f
		}
	}
	ids := make([]string, 0, len(acked))
	for id := range acked {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if !fired[id+"@"+acked[id].String()] {
			badf("acknowledged task %s (slot %d, due %s) never fired at that due time", id, slots.Of(id), sinceEpoch(acked[id]))
		}
	}
	return bad
}

// allowedRepeat reports whether the fire first may be repeated: a fault
// window of its sender covers its arrival.
func allowedRepeat(first fire, ws []faultWindow) bool {
	for _, w := range ws {
		if w.node == first.Node && !first.At.Before(w.from) && (w.to.IsZero() || !first.At.After(w.to)) {
			return true
		}
	}
	return false
}

// fireSummary describes the fires for the log: how many, how many repeats,
// per node, and the slots that changed epoch.
func fireSummary(fires []fire, ws []faultWindow) string {
	perNode := map[string]int{}
	ids := map[string]int{}
	first := map[string]fire{}
	allowed := 0
	epochs := map[uint16]map[uint64]bool{}
	for _, f := range fires {
		perNode[f.Node]++
		ids[f.FireID]++
		if p, ok := first[f.FireID]; !ok {
			first[f.FireID] = f
		} else if allowedRepeat(p, ws) {
			allowed++
		}
		if epochs[f.Slot] == nil {
			epochs[f.Slot] = map[uint64]bool{}
		}
		epochs[f.Slot][f.Epoch] = true
	}
	repeats, moved := 0, 0
	for _, k := range ids {
		repeats += k - 1
	}
	for _, es := range epochs {
		if len(es) > 1 {
			moved++
		}
	}
	return fmt.Sprintf("%d fires of %d fire ids (%d repeats, %d of them excused by a fault) by node %v; %d of %d slots fired at more than one epoch",
		len(fires), len(ids), repeats, allowed, perNode, moved, len(epochs))
}

// check runs checkFires on what the receiver got so far, logs a summary
// and returns the violations.
func (c *faultCluster) check(opts checkOpts) []string {
	c.t.Helper()
	fires := c.rcv.all()
	c.mu.Lock()
	opts.repeatable = append(opts.repeatable, c.faults...)
	bad := checkFires(fires, c.acked, c.replaced, c.gone, opts)
	n := len(c.acked)
	c.mu.Unlock()
	for _, w := range opts.repeatable {
		c.t.Logf("%s of %s from %s to %s: its fires may repeat", w.why, w.node, sinceEpoch(w.from), sinceEpoch(w.to))
	}
	c.t.Logf("%v: %d acknowledged tasks; %s", fakeClock{}, n, fireSummary(fires, opts.repeatable))
	if len(bad) > 0 {
		c.explainLost(fires)
	}
	return bad
}

// epochsBehind checks the running nodes' ownership machines against the
// table of the first running node: every slot's table owner must own it
// and fire it, at the highest epoch any running member knows for the slot.
// It returns one violation summing up the slots that break the rule, with
// the first few as examples.
func (c *faultCluster) epochsBehind() []string {
	up := c.up()
	tb := c.table(up[0])
	bad, examples := 0, ""
	for s := range uint16(slots.Count) {
		o, _ := tb.Owner(s)
		var own uint64
		var ownRole slots.Role
		firing := false
		var top uint64
		holder := ""
		for _, i := range up {
			n := c.nodes[i].n
			r, e, f := n.ctl.State(s)
			if n.cfg.Name == o.Name {
				own, ownRole, firing = e, r, f
			}
			if e > top {
				top, holder = e, n.cfg.Name
			}
		}
		if own < top || ownRole != slots.RoleOwner || !firing {
			bad++
			if bad <= 3 {
				examples += fmt.Sprintf("; slot %d: owner %s is %s at epoch %d (firing %v), %s knows epoch %d",
					s, o.Name, ownRole, own, firing, holder, top)
			}
		}
	}
	if bad == 0 {
		return nil
	}
	return []string{fmt.Sprintf("%v: %d slots whose table owner does not fire them at the slot's highest epoch%s", fakeClock{}, bad, examples)}
}

// explainLost logs, for every acknowledged task that never fired, what
// each running node holds of its slot and of the task: the material for
// finding out where it went.
func (c *faultCluster) explainLost(fires []fire) {
	c.t.Helper()
	fired := map[string]bool{}
	for _, f := range fires {
		fired[f.TaskID] = true
	}
	c.mu.Lock()
	var lost []string
	for id := range c.acked {
		if !fired[id] {
			lost = append(lost, id)
		}
	}
	c.mu.Unlock()
	slices.Sort(lost)
	for _, id := range lost {
		c.t.Logf("lost %s: %s", id, c.explain(id))
	}
}

// explain describes task id's slot and record on every running node: its
// data position, the slot's table owner and follower in its view, the
// task's record, and the ownership machine's description of the slot.
func (c *faultCluster) explain(id string) string {
	s := slots.Of(id)
	out := fmt.Sprintf("slot %d;", s)
	for _, i := range c.up() {
		n := c.nodes[i].n
		p := n.writer.repl.position(s)
		v := n.view.Load()
		o, _ := v.Owner(s)
		f, _ := v.Table.Follower(s)
		rec := "no record"
		if tk, err := n.store.Get(s, id); err == nil {
			rec = fmt.Sprintf("record %v next due %s fire seq %d fires %d", tk.Status, sinceEpoch(time.Unix(0, tk.NextDue)), tk.FireSeq, tk.FireCount)
		} else if !errors.Is(err, storage.ErrNotFound) {
			rec = err.Error()
		}
		out += fmt.Sprintf("\n  %s: data e%d/q%d, table %s>%s, %s; machine %s", n.cfg.Name, p.Epoch, p.Seq, o.Name, f.Name, rec, c.debug(i, s))
	}
	return out
}

// debug returns node i's ownership machine's description of slot s
// (Machine.Debug, as GET /internal/v1/slots/{slot} shows it).
func (c *faultCluster) debug(i int, s uint16) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if d, ok := c.nodes[i].n.ctl.Debug(ctx, s); ok {
		return d
	}
	return "(no answer from ctl)"
}

// report fails t with every violation.
func report(t *testing.T, bad []string) {
	t.Helper()
	for _, b := range bad {
		t.Error(b)
	}
}

// The checker itself, on hand-made histories.
func TestFaultCheckerFindsViolations(t *testing.T) {
	t0 := time.Date(2000, 1, 1, 0, 0, 10, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	f := func(id, node string, epoch uint64, arrive float64) fire {
		return fire{TaskID: id, FireID: id + ":1", Node: node, Epoch: epoch, Slot: slots.Of(id), Attempt: 1, Due: t0, At: at(arrive)}
	}
	// Two ids in one slot.
	a := "a-0"
	var b string
	for j := 0; ; j++ {
		if b = fmt.Sprintf("b-%d", j); slots.Of(b) == slots.Of(a) {
			break
		}
	}
	acked := map[string]time.Time{a: t0, b: t0}
	old := f(a, "n1", 3, 2) // the version of a before a replacement due at t0
	old.Due = t0.Add(-time.Second)
	next := f(a, "n1", 3, 2) // a's next fire
	next.FireID = a + ":2"
	replacement := f(a, "n1", 3, 2.5) // a's fire after the replacement (the fire seq goes on)
	replacement.FireID = a + ":2"
	tests := []struct {
		name     string
		fires    []fire
		replaced map[string]time.Time
		gone     map[string]time.Time
		opts     checkOpts
		want     int
	}{
		{"ok", []fire{f(a, "n1", 3, 0), f(b, "n2", 4, 1)}, nil, nil, checkOpts{}, 0},
		{"two nodes one epoch", []fire{f(a, "n1", 3, 0), f(b, "n2", 3, 1)}, nil, nil, checkOpts{}, 1},
		{"deposed owner", []fire{f(a, "n2", 4, 0), f(b, "n1", 3, 1)}, nil, nil, checkOpts{}, 1},
		{"early", []fire{f(a, "n1", 3, -0.5), f(b, "n1", 3, 0)}, nil, nil, checkOpts{}, 1},
		{"lost", []fire{f(a, "n1", 3, 0)}, nil, nil, checkOpts{}, 1},
		{"no epoch", []fire{f(a, "n1", 0, 0), f(b, "n1", 0, 0)}, nil, nil, checkOpts{}, 2},
		{"repeat", []fire{f(a, "n1", 3, 0), f(a, "n1", 3, 1), f(b, "n1", 3, 1)}, nil, nil, checkOpts{}, 1},
		{"repeat after a crash", []fire{f(a, "n1", 3, 0), f(a, "n2", 4, 1), f(b, "n2", 4, 1)}, nil, nil,
			checkOpts{repeatable: []faultWindow{{"n1", at(-1), at(0.5), "crash"}}}, 0},
		{"repeat of another node", []fire{f(a, "n1", 3, 0), f(a, "n2", 4, 1), f(b, "n2", 4, 1)}, nil, nil,
			checkOpts{repeatable: []faultWindow{{"n2", at(-1), at(0.5), "crash"}}}, 1},
		{"repeat before the window", []fire{f(a, "n1", 3, 0), f(a, "n2", 4, 1), f(b, "n2", 4, 1)}, nil, nil,
			checkOpts{repeatable: []faultWindow{{"n1", at(0.5), time.Time{}, "partition"}}}, 1},
		{"interleaved owners", []fire{f(a, "n1", 3, 0), f(b, "n2", 4, 1), next}, nil, nil, checkOpts{}, 1},
		{"deleted", []fire{f(a, "n1", 3, 2), f(b, "n1", 3, 0)}, nil, map[string]time.Time{a: at(1)}, checkOpts{}, 1},
		{"old version", []fire{old, replacement, f(b, "n1", 3, 0)}, map[string]time.Time{a: at(1)}, nil, checkOpts{}, 1},
		{"quiet", []fire{f(a, "n1", 3, 0), f(b, "n1", 3, 1)}, nil, nil, checkOpts{quiet: []quietRange{{"n1", at(0.5), at(2), nil, "cut off"}}}, 1},
		{"quiet slot", []fire{f(a, "n1", 3, 0), f(b, "n1", 3, 1)}, nil, nil,
			checkOpts{quiet: []quietRange{{"n1", at(0.5), at(2), map[uint16]bool{slots.Of(b): true}, "lease lapsed"}}}, 1},
		{"quiet other slot", []fire{f(a, "n1", 3, 0), f(b, "n1", 3, 1)}, nil, nil,
			checkOpts{quiet: []quietRange{{"n1", at(0.5), at(2), map[uint16]bool{slots.Of(b) + 1: true}, "lease lapsed"}}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := checkFires(tt.fires, acked, tt.replaced, tt.gone, tt.opts)
			if len(got) != tt.want {
				t.Errorf("checkFires = %q, want %d violations", got, tt.want)
			}
		})
	}
}
