package chain

import (
	"slices"
	"strings"
	"testing"

	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

// TestAddChildren: a finished fire records the children of the list its
// outcome picks (none from the other), after those still pending, with
// their ids, fire, finish and the parent's answer; the outbox's copy of
// the earlier list is never written into.
func TestAddChildren(t *testing.T) {
	spec := storage.Spec{OnSuccess: [][]byte{[]byte(`{"delay_ms":1}`), []byte(`{"id":"given","delay_ms":1}`)}, OnFailure: [][]byte{[]byte(`{"delay_ms":2}`)}}
	tests := []struct {
		name    string
		failed  bool
		pending []storage.PendingChild
		wantIDs []string
	}{
		{"success", false, nil, []string{"p.7.0", "given"}},
		{"failure", true, nil, []string{"p.7.0"}},
		{"after pending", false, []storage.PendingChild{{ID: "p.6.0", Seq: 6}}, []string{"p.7.0", "given"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pending := make([]storage.PendingChild, len(tt.pending), len(tt.pending)+4) // room to append in place
			copy(pending, tt.pending)
			outbox := pending // what the outbox holds
			tk := &storage.Task{ID: "p", Spec: spec, Children: pending}
			ids := AddChildren(tk, 7, tt.failed, 1234, []byte(`{"r":1}`))
			if !slices.Equal(ids, tt.wantIDs) {
				t.Fatalf("ids %v, want %v", ids, tt.wantIDs)
			}
			if len(tk.Children) != len(tt.pending)+len(tt.wantIDs) {
				t.Fatalf("%d children pending, want %d", len(tk.Children), len(tt.pending)+len(tt.wantIDs))
			}
			for i, c := range tk.Children[len(tt.pending):] {
				body := spec.OnSuccess[i]
				if tt.failed {
					body = spec.OnFailure[i]
				}
				if c.ID != tt.wantIDs[i] || c.Seq != 7 || c.Index != i || c.Failure != tt.failed || c.At != 1234 ||
					string(c.Body) != string(body) || string(c.Result) != `{"r":1}` {
					t.Errorf("child %d: %+v", i, c)
				}
			}
			if spare := outbox[:cap(outbox)][len(outbox):]; len(spare) > 0 && spare[0].ID != "" {
				t.Errorf("appended into the outbox's copy: %+v", spare[0])
			}
		})
	}
	none := &storage.Task{ID: "q"}
	if ids := AddChildren(none, 1, false, 1, nil); ids != nil || none.Children != nil {
		t.Errorf("a task without chains: ids %v, children %v", ids, none.Children)
	}
}

// TestCheckChild: POST /internal/v1/chain takes only a record that is a
// new, linked task of the slot of its id.
func TestCheckChild(t *testing.T) {
	good := func() *storage.Task {
		return &storage.Task{ID: "p.1.0", Slot: uint16(slots.Of("p.1.0")), Status: storage.StatusScheduled, NextDue: 5,
			Spec: storage.Spec{Kind: storage.KindOnce, CallbackURL: "http://x/"}, ParentID: "p", ParentFire: "p:1"}
	}
	tests := []struct {
		name  string
		mod   func(*storage.Task)
		field string // "" = accepted
	}{
		{"good", func(*storage.Task) {}, ""},
		{"paused", func(t *storage.Task) { t.Status = storage.StatusPaused }, ""},
		{"no id", func(t *storage.Task) { t.ID = "" }, "id"},
		{"long id", func(t *storage.Task) { t.ID = strings.Repeat("a", 129) }, "id"},
		{"other slot", func(t *storage.Task) { t.Slot++ }, "slot"},
		{"no parent", func(t *storage.Task) { t.ParentID = "" }, "parent_id"},
		{"no parent fire", func(t *storage.Task) { t.ParentFire = "" }, "parent_id"},
		{"final", func(t *storage.Task) { t.Status = storage.StatusDone }, "status"},
		{"no kind", func(t *storage.Task) { t.Spec.Kind = 0 }, "kind"},
		{"bad kind", func(t *storage.Task) { t.Spec.Kind = 9 }, "kind"},
		{"no due", func(t *storage.Task) { t.NextDue = 0 }, "next_due"},
		{"no callback", func(t *storage.Task) { t.Spec.CallbackURL = "" }, "next_due"},
	}
	for _, tt := range tests {
		tk := good()
		tt.mod(tk)
		e := Check(tk)
		switch {
		case tt.field == "" && e != nil:
			t.Errorf("%s: refused: %v", tt.name, e)
		case tt.field != "" && (e == nil || e.Field != tt.field):
			t.Errorf("%s: %v, want a refusal on %s", tt.name, e, tt.field)
		}
	}
}
