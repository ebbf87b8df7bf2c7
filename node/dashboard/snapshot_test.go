package dashboard

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestSnapshotSlotTable covers Snapshot's slot table helpers: what
// SetSlotTable accepts and the JSON round trip through base64.
func TestSnapshotSlotTable(t *testing.T) {
	filled := func(v byte) []byte { return bytes.Repeat([]byte{v}, 16384) }
	ok := make([]SlotState, 16384)
	under := slices.Clone(ok)
	under[77] = SlotUnderReplicated
	badState := slices.Clone(ok)
	badState[9] = SlotStalled + 1
	split := filled(0)
	split[16383] = 1
	tests := []struct {
		name    string
		owners  []byte
		states  []SlotState
		wantErr string
	}{
		{name: "one owner, all ok", owners: filled(0), states: ok},
		{name: "one owner, one under-replicated slot", owners: filled(0), states: under},
		{name: "two owners", owners: split, states: ok},
		{name: "no owner anywhere", owners: filled(NoOwner), states: ok},
		{name: "owner index beyond members", owners: filled(2), states: ok, wantErr: "owner index 2"},
		{name: "unknown state", owners: filled(0), states: badState, wantErr: "slot 9 has state SlotState(4)"},
		{name: "short owners", owners: filled(0)[:100], states: ok, wantErr: "100 owners"},
		{name: "short states", owners: filled(0), states: ok[:5], wantErr: "5 states"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Snapshot{Members: []MemberSnapshot{{Name: "a"}, {Name: "b"}}}
			err := s.SetSlotTable(3, tt.owners, tt.states)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("SetSlotTable() = %v, want an error containing %q", err, tt.wantErr)
				}
				if s.SlotOwners != nil || s.TableVersion != 0 {
					t.Errorf("SetSlotTable() failed but changed the snapshot")
				}
				return
			}
			if err != nil {
				t.Fatalf("SetSlotTable() = %v", err)
			}
			b, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			var back Snapshot
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatalf("decode %.200s: %v", b, err)
			}
			if err := back.CheckSlotTable(); err != nil {
				t.Errorf("CheckSlotTable() after a round trip = %v", err)
			}
			if !bytes.Equal(back.SlotOwners, tt.owners) || !slices.Equal(back.SlotStates, tt.states) || back.TableVersion != 3 {
				t.Errorf("round trip changed the table (version %d)", back.TableVersion)
			}
		})
	}
}
