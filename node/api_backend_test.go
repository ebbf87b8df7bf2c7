package node

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/node/httpapi"
	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

// TestBackendMethods drives a real node through httpapi.Backend's plain
// methods, without HTTP: write, get, pause, resume, trigger, executions,
// scan, delete, and their refusals.
func TestBackendMethods(t *testing.T) {
	tn := startNode(t, nil)
	a := api{tn.Node}
	ctx := context.Background()
	now := a.Now()
	task := &storage.Task{ID: "b1", Slot: slots.Of("b1"), Status: storage.StatusScheduled,
		Spec:    storage.Spec{CallbackURL: "http://127.0.0.1:1/", Kind: storage.KindOnce, DueAt: now.Add(time.Hour).UnixNano(), TimeoutMs: 1000},
		NextDue: now.Add(time.Hour).UnixNano(), CreatedAt: now.UnixNano(), UpdatedAt: now.UnixNano()}
	if out, created, err := a.Write(ctx, task, false, now); err != nil || !created || out.ID != "b1" {
		t.Fatalf("Write = %v, %v, %v", out, created, err)
	}
	if _, _, err := a.Write(ctx, task, false, now); !errors.Is(err, errExists) {
		t.Errorf("Write again = %v, want %v", err, errExists)
	}
	if got, err := a.Get(ctx, "b1"); err != nil || got.Spec.CallbackURL != task.Spec.CallbackURL {
		t.Errorf("Get = %+v, %v", got, err)
	}
	if got, err := a.Pause(ctx, "b1"); err != nil || got.Status != storage.StatusPaused {
		t.Errorf("Pause = %+v, %v", got, err)
	}
	if got, err := a.Resume(ctx, "b1"); err != nil || got.Status != storage.StatusScheduled {
		t.Errorf("Resume = %+v, %v", got, err)
	}
	if _, err := a.Trigger(ctx, "b1", 0); err != nil {
		t.Errorf("Trigger: %v", err)
	}
	if _, _, err := a.Backfill(ctx, "b1", now.Add(-time.Hour).UnixNano(), now.UnixNano()); err == nil {
		t.Errorf("Backfill of a one-shot task: no error")
	}
	if _, err := a.Executions(ctx, "b1", 10); err != nil {
		t.Errorf("Executions: %v", err)
	}
	n := 0
	if err := a.ScanTasks(storage.Position{}, func(*storage.Task) bool { n++; return true }); err != nil || n != 1 {
		t.Errorf("ScanTasks saw %d tasks, %v", n, err)
	}
	if err := a.Delete(ctx, "b1"); err != nil {
		t.Errorf("Delete: %v", err)
	}
	for name, err := range map[string]error{
		"Get":        func() error { _, err := a.Get(ctx, "b1"); return err }(),
		"Executions": func() error { _, err := a.Executions(ctx, "b1", 1); return err }(),
		"Delete":     a.Delete(ctx, "b1"),
	} {
		if !errors.Is(err, errNotFound) {
			t.Errorf("%s after Delete = %v, want %v", name, err, errNotFound)
		}
	}
	if ready, reason, _ := a.Readiness(); ready != tn.Ready() || reason == "" {
		t.Errorf("Readiness = %v %q", ready, reason)
	}
	if c := a.Cluster(true); c.Self != "test-node" || len(c.Members) != 1 {
		t.Errorf("Cluster = %+v", c)
	}
	if e := a.Forget("x"); e == nil || httpapi.AsError(e).Code != CodeInvalidArgument {
		t.Errorf("Forget on a standalone node = %v", e)
	}
}
