package storage

import (
	"fmt"
	"testing"
)

func TestCountTasks(t *testing.T) {
	s := openMem(t, Options{})
	b := s.NewBatch()
	for i := range 300 {
		task := &Task{ID: fmt.Sprintf("c-%d", i), Slot: uint16(i % 7), Status: StatusScheduled, NextDue: int64(1000 + i)}
		b.PutTask(task, 0)
		b.AppendExecution(task, &Execution{FireID: task.ID + ":1"})
		b.PutTask(task, task.Wake())
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		owned func(uint16) bool
		want  int64
	}{
		{"all", nil, 300},
		{"slot 0", func(s uint16) bool { return s == 0 }, 43},
		{"none", func(uint16) bool { return false }, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.CountTasks(tc.owned)
			if err != nil || got != tc.want {
				t.Errorf("CountTasks = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}
