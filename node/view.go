package node

import (
	"fmt"
	"math/bits"
	"slices"
	"time"

	"github.com/chime-scheduler/chime/node/dashboard"
	"github.com/chime-scheduler/chime/node/ownership"
	"github.com/chime-scheduler/chime/ring"
	"github.com/chime-scheduler/chime/ring/gossip"
	"github.com/chime-scheduler/chime/slots"
)

// view is one immutable picture of the cluster as this node sees it: the
// members, the slot table computed from the eligible ones, and the slots
// this node owns. The node swaps whole views atomically; readers (API
// routing, the loader, the writer's fire gate) load one and use it without
// locks. A standalone node has a view of itself owning every slot.
type view struct {
	self  string
	table ring.Table
	// version identifies the table (X-Chime-Table-Version, /v1/cluster's
	// table_version): its checksum, or dashboard.SingleTableVersion on a
	// standalone node.
	version uint64
	members []gossip.Member // every known member, by name (dead and left too)
	dash    *dashboard.View // members and table as the dashboard reads them: one per view, so are its slot-table bytes
	owned   ownedSet
	// changed is when the membership last changed as this node saw it;
	// the view is settled a SettleTime after it.
	changed time.Time
	// seq counts the views this node built, from 1.
	seq uint64
	// quorum: this node sees a majority of the cluster, counting members
	// declared dead (they may only be cut off) but not those that left.
	// Without it the node fires nothing: the other side may own the slots.
	quorum bool
}

// ownedSet is a bitmap of slots.
type ownedSet [slots.Count / 64]uint64

func (o *ownedSet) has(s uint16) bool {
	return int(s) < slots.Count && o[s/64]&(1<<(s%64)) != 0
}
func (o *ownedSet) set(s uint16) { o[s/64] |= 1 << (s % 64) }

// count returns how many slots are in the set.
func (o *ownedSet) count() int {
	n := 0
	for _, w := range o {
		n += bits.OnesCount64(w)
	}
	return n
}

// minus returns the slots in o that are not in other, ascending.
func (o *ownedSet) minus(other *ownedSet) []uint16 {
	var out []uint16
	for i, w := range o {
		d := w &^ other[i]
		for d != 0 {
			b := bits.TrailingZeros64(d)
			out = append(out, uint16(i*64+b))
			d &= d - 1
		}
	}
	return out
}

// eligible returns the members that may own slots: up, active, and
// speaking a protocol this node understands.
func eligible(members []gossip.Member) []ring.Member {
	out := make([]ring.Member, 0, len(members))
	for _, m := range members {
		if m.Up() && m.Meta.State == gossip.StateActive {
			out = append(out, ring.Member{Name: m.Name, HTTPAddr: m.Meta.HTTPAddr})
		}
	}
	return out
}

// newView computes the view of self over members.
func newView(self string, members []gossip.Member, changed time.Time, seq uint64) *view {
	v := &view{self: self, members: members, changed: changed, seq: seq,
		table: ring.Assign(eligible(members), slots.Count), quorum: hasQuorum(members)}
	v.version = v.table.Checksum()
	v.dash = dashView(members, v.table)
	for s := range slots.Count {
		if o, ok := v.table.Owner(uint16(s)); ok && o.Name == self {
			v.owned.set(uint16(s))
		}
	}
	return v
}

// hasQuorum reports whether the active members that are up are a majority
// of the active members that are up or dead. A member that left gracefully
// handed its slots over and no longer counts.
func hasQuorum(members []gossip.Member) bool {
	up, all := 0, 0
	for _, m := range members {
		if m.Meta.State != gossip.StateActive && m.Meta.State != gossip.StateDraining {
			continue
		}
		switch {
		case m.Up():
			up++
			all++
		case m.Status == gossip.StatusDead:
			all++
		}
	}
	return up*2 > all
}

// standaloneView is the view of a node without a cluster: it owns every
// slot, for good.
func standaloneView(self, httpAddr string) *view {
	v := newView(self, []gossip.Member{{Name: self, Meta: gossip.Meta{HTTPAddr: httpAddr,
		State: gossip.StateActive}, Status: gossip.StatusAlive}}, time.Time{}, 1)
	v.version = dashboard.SingleTableVersion
	return v
}

// owns reports whether this node owns slot s in this view.
func (v *view) owns(s uint16) bool { return v.owned.has(s) }

// fires reports whether this node may fire slot s: it owns it and sees a
// majority of the cluster.
func (v *view) fires(s uint16) bool { return v.quorum && v.owned.has(s) }

// owner returns the member that owns slot s; ok is false when no member is
// eligible (a node that has not finished joining alone).
func (v *view) owner(s uint16) (ring.Member, bool) { return v.table.Owner(s) }

// member returns the member named name.
func (v *view) member(name string) (gossip.Member, bool) {
	return ownership.FindMember(v.members, name)
}

// settled reports whether no membership change happened within d before now.
func (v *view) settled(now time.Time, d time.Duration) bool {
	return v.changed.IsZero() || now.Sub(v.changed) >= d
}

// memberChange is one membership change, a line of the dashboard's
// timeline.
type memberChange struct {
	kind string // join, dead, leave, restart, state, gone
	text string
}

// memberChanges describes how the membership went from old to cur (both
// by name), in name order: members that appeared or came back (join),
// were declared dead (dead), left (leave), restarted with a new boot id
// (restart), changed lifecycle state (state) or were dropped from the
// membership (gone).
func memberChanges(old, cur []gossip.Member) []memberChange {
	prev := make(map[string]gossip.Member, len(old))
	for _, m := range old {
		prev[m.Name] = m
	}
	var out []memberChange
	add := func(kind, format string, args ...any) {
		out = append(out, memberChange{kind, fmt.Sprintf(format, args...)})
	}
	for _, m := range cur {
		p, known := prev[m.Name]
		delete(prev, m.Name)
		switch {
		case !known && m.Up():
			add("join", "%s joined (%s, http %s)", m.Name, m.Meta.State, m.Meta.HTTPAddr)
		case !known && m.Status == gossip.StatusLeft:
			add("leave", "%s is known, but has left", m.Name)
		case !known:
			add("dead", "%s is known, but %s", m.Name, m.Status)
		case p.Up() && m.Status == gossip.StatusDead:
			add("dead", "%s failed: declared dead by gossip", m.Name)
		case m.Status == gossip.StatusLeft && p.Status != gossip.StatusLeft:
			add("leave", "%s left the cluster", m.Name)
		case !p.Up() && m.Up():
			add("join", "%s rejoined (%s, http %s)", m.Name, m.Meta.State, m.Meta.HTTPAddr)
		case m.Up() && p.Meta.BootID != 0 && m.Meta.BootID != p.Meta.BootID:
			add("restart", "%s restarted (%s)", m.Name, m.Meta.State)
		case m.Up() && m.Meta.State != p.Meta.State:
			add("state", "%s is %s (was %s)", m.Name, m.Meta.State, p.Meta.State)
		}
	}
	gone := make([]string, 0, len(prev))
	for name := range prev {
		gone = append(gone, name)
	}
	slices.Sort(gone)
	for _, name := range gone {
		add("gone", "%s is no longer a member", name)
	}
	return out
}
