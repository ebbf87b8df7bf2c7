package slots

import (
	"slices"
	"strings"
	"testing"
)

func TestVoters(t *testing.T) {
	type view struct {
		members, alive string // space-separated names
		sees, stable   int
		voters         string // after the view
	}
	split := func(s string) []string { return strings.Fields(s) }
	for _, tc := range []struct {
		name  string
		views []view
	}{
		{"first view adopted", []view{
			{"n1 n2 n3", "n1 n2 n3", 3, 3, "n1 n2 n3"},
		}},
		{"join seen by a majority", []view{
			{"n1 n2 n3", "n1 n2 n3", 3, 3, "n1 n2 n3"},
			{"n1 n2 n3 n4", "n1 n2 n3 n4", 4, 4, "n1 n2 n3 n4"},
		}},
		{"crash: still a majority", []view{
			{"n1 n2 n3", "n1 n2 n3", 3, 3, "n1 n2 n3"},
			{"n1 n2 n3", "n1 n2", 2, 3, "n1 n2 n3"},
		}},
		{"joins on the minority side of a partition do not make a majority", []view{
			{"n1 n2 n3", "n1 n2 n3", 3, 3, "n1 n2 n3"},
			{"n1 n2 n3", "n1", 1, 3, "n1 n2 n3"},
			{"n1 n2 n3 n4 n5", "n1 n4 n5", 1, 3, "n1 n2 n3"},
		}},
		{"the majority side learns of the joiners as dead", []view{
			{"n1 n2 n3", "n1 n2 n3", 3, 3, "n1 n2 n3"},
			{"n1 n2 n3 n4 n5", "n2 n3", 2, 5, "n1 n2 n3 n4 n5"},
		}},
		{"heal: the joiners are voters", []view{
			{"n1 n2 n3", "n1 n2 n3", 3, 3, "n1 n2 n3"},
			{"n1 n2 n3 n4 n5", "n1 n4 n5", 1, 3, "n1 n2 n3"},
			{"n1 n2 n3 n4 n5", "n1 n2 n3 n4 n5", 5, 5, "n1 n2 n3 n4 n5"},
		}},
		{"a node that left is no voter once a majority sees it go", []view{
			{"n1 n2 n3 n4", "n1 n2 n3 n4", 4, 4, "n1 n2 n3 n4"},
			{"n1 n2 n3", "n1 n2 n3", 3, 3, "n1 n2 n3"},
			{"n1 n2 n3", "n1 n2", 2, 3, "n1 n2 n3"},
		}},
		{"the last but one leaves: the last is a majority", []view{
			{"n1 n2", "n1 n2", 2, 2, "n1 n2"},
			{"n1", "n1", 1, 1, "n1"},
		}},
		{"a voter that left counts no more, a dead one does", []view{
			{"n1 n2 n3 n4", "n1 n2 n3 n4", 4, 4, "n1 n2 n3 n4"},
			{"n1 n2 n3", "n1", 1, 3, "n1 n2 n3"},
		}},
		{"every voter left: the view is adopted", []view{
			{"n2 n3", "n2 n3", 2, 2, "n2 n3"},
			{"n1 n2 n3 n4", "n1 n4", 0, 2, "n2 n3"},
			{"n1 n4", "n1 n4", 2, 2, "n1 n4"},
		}},
		{"exactly half is no majority", []view{
			{"n1 n2 n3 n4", "n1 n2 n3 n4", 4, 4, "n1 n2 n3 n4"},
			{"n1 n2 n3 n4 n5 n6", "n1 n2 n5 n6", 2, 4, "n1 n2 n3 n4"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v Voters
			for i, w := range tc.views {
				sees, stable := v.Count(split(w.members), split(w.alive))
				if sees != w.sees || stable != w.stable {
					t.Errorf("view %d: Count = %d of %d, want %d of %d", i, sees, stable, w.sees, w.stable)
				}
				if got := v.Members(); !slices.Equal(got, split(w.voters)) {
					t.Errorf("view %d: voters %v, want %v", i, got, split(w.voters))
				}
			}
		})
	}
}

// TestVotersRestored: a node that restarts with its voters stays a minority
// on the small side of a partition that grew by joins, where fresh Voters
// would adopt the view.
func TestVotersRestored(t *testing.T) {
	members, alive := []string{"n1", "n2", "n3", "n4", "n5"}, []string{"n1", "n4", "n5"}
	v := NewVoters([]string{"n3", "n1", "n2", "n1"})
	if got := v.Members(); !slices.Equal(got, []string{"n1", "n2", "n3"}) {
		t.Fatalf("restored voters %v, want [n1 n2 n3]", got)
	}
	if sees, stable := v.Count(members, alive); sees != 1 || stable != 3 {
		t.Errorf("restored: Count = %d of %d, want 1 of 3", sees, stable)
	}
	if sees, stable := NewVoters(nil).Count(members, alive); sees != 3 || stable != 5 {
		t.Errorf("new: Count = %d of %d, want 3 of 5 (the first view)", sees, stable)
	}
}
