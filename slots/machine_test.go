package slots

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestAccessors checks what node reads between Steps on a bootstrapped
// 3-node cluster: who fires, where writes go, whom a follower follows.
func TestAccessors(t *testing.T) {
	c := bootstrapped3(t)
	c.tick(base.Add(time.Second))
	c.deliver(10)

	// Slot 0: n1 owns it (rendezvous hashing), n2 follows (see bootstrap.txt).
	n1, n2, n3 := c.m["n1"], c.m["n2"], c.m["n3"]
	if got := n1.Replicas(0); !slices.Equal(got, []string{"n2"}) {
		t.Errorf("n1.Replicas(0) = %v, want [n2]", got)
	}
	if got := n2.Replicas(0); got != nil {
		t.Errorf("n2.Replicas(0) = %v, want nil (not the owner)", got)
	}
	if got := n2.Leader(0); got != "n1" {
		t.Errorf("n2.Leader(0) = %q, want n1", got)
	}
	if got := n3.Leader(0); got != "" {
		t.Errorf("n3.Leader(0) = %q, want \"\" (holds no replica)", got)
	}
	if !n1.Firing(0) || n2.Firing(0) || n1.UnderReplicated(0) || n1.Unavailable(0) {
		t.Errorf("slot 0: n1 firing %v, n2 firing %v, under-replicated %v, unavailable %v; want true false false false",
			n1.Firing(0), n2.Firing(0), n1.UnderReplicated(0), n1.Unavailable(0))
	}
	want := Counts{Owned: 4, Firing: 4}
	if got := n1.Counts(); got != want {
		t.Errorf("n1.Counts() = %+v, want %+v", got, want)
	}
	want = Counts{Following: 3}
	if got := n2.Counts(); got != want {
		t.Errorf("n2.Counts() = %+v, want %+v", got, want)
	}
	if got := n1.State(0); got != (SlotState{Role: RoleOwner, Epoch: 1, Grantee: "n2"}) {
		t.Errorf("n1.State(0) = %v, want owner@1#0>n2", got)
	}
}

// TestNewRejects checks that New validates its config and persisted state.
func TestNewRejects(t *testing.T) {
	bad := DefaultLocalConfig("")
	bad.NumSlots, bad.Lease, bad.Settle = 0, 0, -1
	if _, err := New(bad, nil); err == nil {
		t.Errorf("New(%+v) = nil error, want one", bad)
	}
	cfg := DefaultLocalConfig("n1")
	cfg.NumSlots = 4
	if _, err := New(cfg, map[Slot]SlotState{4: {Role: RoleOwner, Epoch: 1}}); err == nil {
		t.Errorf("New with persisted slot 4 of 4 = nil error, want one")
	}
	m, err := New(cfg, map[Slot]SlotState{2: {Role: RoleOwner, Epoch: 3, Seq: 9, Grantee: "n2"}})
	if err != nil {
		t.Fatal(err)
	}
	// A persisted owner comes back stale: it neither fires nor claims a
	// replica, but remembers its epoch and grantee, and that it owned the
	// epoch (WasOwner: so does the next restart).
	if got, want := m.State(2), (SlotState{Role: RoleFollower, Epoch: 3, Seq: 9, Grantee: "n2", WasOwner: true}); got != want {
		t.Errorf("State(2) after New = %v, want %v", got, want)
	}
	if m.Firing(2) || m.Leader(2) != "" {
		t.Errorf("restarted owner fires %v, follows %q; want false, \"\"", m.Firing(2), m.Leader(2))
	}
}

// TestStatesRoundTrip checks that FormatStates and ParseStates are inverses
// (the notation scripts give persisted state in) and that ParseStates
// rejects malformed input.
func TestStatesRoundTrip(t *testing.T) {
	for _, text := range []string{
		"",
		"owner@1#0:[0]",
		"owner@3#17>n2:[0-2] follower@3#17:[3] none@0#0:[5-7]",
		"sealing@2#1>*:[4] unavailable@9#0:[9-10]",
		"follower@3#1^n2#1:[0] follower@3#4^n2#0:[1-2] none@5#0>n3^n1#2:[4]",
		"follower+@2#0:[0] follower+@4#1>n2:[1]",
		"none@2#0=n4:[0] follower@3#1^n2#1-=n5:[1]",
		"follower@2#5%1:[0] none@4#0=n3%2:[1]",
	} {
		m, err := ParseStates(text)
		if err != nil {
			t.Errorf("ParseStates(%q): %v", text, err)
			continue
		}
		if got := FormatStates(m); got != text {
			t.Errorf("FormatStates(ParseStates(%q)) = %q, want it back", text, got)
		}
	}
	for _, text := range []string{"owner@1:[0]", "boss@1#0:[0]", "owner@1#0:[3-1]", "owner@1#0:[0] none@0#0:[0]", "owner@1#0[0]",
		"follower@3#1^n2:[0]", "follower@3#1^#1:[0]", "follower@3#1^n2#x:[0]", "follower++@2#0:[0]", "+@2#0:[0]",
		"follower@2#0%:[0]", "follower@2#0%0:[0]", "follower@2#0%x:[0]"} {
		if _, err := ParseStates(text); err == nil {
			t.Errorf("ParseStates(%q) = nil error, want one", text)
		}
	}
}

// TestFinalCopyServed: the mark of a past owner's complete copy of its
// epoch (SlotState.FinalOf) survives a restart, and the copy is served to
// whoever asks for that epoch, and for no other; a mark not below the
// epoch is not read back.
func TestFinalCopyServed(t *testing.T) {
	cfg := DefaultLocalConfig("n1")
	cfg.NumSlots = 4
	m, err := New(cfg, map[Slot]SlotState{1: {Role: RoleFollower, Epoch: 3, Seq: 5, FinalOf: 2}, 2: {Role: RoleFollower, Epoch: 2, Seq: 1, FinalOf: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.State(1), (SlotState{Role: RoleFollower, Epoch: 3, Seq: 5, FinalOf: 2}); got != want {
		t.Errorf("State(1) after New = %v, want %v", got, want)
	}
	if got := m.State(2); got.FinalOf != 0 {
		t.Errorf("State(2) after New = %v, want no FinalOf (not below the epoch)", got)
	}
	served := func(effs []Effect) (SendSnapshot, bool) {
		for _, ef := range effs {
			if ss, ok := ef.(SendSnapshot); ok {
				return ss, true
			}
		}
		return SendSnapshot{}, false
	}
	ss, ok := served(m.Step(SnapshotRequest{Slot: 1, Epoch: 2, From: "n2"}))
	if !ok || ss.Epoch != 2 || ss.Seq != 5 || ss.To != "n2" {
		t.Errorf("request for epoch 2 of slot 1: served %+v (%v), want the copy of epoch 2 at seq 5 to n2", ss, ok)
	}
	if ss, ok := served(m.Step(SnapshotRequest{Slot: 1, Epoch: 1, From: "n2"})); ok {
		t.Errorf("request for epoch 1 of slot 1: served %+v, want none", ss)
	}
	if ss, ok := served(m.Step(SnapshotRequest{Slot: 2, Epoch: 1, From: "n2"})); ok {
		t.Errorf("request for epoch 1 of slot 2: served %+v, want none", ss)
	}
	// At the next epoch, for an importer handed it without a copy: the
	// same data, as the final copy of epoch 2 (sim seed 9126).
	ss, ok = served(m.Step(SnapshotRequest{Slot: 1, Epoch: 3, From: "n3"}))
	if !ok || ss.Epoch != 3 || ss.Seq != 5 || ss.To != "n3" || !ss.Final {
		t.Errorf("request for epoch 3 of slot 1: served %+v (%v), want the final copy of epoch 2 at seq 5 to n3, at epoch 3", ss, ok)
	}
	// Outside the table's position the copy stays through news of a
	// later epoch, and goes when an owner of one speaks.
	m.Step(EpochSeen{Slot: 1, Epoch: 4, From: "n3"})
	if got := m.State(1); got.FinalOf != 2 || got.Epoch != 4 {
		t.Errorf("State(1) after news of epoch 4 = %v, want epoch 4 and the final copy of 2 kept", got)
	}
	effs := m.Step(EpochSeen{Slot: 1, Epoch: 4, From: "n3", Owner: true})
	if got := m.State(1); got.FinalOf != 0 || !slices.ContainsFunc(effs, func(ef Effect) bool { return ef == DropSlot{Slot: 1} }) {
		t.Errorf("State(1) after n3 owns epoch 4 = %v, effects %v, want the copy dropped", got, effs)
	}
}

// TestStaleSnapshotKeepsTheGrant: a snapshot that arrives after a newer
// heartbeat of the same owner (sent earlier, delivered late) neither
// revokes the grant that heartbeat renewed nor rolls the copy back; when
// the owner then dies, its follower still promotes. Before, the late
// snapshot reset the grant and nobody could ever take the slot.
func TestStaleSnapshotKeepsTheGrant(t *testing.T) {
	c := bootstrapped3(t)
	for i := 1; i <= 20; i++ {
		c.tick(base.Add(time.Duration(i) * 100 * time.Millisecond))
		c.deliver(10)
	}
	n2 := c.m["n2"]
	if !strings.Contains(n2.Debug(0), "grantor=true") {
		t.Fatalf("n2 does not hold n1's grant for slot 0: %s", n2.Debug(0))
	}
	// A snapshot n1 sent at 1s (with a grant), delivered only now, after
	// the heartbeat of 2s.
	c.step("n2", SnapshotComplete{Slot: 0, Epoch: 1, Seq: 0, From: "n1", Sent: base.Add(time.Second), Grant: true})
	if d := n2.Debug(0); !strings.Contains(d, "grantor=true") || strings.Contains(d, "grantedUntil=00:00:00.000") {
		t.Fatalf("after a late snapshot n2 lost the grant of the 2s heartbeat: %s", d)
	}
	c.crash("n1")
	for i := 21; i <= 100 && !n2.Firing(0); i++ {
		c.tick(base.Add(time.Duration(i) * 100 * time.Millisecond))
		if i == 21 {
			c.deaths()
			c.tables(false)
		}
		c.deliver(10)
	}
	if !n2.Firing(0) {
		t.Fatalf("n2 never took slot 0 over from the dead n1: %s", n2.Debug(0))
	}
}

// bootstrapped3 returns a cluster of n1, n2, n3 over 4 slots that
// bootstrapped together, its first messages delivered.
func bootstrapped3(t testing.TB) *cluster { return bootstrapped(t, 4) }

// bootstrapped returns a cluster of n1, n2, n3 over numSlots slots that
// bootstrapped together, its first messages delivered.
func bootstrapped(t testing.TB, numSlots int) *cluster {
	c := newCluster(t, numSlots)
	for _, n := range []string{"n1", "n2", "n3"} {
		c.add(n, nil)
	}
	c.stable = 3
	c.tables(true)
	c.deliver(100)
	return c
}

// TestLeftOwnerFailsOver: an owner that left without handing its slot over
// (its drain gave up) fails over as a dead one, even though a heartbeat it
// sent while it left arrives after the news. A node declared dead comes
// back with such a sign of life; one that left did not, or its slots would
// wait for it forever.
func TestLeftOwnerFailsOver(t *testing.T) {
	for _, left := range []bool{true, false} {
		t.Run(fmt.Sprintf("left=%v", left), func(t *testing.T) {
			c := bootstrapped3(t)
			c.run(2 * time.Second)
			n2 := c.m["n2"]
			if !strings.Contains(n2.Debug(0), "grantor=true") {
				t.Fatalf("n2 does not hold n1's grant for slot 0: %s", n2.Debug(0))
			}
			c.crash("n1")
			c.stable = 2
			for _, n := range []string{"n2", "n3"} {
				c.step(n, MemberDead{Name: "n1", Left: left})
			}
			c.tables(false)
			// n1's last heartbeat, sent as it left.
			c.step("n2", Replicated{Slot: 0, Epoch: 1, From: "n1", Sent: base.Add(2 * time.Second), Grant: true})
			for i := 21; i <= 100 && !n2.Firing(0); i++ {
				c.tick(base.Add(time.Duration(i) * 100 * time.Millisecond))
				c.deliver(10)
			}
			if got := n2.Firing(0); got != left {
				t.Fatalf("n2 fires slot 0: %v, want %v: %s", got, left, n2.Debug(0))
			}
		})
	}
}

// TestLeftSuspectForgotten: an owner forgets a suspect that left the
// cluster at once (node stops a node's machine before it leaves), while one
// declared dead stays a suspect until its lease ran out (and is then only
// dropped, degraded, if the owner's majority evidence allows). A node that
// left for good would otherwise keep its slots' handovers from ever sealing.
func TestLeftSuspectForgotten(t *testing.T) {
	for _, left := range []bool{true, false} {
		t.Run(fmt.Sprintf("left=%v", left), func(t *testing.T) {
			c := bootstrapped3(t)
			c.run(time.Second)
			n1 := c.m["n1"]
			if g := n1.State(0).Grantee; g != "n2" {
				t.Fatalf("setup: n1's grantee for slot 0 is %q, want n2", g)
			}
			c.crash("n2")
			c.step("n1", MemberDead{Name: "n2", Left: left})
			c.tick(base.Add(1100 * time.Millisecond))
			if got, want := n1.State(0).Grantee, map[bool]string{true: "", false: "n2"}[left]; got != want {
				t.Fatalf("n1's grantee for slot 0 after n2 went: %q, want %q: %s", got, want, n1.Debug(0))
			}
		})
	}
}

// TestMaxMovesBoundsImports: a joiner takes its share of the slots with at
// most Config.MaxMoves planned moves in flight at any moment (an owner seals
// a slot, holding its fires and writes, only for an offer, which takes one
// of the joiner's places), and still takes every one of them, each fired by
// exactly one node.
func TestMaxMovesBoundsImports(t *testing.T) {
	const numSlots, maxMoves = 32, 2
	c := bootstrapped(t, numSlots)
	c.run(time.Second)
	c.maxMoves = maxMoves
	c.add("n4", nil)
	c.stable = 4
	c.tables(false)
	n4 := c.m["n4"]
	mine, most := 0, 0
	for s := range numSlots {
		if o, _ := n4.position(Slot(s)); o == "n4" {
			mine++
		}
	}
	if mine <= 2*maxMoves {
		t.Fatalf("setup: the joiner owns %d slots in the new table, want more than %d", mine, 2*maxMoves)
	}
	for i := 0; i < 300; i++ {
		c.tick(c.now.Add(100 * time.Millisecond))
		for range 100 {
			c.deliver(1)
			inFlight := 0
			for _, n := range []string{"n1", "n2", "n3"} {
				for s := range numSlots {
					if si := &c.m[n].slots[s]; si.role == RoleSealing {
						inFlight++
					}
				}
			}
			if inFlight > maxMoves {
				t.Fatalf("%d slots are sealed for the joiner at once, want at most %d:\n%s", inFlight, maxMoves, c.states())
			}
			most = max(most, inFlight)
		}
		if n4.Counts().Owned == mine {
			break
		}
	}
	if got := n4.Counts().Owned; got != mine {
		t.Fatalf("the joiner owns %d of its %d slots 30 s after joining:\n%s", got, mine, c.states())
	}
	if most != maxMoves {
		t.Errorf("at most %d moves were in flight at once, want the bound %d reached", most, maxMoves)
	}
	for s := range numSlots {
		if f := c.firing(Slot(s)); len(f) != 1 {
			t.Errorf("slot %d fired by %v, want one node", s, f)
		}
	}
}

// TestFollowerPending: an owner's writes are safe to acknowledge once a
// replica could take the slot over: right after the bootstrap its follower
// has neither acked its snapshot nor a grant (pending); once the first
// messages are delivered it holds both (not pending); an owner whose
// follower died fires single-copy (not pending: nothing to wait for); a
// node that does not own the slot is never pending.
func TestFollowerPending(t *testing.T) {
	c := newCluster(t, 4)
	for _, n := range []string{"n1", "n2", "n3"} {
		c.add(n, nil)
	}
	c.stable = 3
	c.tables(true)
	// Slot 0: n1 owns it, n2 follows (see TestAccessors).
	n1, n2 := c.m["n1"], c.m["n2"]
	if !n1.FollowerPending(0) || n2.FollowerPending(0) {
		t.Fatalf("right after the bootstrap: n1 pending %v, n2 %v; want true, false", n1.FollowerPending(0), n2.FollowerPending(0))
	}
	c.deliver(100)
	c.tick(base.Add(time.Second))
	c.deliver(10)
	if n1.FollowerPending(0) {
		t.Fatalf("n1 pending once n2 acked its copy and the grant: %s", n1.Debug(0))
	}
	c.crash("n2")
	c.run(3 * time.Second)
	c.deaths() // detected
	c.tables(false)
	c.run(5 * time.Second) // dropped (degraded), then n3 follows
	if n1.State(0).Role != RoleOwner || !n1.Firing(0) || n1.FollowerPending(0) || !slices.Equal(n1.Replicas(0), []string{"n3"}) {
		t.Errorf("8 s after its follower died: n1 %s, replicas %v, pending %v; want owner, firing, [n3], not pending",
			n1.Debug(0), n1.Replicas(0), n1.FollowerPending(0))
	}
}
