package ownership

import (
	"slices"
	"testing"

	"github.com/chime-scheduler/chime/slots"
)

func TestSlotSet(t *testing.T) {
	var o slotSet
	for _, s := range []uint16{0, 63, 64, 1000, slots.Count - 1} {
		o.put(s, true)
	}
	o.put(1000, false)
	o.put(5, false) // absent: no-op
	if got, want := o.count(), 4; got != want {
		t.Errorf("count = %d, want %d", got, want)
	}
	var walked []uint16
	each(func(i int) uint64 { return o[i] }, func(s uint16) { walked = append(walked, s) })
	if want := []uint16{0, 63, 64, slots.Count - 1}; !slices.Equal(walked, want) {
		t.Errorf("each walked %v, want %v", walked, want)
	}
	if !o.has(63) || o.has(1000) || o.has(62) {
		t.Errorf("has(63, 1000, 62) = %v %v %v, want true false false", o.has(63), o.has(1000), o.has(62))
	}
}

// TestSlotSetsCounts: the counts from the sets are the machine's rules
// (slots.Machine.Counts), a slot noted again replacing what it was.
func TestSlotSetsCounts(t *testing.T) {
	type note struct {
		s              uint16
		role           slots.Role
		firing, synced bool
	}
	tests := []struct {
		name  string
		notes []note
		want  slots.Counts
	}{
		{"none", nil, slots.Counts{}},
		{"owner firing", []note{{1, slots.RoleOwner, true, true}}, slots.Counts{Owned: 1, Firing: 1}},
		{"sealing is owned", []note{{1, slots.RoleSealing, false, true}}, slots.Counts{Owned: 1}},
		{"follower counts only with its replica", []note{{1, slots.RoleFollower, false, true}, {2, slots.RoleFollower, false, false}},
			slots.Counts{Following: 1}},
		{"importing", []note{{7, slots.RoleImporting, false, false}}, slots.Counts{Importing: 1}},
		{"unavailable and none count nowhere", []note{{7, slots.RoleUnavailable, false, true}, {8, slots.RoleNone, false, false}},
			slots.Counts{}},
		{"renoted", []note{{3, slots.RoleImporting, false, false}, {3, slots.RoleOwner, true, true}}, slots.Counts{Owned: 1, Firing: 1}},
		{"stopped firing", []note{{3, slots.RoleOwner, true, true}, {3, slots.RoleOwner, false, true}}, slots.Counts{Owned: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ss slotSets
			for _, n := range tt.notes {
				ss.note(n.s, n.role, n.firing, n.synced)
			}
			want := tt.want
			want.UnderReplicated, want.Unavailable = 2, 3
			if got := ss.counts(2, 3); got != want {
				t.Errorf("counts = %+v, want %+v", got, want)
			}
		})
	}
}
