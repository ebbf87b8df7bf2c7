package client_test

import (
	"errors"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/client"
	"github.com/chime-scheduler/chime/slots"
)

// TestNodeDueLoad: tasks due in 30 min and in 2 h 30 min show in hour 0
// (minute 30) and hour 2 of the node's row; by=slot with hour=2 answers the
// slot of the later one; a bad query is a 400 on its field.
func TestNodeDueLoad(t *testing.T) {
	c := newNodeClient(t)
	ctx := t.Context()
	before, err := c.DueLoad(ctx, client.DueQuery{Hours: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range []client.Task{
		{ID: "dueload-a", CallbackURL: "http://" + nodeAddr + "/v1/test/callback", Delay: 30*time.Minute + 30*time.Second},
		{ID: "dueload-b", CallbackURL: "http://" + nodeAddr + "/v1/test/callback", Delay: 150 * time.Minute},
	} {
		if _, err := c.Create(ctx, tk); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(ctx, tk.ID) })
	}
	got, err := c.DueLoad(ctx, client.DueQuery{Hours: 3})
	if err != nil {
		t.Fatal(err)
	}
	if got.Hours != 3 || got.By != "node" || len(got.Nodes) != 1 || !got.Nodes[0].Available || got.From.IsZero() {
		t.Fatalf("DueLoad = %+v", got)
	}
	n, b := got.Nodes[0], before.Nodes[0]
	if len(n.Hours) != 3 || len(n.Minutes) != 60 || n.Hours[0]-b.Hours[0] != 1 || n.Hours[2]-b.Hours[2] != 1 ||
		n.Minutes[30]-b.Minutes[30] != 1 || got.Total-before.Total != 2 || n.CompleteUntil.IsZero() {
		t.Fatalf("row %+v, before %+v", n, b)
	}
	two := 2
	bySlot, err := c.DueLoad(ctx, client.DueQuery{Hours: 3, BySlot: true, Hour: &two})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range bySlot.Slots {
		found = found || s.Slot == slots.Of("dueload-b")
	}
	if !found || bySlot.By != "slot" || bySlot.Hour == nil || *bySlot.Hour != 2 {
		t.Fatalf("by slot: %+v", bySlot)
	}
	var ce *client.Error
	if _, err := c.DueLoad(ctx, client.DueQuery{Hours: 169}); !errors.As(err, &ce) || ce.Field != "hours" {
		t.Fatalf("hours=169: %v", err)
	}
}
