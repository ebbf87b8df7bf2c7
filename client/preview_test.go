package client_test

import (
	"errors"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/client"
)

// TestNodePreview previews a schedule and a stored cron task with a DST
// policy on the shared real node.
func TestNodePreview(t *testing.T) {
	c := newNodeClient(t)
	ctx := t.Context()
	start := time.Date(2030, 3, 30, 0, 0, 0, 0, time.UTC) // Berlin springs forward on 2030-03-31
	p, err := c.PreviewSchedule(ctx, client.ScheduleSpec{Cron: "30 2 * * *", Timezone: "Europe/Berlin", StartAt: start, N: 3})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"2030-03-30T01:30:00Z", "2030-03-31T01:00:00Z gap-shift", "2030-04-01T00:30:00Z"}
	if len(p.Fires) != len(want) || p.Timezone != "Europe/Berlin" {
		t.Fatalf("preview %+v", p)
	}
	for i, f := range p.Fires {
		got := f.At.UTC().Format(time.RFC3339)
		if f.Moved != "" {
			got += " " + f.Moved
		}
		if got != want[i] || !f.Local.Equal(f.At) {
			t.Errorf("fire %d = %s (local %s), want %s", i, got, f.Local, want[i])
		}
	}
	if _, off := p.Fires[1].Local.Zone(); off != 7200 {
		t.Errorf("local of the shifted fire has offset %d, want +02:00", off)
	}
	if tr := p.NextTransition; tr == nil || !tr.At.Equal(time.Date(2030, 3, 31, 1, 0, 0, 0, time.UTC)) || tr.OffsetBefore != "+01:00" || tr.OffsetAfter != "+02:00" {
		t.Errorf("next transition %+v", tr)
	}

	skip, err := c.PreviewSchedule(ctx, client.ScheduleSpec{Cron: "30 2 * * *", Timezone: "Europe/Berlin", StartAt: start, N: 3,
		DST: &client.DST{Gap: client.GapSkip}})
	if err != nil || len(skip.Fires) != 3 || !skip.Fires[1].At.Equal(time.Date(2030, 4, 1, 0, 30, 0, 0, time.UTC)) {
		t.Errorf("gap skip: %+v %v", skip, err)
	}

	_, err = c.PreviewSchedule(ctx, client.ScheduleSpec{Cron: "@daily", N: 1001})
	var ae *client.Error
	if !errors.As(err, &ae) || ae.Field != "n" {
		t.Errorf("n 1001: %v, want a 400 naming n", err)
	}

	task := client.Task{ID: "preview-1", CallbackURL: "http://" + nodeAddr + "/v1/test/callback", Cron: "30 1 * * *",
		Timezone: "America/New_York", StartAt: time.Date(2030, 11, 2, 0, 0, 0, 0, time.UTC), DST: &client.DST{Overlap: client.OverlapBoth}}
	got, err := c.Create(ctx, task)
	if err != nil {
		t.Fatal(err)
	}
	if got.DST == nil || got.DST.Gap != client.GapShift || got.DST.Overlap != client.OverlapBoth {
		t.Errorf("created dst %+v, want shift/both", got.DST)
	}
	tp, err := c.PreviewTask(ctx, "preview-1", 3)
	if err != nil {
		t.Fatal(err)
	}
	// New York falls back on 2030-11-03: 01:30 happens at 05:30Z and 06:30Z.
	wantTask := []string{"2030-11-02T05:30:00Z", "2030-11-03T05:30:00Z", "2030-11-03T06:30:00Z overlap-second"}
	for i, f := range tp.Fires {
		s := f.At.UTC().Format(time.RFC3339)
		if f.Moved != "" {
			s += " " + f.Moved
		}
		if i >= len(wantTask) || s != wantTask[i] {
			t.Errorf("task fire %d = %s, want %v", i, s, wantTask)
		}
	}
	if len(tp.Fires) != 3 {
		t.Errorf("task preview: %d fires", len(tp.Fires))
	}
}
