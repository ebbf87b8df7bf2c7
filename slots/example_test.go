package slots_test

import (
	"fmt"
	"time"

	"github.com/chime-scheduler/chime/ring"
	"github.com/chime-scheduler/chime/slots"
)

// A one-node cluster bootstraps: the machine takes epoch 1 for every slot
// (persisting it first) and lets node fire them. Node executes the effects
// in order.
func ExampleMachine() {
	cfg := slots.DefaultLocalConfig("n1")
	cfg.NumSlots = 2
	m, err := slots.New(cfg, nil)
	if err != nil {
		panic(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m.Step(slots.Tick{Now: now})
	table := ring.Assign([]ring.Member{{Name: "n1"}}, cfg.NumSlots)
	for _, e := range m.Step(slots.TableChanged{Table: table, StableSize: 1, Sees: 1, Bootstrap: true}) {
		fmt.Println(e)
	}
	fmt.Println(m.Firing(0), m.State(1))
	// Output:
	// Persist s=0 owner@1#0
	// Announce s=0 e=1
	// MarkUnderReplicated s=0 true
	// StartFiring s=0 e=1
	// Persist s=1 owner@1#0
	// Announce s=1 e=1
	// MarkUnderReplicated s=1 true
	// StartFiring s=1 e=1
	// true owner@1#0
}
