package membership

import (
	"slices"
	"testing"

	"github.com/chime-scheduler/chime/ring/gossip"
	"github.com/chime-scheduler/chime/slots"
)

func TestOwnedSet(t *testing.T) {
	var a, b OwnedSet
	for _, s := range []uint16{0, 1, 63, 64, 100, slots.Count - 1} {
		a.Set(s)
	}
	b.Set(1)
	b.Set(100)
	if got := a.Minus(&b); len(got) != 4 || got[0] != 0 || got[1] != 63 || got[2] != 64 || got[3] != slots.Count-1 {
		t.Errorf("Minus = %v", got)
	}
	if a.Count() != 6 || a.Has(2) || !a.Has(slots.Count-1) || a.Has(slots.Count) || a.Has(65535) {
		t.Errorf("Count %d, Has(2) %v, Has(last) %v, Has(Count) %v", a.Count(), a.Has(2), a.Has(slots.Count-1), a.Has(slots.Count))
	}
}

func TestMemberChanges(t *testing.T) {
	m := func(name string, status gossip.Status, state gossip.State, boot uint64) gossip.Member {
		return gossip.Member{Name: name, Addr: "g-" + name, Status: status,
			Meta: gossip.Meta{HTTPAddr: "h-" + name, State: state, BootID: boot}}
	}
	const alive, dead, left = gossip.StatusAlive, gossip.StatusDead, gossip.StatusLeft
	const active, joining = gossip.StateActive, gossip.StateJoining
	tests := []struct {
		name     string
		old, cur []gossip.Member
		want     []string
	}{
		{"nothing", []gossip.Member{m("a", alive, active, 1)}, []gossip.Member{m("a", alive, active, 1)}, nil},
		{"first view", nil, []gossip.Member{m("a", alive, joining, 1), m("b", dead, active, 2)},
			[]string{"join: a joined (joining, http h-a)", "dead: b is known, but dead"}},
		{"join", []gossip.Member{m("a", alive, active, 1)}, []gossip.Member{m("a", alive, active, 1), m("b", alive, joining, 2)},
			[]string{"join: b joined (joining, http h-b)"}},
		{"active", []gossip.Member{m("b", alive, joining, 2)}, []gossip.Member{m("b", alive, active, 2)},
			[]string{"state: b is active (was joining)"}},
		{"death", []gossip.Member{m("b", alive, active, 2)}, []gossip.Member{m("b", dead, active, 2)},
			[]string{"dead: b failed: declared dead by gossip"}},
		{"leave", []gossip.Member{m("b", alive, active, 2)}, []gossip.Member{m("b", left, active, 2)},
			[]string{"leave: b left the cluster"}},
		{"leave after death", []gossip.Member{m("b", dead, active, 2)}, []gossip.Member{m("b", left, active, 2)},
			[]string{"leave: b left the cluster"}},
		{"back", []gossip.Member{m("b", dead, active, 2)}, []gossip.Member{m("b", alive, joining, 3)},
			[]string{"join: b rejoined (joining, http h-b)"}},
		{"restart while alive", []gossip.Member{m("b", alive, active, 2)}, []gossip.Member{m("b", alive, joining, 3)},
			[]string{"restart: b restarted (joining)"}},
		{"gone", []gossip.Member{m("a", alive, active, 1), m("c", dead, active, 1), m("b", left, active, 1)}, []gossip.Member{m("a", alive, active, 1)},
			[]string{"gone: b is no longer a member", "gone: c is no longer a member"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, c := range Changes(tt.old, tt.cur) {
				got = append(got, c.Kind+": "+c.Text)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Changes() = %q, want %q", got, tt.want)
			}
		})
	}
}
