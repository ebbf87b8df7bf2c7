package ownership

import (
	"slices"
	"strings"
	"time"

	"github.com/chime-scheduler/chime/ring"
	"github.com/chime-scheduler/chime/ring/gossip"
)

// View is what the executor needs of one picture of the cluster as the
// node sees it.
type View struct {
	Table   ring.Table
	Members []gossip.Member // every known member, by name (dead and left too)
	// Changed is when the membership last changed as the node saw it.
	Changed time.Time
	// Owns reports whether the table gives slot s to this node.
	Owns func(s uint16) bool
}

// settled reports whether no membership change happened within d before now.
func (v *View) settled(now time.Time, d time.Duration) bool {
	return v.Changed.IsZero() || now.Sub(v.Changed) >= d
}

// member returns the member named name.
func (v *View) member(name string) (gossip.Member, bool) { return FindMember(v.Members, name) }

// FindMember returns the member named name among members, sorted by name.
func FindMember(members []gossip.Member, name string) (gossip.Member, bool) {
	i, ok := slices.BinarySearchFunc(members, name, func(m gossip.Member, n string) int {
		return strings.Compare(m.Name, n)
	})
	if !ok {
		return gossip.Member{}, false
	}
	return members[i], true
}

// memberChange is one change of membership the machine hears of; empty:
// a restart's new run started with no slot state (gossip.Meta.Empty).
type memberChange struct {
	kind, name string
	empty      bool
}

// leftKind is the change of a member that is now left: "forgot" if an
// operator declared it gone for good (its data lost with it), else "left".
func leftKind(m gossip.Member) string {
	if m.Forgotten {
		return "forgot"
	}
	return "left"
}

// memberChanges lists how the membership went from old to cur (both by
// name), in name order: join, dead, left, forgot, restart.
func memberChanges(old, cur []gossip.Member) []memberChange {
	prev := make(map[string]gossip.Member, len(old))
	for _, m := range old {
		prev[m.Name] = m
	}
	var out []memberChange
	for _, m := range cur {
		p, seen := prev[m.Name]
		switch {
		case !seen && m.Status == gossip.StatusLeft:
			// Gone for good before we ever saw it (a leave intent for a
			// node that was dead when we joined, or left while we were
			// down): the slots we hold may still name it as a suspect.
			out = append(out, memberChange{kind: leftKind(m), name: m.Name})
		case !seen || (!p.Up() && m.Up() && p.Meta.BootID == m.Meta.BootID):
			if m.Up() {
				out = append(out, memberChange{kind: "join", name: m.Name})
			}
		case p.Meta.BootID != m.Meta.BootID:
			out = append(out, memberChange{"restart", m.Name, m.Meta.Empty})
		case p.Status != gossip.StatusLeft && m.Status == gossip.StatusLeft:
			// It left: once it handed its slots over, or when its drain
			// gave up (a cap, a peer it could not reach). Then its slots
			// fail over as from a dead node, once its leases ran out. Or,
			// dead already, an operator forgot it (gone for good).
			out = append(out, memberChange{kind: leftKind(m), name: m.Name})
		case m.Status == gossip.StatusLeft && m.Forgotten && !p.Forgotten:
			// It left by itself, and an operator forgot it since.
			out = append(out, memberChange{kind: "forgot", name: m.Name})
		case p.Up() && !m.Up():
			out = append(out, memberChange{kind: "dead", name: m.Name})
		}
		delete(prev, m.Name)
	}
	for _, p := range prev {
		if p.Up() {
			out = append(out, memberChange{kind: "dead", name: p.Name}) // dropped from the membership unseen
		}
	}
	slices.SortFunc(out, func(a, b memberChange) int { return strings.Compare(a.name, b.name) })
	return out
}
