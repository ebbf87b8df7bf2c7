package slots

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/ring"
)

// A slot moves to a joiner and its owner dies in the middle of the move:
// after the old follower, which held the owner's lease grant, left the
// table's position and dropped its copy (the owner had announced the
// joiner as a caught-up follower), and before the owner sealed and handed
// the slot over. The joiner holds a complete copy and sees a majority, the
// old owner stays down. Some node must fire the slot again: one crash out
// of four nodes must not strand it while a full copy lives. The old
// follower keeps its grant as a release to n4 when it drops its copy, and
// hands the slot to n4 once n1's lease ran out.
func TestJoinOwnerCrashMidMove(t *testing.T) {
	c := bootstrapped3(t)
	c.run(time.Second)
	const s = Slot(2) // n1 owns it, n2 follows; the 4-node table gives it to n4
	if c.m["n1"].State(s).Role != RoleOwner || c.m["n2"].State(s).Grantee != "" || c.m["n1"].State(s).Grantee != "n2" {
		t.Fatalf("setup: slot %d is not n1's with n2 its grantee:\n%s", s, c.states())
	}
	c.add("n4", nil)
	c.stable = 4
	c.tables(false)
	for range 20 {
		c.deliver(1)
		if c.m["n2"].State(s).Role == RoleNone {
			break
		}
	}
	if c.m["n2"].State(s).Role != RoleNone || c.m["n1"].State(s).Role != RoleOwner || !c.m["n4"].slots[s].synced {
		t.Fatalf("setup: want n2 dropped slot %d, n1 still its owner and n4 holding a copy:\n%s", s, c.states())
	}
	c.crash("n1")
	c.deaths()
	c.tables(false)
	c.run(10 * time.Second)
	firing := c.firing(s)
	if len(firing) != 1 {
		t.Errorf("slot %d fired by %v 10 s after its owner died mid-move, want one node; n4: %s\n%s",
			s, firing, c.m["n4"].Debug(s), c.states())
	}
}

// A slot moves to a joiner. The owner releases its follower's grant to the
// joiner (the importer) and dies before it granted the joiner or sealed:
// neither holds the grant. Before releases nobody could act on the epoch,
// so the slot stayed unavailable until the owner came back (node's
// TestFaultCrashDuringHandover/old-owner-early, 1 run in 6). The holder of
// the release, which still holds its copy, hands the slot to the joiner
// once the owner's lease ran out; the joiner takes it, and nobody else.
func TestJoinOwnerCrashMidRelease(t *testing.T) {
	c := bootstrapped3(t)
	c.run(time.Second)
	const s = Slot(2) // n1 owns it, n2 follows; the 4-node table gives it to n4
	if c.m["n1"].State(s).Role != RoleOwner || c.m["n1"].State(s).Grantee != "n2" {
		t.Fatalf("setup: slot %d is not n1's with n2 its grantee:\n%s", s, c.states())
	}
	c.add("n4", nil)
	c.stable = 4
	c.tables(false)
	// The owner dies at the worst moment: n2 holds the release, n4 no
	// grant, and n1 has not sealed. Until then n1 does not get n4's offer
	// nor n2 the news that n4 caught up (n2 would drop its copy: that is
	// TestJoinOwnerCrashMidMove), and n1's grants to n4 are lost.
	released := false
	for i := 0; i < 50 && !released; i++ {
		c.tick(c.now.Add(100 * time.Millisecond))
		q := c.queue[:0]
		for _, msg := range c.queue {
			switch ev := msg.ev.(type) {
			case HandoverOffer:
				if msg.to == "n1" {
					continue
				}
			case EpochSeen:
				if msg.to == "n2" {
					continue
				}
			case Replicated:
				if msg.to == "n4" && ev.Grant {
					continue
				}
			case SnapshotComplete:
				if msg.to == "n4" && ev.Grant {
					ev.Grant = false
					msg.ev = ev
				}
			}
			q = append(q, msg)
		}
		c.queue = q
		c.deliver(1)
		n2 := c.m["n2"].slots[s]
		released = n2.releasedTo == "n4" && n2.synced && c.m["n1"].State(s).Role == RoleOwner &&
			c.m["n1"].slots[s].suspects[0].releasedTo == "n4"
	}
	if !released || c.m["n4"].slots[s].grantor {
		t.Fatalf("setup: want n2 holding (and n1 knowing) a release of slot %d to n4, n4 no grant:\nn1 %s\nn2 %s\nn4 %s", s,
			c.m["n1"].Debug(s), c.m["n2"].Debug(s), c.m["n4"].Debug(s))
	}
	c.crash("n1")
	c.deaths()
	c.tables(false)
	c.run(10 * time.Second)
	firing := c.firing(s)
	if len(firing) != 1 || firing[0] != "n4" {
		t.Errorf("slot %d fired by %v 10 s after its owner died mid-release, want n4; n4: %s\nn2: %s\n%s",
			s, firing, c.m["n4"].Debug(s), c.m["n2"].Debug(s), c.states())
	}
}

// A joiner imports more slots than it has move places (Config.MaxMoves)
// when an old owner dies, at several moments of the join. The slots that
// owner was handing to the joiner must not starve behind the others: the
// holder of the dead owner's grant hands each to the joiner, and once the
// dead owner's leases ran out every slot is fired by exactly one node.
// (node's TestFaultCrashDuringHandover/old-owner-early lost tasks when such
// slots, reported unavailable between attempts, went back to the end of
// the move queue at every attempt.)
func TestJoinOwnerCrashWithMovesQueued(t *testing.T) {
	const numSlots, maxMoves = 64, 2
	for _, victim := range []string{"n1", "n2", "n3"} {
		for _, after := range []time.Duration{0, 300 * time.Millisecond, time.Second, 3 * time.Second, 6 * time.Second} {
			t.Run(fmt.Sprintf("%s/after=%v", victim, after), func(t *testing.T) {
				c := bootstrapped(t, numSlots)
				c.run(time.Second)
				c.maxMoves = maxMoves
				c.add("n4", nil)
				c.stable = 4
				c.tables(false)
				c.run(after)
				c.crash(victim)
				c.deaths()
				c.tables(false)
				// Detection is done; the dead owner's leases end within a
				// Lease, and each of its slots needs one move attempt
				// (Lease) per place: far less than this.
				c.run(2 * time.Minute)
				for s := range numSlots {
					if f := c.firing(Slot(s)); len(f) != 1 {
						t.Errorf("slot %d fired by %v, want one node; n4: %s", s, f, c.m["n4"].Debug(Slot(s)))
					}
				}
				if t.Failed() {
					t.Log(c.states())
				}
			})
		}
	}
}

// A slot moves to a joiner, whose copy lacks the last write: the old owner
// hands over its final (epoch, seq) and crashes before the joiner fetched
// the final copy, which only the old owner holds. While it is down the
// joiner cannot take the slot and must say so (unavailable); once it is
// back, it must serve that copy although it restarted, and the joiner
// takes the slot. Before the handover was persisted (SlotState.Handed)
// the restarted owner knew neither that it had handed the slot nor that
// its copy was the final one: nobody fired the slot again (sim seed 9825).
func TestHandoverHolderRestartsBeforeFinalCopy(t *testing.T) {
	c := bootstrapped3(t)
	c.run(time.Second)
	const s = Slot(2) // n1 owns it, n2 follows; the 4-node table gives it to n4
	if c.m["n1"].State(s).Role != RoleOwner {
		t.Fatalf("setup: slot %d is not n1's:\n%s", s, c.states())
	}
	c.add("n4", nil)
	c.stable = 4
	c.tables(false)
	final := uint64(0)
	for i := 0; i < 100 && c.m["n4"].slots[s].takeFrom != "n1"; i++ {
		c.tick(c.now.Add(100 * time.Millisecond))
		q := c.queue[:0]
		for _, msg := range c.queue {
			switch ev := msg.ev.(type) {
			case Sealed:
				if msg.to == "n1" && ev.Slot == s {
					// A write committed while n1 sealed: n4's copy lacks it.
					ev.Seq++
					final, msg.ev = ev.Seq, ev
				}
			case Replicated:
				if msg.to == "n4" && ev.Slot == s {
					// n1's heartbeats and announcements to n4 are lost:
					// n4 cannot tell whether it was n1's replica, so
					// whether it holds every write n1 acknowledged (it
					// could take the slot with its own copy if it knew).
					continue
				}
			case EpochSeen:
				if msg.to == "n4" && ev.Slot == s {
					continue
				}
			}
			q = append(q, msg)
		}
		c.queue = q
		c.deliver(1)
	}
	n4 := c.m["n4"].slots[s]
	if n4.takeFrom != "n1" || n4.takeSeq != final || final == 0 || n4.seq >= final {
		t.Fatalf("setup: want n4 handed slot %d by n1 at seq %d, its own copy behind:\n%s", s, final, c.m["n4"].Debug(s))
	}
	if st := c.m["n1"].State(s); st.Handed != "n4" || st.HandedSeq != final {
		t.Fatalf("n1 did not persist its handover of slot %d to n4 at seq %d: %v", s, final, st)
	}
	c.crash("n1")
	c.deaths()
	c.run(5 * time.Second)
	if f := c.firing(s); len(f) != 0 || !c.m["n4"].Unavailable(s) {
		t.Errorf("with n1 down, slot %d fired by %v, n4 unavailable %v; want nobody, and n4 to report it: %s",
			s, f, c.m["n4"].Unavailable(s), c.m["n4"].Debug(s))
	}
	c.restart("n1")
	for _, n := range c.names {
		c.refresh(n)
	}
	c.run(10 * time.Second)
	if f := c.firing(s); len(f) != 1 || f[0] != "n4" || c.m["n4"].State(s).Seq < final {
		t.Errorf("slot %d fired by %v after n1 restarted, want n4 with the final copy (seq %d); n4: %s\nn1: %s\n%s",
			s, f, final, c.m["n4"].Debug(s), c.m["n1"].Debug(s), c.states())
	}
	if st := c.m["n1"].State(s); st.Handed != "" {
		t.Errorf("n1 still records its handover of slot %d once n4 took it: %v", s, st)
	}
}

// joinAfterFollowerCrash runs TestJoinAfterFollowerCrash's setup: 3 nodes,
// n2 crashes, n4 joins and takes slots whose owner had dropped n2. It
// returns the cluster and those slots (each with n2 as n4's dropped suspect).
func joinAfterFollowerCrash(t *testing.T) (*cluster, []Slot) {
	t.Helper()
	const numSlots = 64
	c := crashedN2(t, numSlots, 2*time.Second)
	c.run(10 * time.Second)
	degraded := map[Slot]bool{}
	for s := range Slot(numSlots) {
		for _, n := range []string{"n1", "n3"} {
			if si := &c.m[n].slots[s]; si.role == RoleOwner && len(si.dropped) > 0 {
				degraded[s] = true
			}
		}
	}
	c.add("n4", nil)
	c.tick(c.now.Add(100 * time.Millisecond)) // memberlist: n4 is alive, then the tables
	c.tables(false)
	c.run(c.deadAfter + 500*time.Millisecond) // n4 learns that n2 is dead
	c.deaths()
	c.tables(false)
	c.run(20 * time.Second)
	moved, inherited := 0, []Slot(nil)
	for s := range Slot(numSlots) {
		if firing := c.firing(s); len(firing) != 1 {
			t.Errorf("slot %d fired by %v, want one node", s, firing)
			for _, n := range c.names {
				t.Logf("  %s: %s", n, c.m[n].Debug(s))
			}
		}
		owner, _ := c.m["n4"].position(s)
		if owner != "n4" {
			continue
		}
		if c.m["n4"].State(s).Role != RoleOwner {
			t.Errorf("slot %d (degraded before the join: %v) not taken by the joiner 20 s after it joined: n4 %s", s, degraded[s], c.m["n4"].Debug(s))
			continue
		}
		if degraded[s] {
			moved++
			if c.m["n4"].droppedIndex(s, "n2") >= 0 {
				inherited = append(inherited, s)
			}
		}
	}
	if moved == 0 || len(inherited) != moved {
		t.Fatalf("setup: %d degraded slots moved to the joiner, %d of them inherited n2 as dropped (want > 0, all)\n%s", moved, len(inherited), c.states())
	}
	return c, inherited
}

// A follower dies for good and a node joins before it comes back: the
// slots whose follower died (their owners dropped it and fire degraded)
// and that the new table gives the joiner must move to it. Before the
// handover carried the dropped suspects (SendHandover.Dropped), an owner
// never sealed while it had one, so the joiner stayed importing until the
// dead node returned or was forgotten: in a 3-process test a node that
// joined after a SIGKILL was never ready. The joiner inherits the dropped
// suspect; once the dead node comes back it answers and is cleared.
func TestJoinAfterFollowerCrash(t *testing.T) {
	c, inherited := joinAfterFollowerCrash(t)
	t.Logf("%d degraded slots moved to the joiner", len(inherited))
	// The dead node comes back: its new incarnation holds no grant, it
	// answers the joiner's heartbeats, and nobody keeps it dropped.
	c.restart("n2")
	c.tables(false)
	c.run(10 * time.Second)
	for s := range Slot(c.numSlots) {
		for _, n := range c.names {
			if si := &c.m[n].slots[s]; len(si.dropped) > 0 || len(si.suspects) > 1 {
				t.Errorf("slot %d: %s still has suspects %v dropped %v after n2 came back", s, n, si.suspects, si.dropped)
			}
		}
		if firing := c.firing(s); len(firing) != 1 {
			t.Errorf("slot %d fired by %v after n2 came back, want one node", s, firing)
			for _, n := range c.names {
				t.Logf("  %s: %s", n, c.m[n].Debug(s))
			}
		}
	}
}

// The joiner never saw the dead node (memberlist hands a joiner no dead
// members), so it can neither see it dead nor hear from it. After a lapse
// of its majority (a pause of DeadAfter) the inherited names are suspects
// again and those slots stop firing: only an answer or the node leaving
// clears a suspect. An operator's forget reaches the joiner as a leave
// intent for a node it never saw (gossip adds it as left,
// ownership.memberChanges reports it): MemberDead{Left} must clear the
// suspect and the slots fire again, and a name never counted must not
// cost the joiner its majority.
func TestJoinerForgetsInheritedSuspect(t *testing.T) {
	c, inherited := joinAfterFollowerCrash(t)
	c.paused["n4"] = c.now.Add(c.deadAfter + 500*time.Millisecond)
	c.run(c.deadAfter + time.Second)
	c.tableOf("n4", false)
	c.run(5 * time.Second)
	stalled := 0
	for _, s := range inherited {
		if c.m["n4"].suspectIndex(s, "n2") >= 0 && !c.m["n4"].Firing(s) {
			stalled++
		}
	}
	if stalled == 0 {
		t.Fatalf("setup: no inherited slot stalled on n2 after n4's pause\n%s", c.states())
	}
	m4 := c.m["n4"]
	sees := m4.sees
	delete(m4.heard, "n2") // the joiner never heard of it
	delete(m4.dead, "n2")
	c.step("n4", MemberDead{Name: "n2", Left: true})
	if m4.sees != sees || !m4.majority {
		t.Errorf("a leave of a node never counted cost the joiner: sees %d -> %d, majority %v", sees, m4.sees, m4.majority)
	}
	c.run(5 * time.Second)
	for _, s := range inherited {
		if owner, _ := m4.position(s); owner != "n4" {
			continue
		}
		if m4.suspectIndex(s, "n2") >= 0 || m4.droppedIndex(s, "n2") >= 0 {
			t.Errorf("slot %d: n4 still names n2 after it left: %s", s, m4.Debug(s))
		}
		if firing := c.firing(s); len(firing) != 1 || firing[0] != "n4" {
			t.Errorf("slot %d fired by %v after n2 was forgotten, want n4: %s", s, firing, m4.Debug(s))
		}
	}
	t.Logf("%d of %d inherited slots stalled on n2 until it was forgotten", stalled, len(inherited))
}

// A restarted owner whose grantee gives the epoch back (here without a
// copy: it restarted too) while the table gives the slot to a joiner takes
// epoch+1 as the holder of the epoch's only complete copy without owning
// it; it hands the slot on at the joiner's offer. Crashed and restarted
// once more before that offer, it must still know, so it persists
// WasOwner. Before, it came back as a stale follower, the joiner asked it
// and the grantee for a copy for ever and the slot stayed unfired (sim
// seed 5122).
func TestCopylessHandbackSurvivesRestart(t *testing.T) {
	const numSlots = 64
	c := bootstrapped(t, numSlots)
	c.run(time.Second)
	four := c.assign([]ring.Member{{Name: "n1"}, {Name: "n2"}, {Name: "n3"}, {Name: "n4"}})
	s := grantedSlot(t, c, func(i Slot) bool { return ownerName(four, i) == "n4" }, " and the 4-node table gives n4")
	e := c.m["n1"].State(s).Epoch
	c.crash("n1")
	c.crash("n2")
	c.restart("n2") // its copy is stale now: it hands the epoch back without one
	c.add("n4", nil)
	c.restart("n1") // owner of epoch e, grantee n2; the table gives s to n4
	c.stable = 4
	c.tables(false)
	for i := 0; i < 100 && c.m["n1"].State(s).Epoch == e; i++ {
		c.tick(c.now.Add(100 * time.Millisecond))
		c.deliver(1)
	}
	if st := c.m["n1"].State(s); st.Epoch != e+1 || st.Role == RoleOwner || !c.m["n1"].slots[s].wasOwner || st.Grantee != "" {
		t.Fatalf("setup: n1 did not take epoch %d back as the copy's holder (want wasOwner, no grantee): %v\n%s", e+1, st, c.m["n1"].Debug(s))
	}
	restartSettled(t, c, "n1", s, "n4", "n1's copy")
}

// grantedSlot returns a slot that n1 owns with grantee n2 and for which
// also holds (nil: any); the test fails without one (what says which).
func grantedSlot(t *testing.T, c *cluster, also func(Slot) bool, what string) Slot {
	t.Helper()
	for i := range Slot(c.numSlots) {
		if st := c.m["n1"].State(i); st.Role == RoleOwner && st.Grantee == "n2" && (also == nil || also(i)) {
			return i
		}
	}
	t.Fatalf("setup: no slot that n1 owns with grantee n2%s:\n%s", what, c.states())
	return 0
}

// restartSettled crashes and restarts node n, gives every node its view of
// that and runs 15 s: then slot s must fire on want (holding what) alone,
// and every slot on one node.
func restartSettled(t *testing.T, c *cluster, n string, s Slot, want, what string) {
	t.Helper()
	c.crash(n)
	c.restart(n)
	for _, o := range c.names {
		c.refresh(o)
	}
	c.run(15 * time.Second)
	if f := c.firing(s); len(f) != 1 || f[0] != want {
		t.Errorf("slot %d fired by %v after %s restarted again, want %s (with %s)\n%s: %s\n%s: %s\n%s",
			s, f, n, want, what, n, c.m[n].Debug(s), want, c.m[want].Debug(s), c.states())
	}
	for i := range Slot(c.numSlots) {
		if f := c.firing(i); len(f) != 1 {
			t.Errorf("slot %d fired by %v with every node up, want one node", i, f)
			for _, o := range c.names {
				t.Logf("  %s: %s", o, c.m[o].Debug(i))
			}
		}
	}
}

func ownerName(t ring.Table, s Slot) string {
	m, _ := t.Owner(uint16(s))
	return m.Name
}

// A restarted owner's grantee, itself restarted (its copy is stale), gives
// the epoch back without a copy; the handover is lost and the grantee
// restarts once more before the owner's next offer. It must still know
// that epoch+1 is the owner's to take and repeat the handover, so it
// persists even a handover without a copy (SlotState.HandedBare). Before,
// it came back at epoch+1 with no record, rejected the owner's offer with
// that epoch, the owner stepped down, and nobody could take the slot: it
// stayed unfired with every node up and no data lost (sim seed 2167
// without the forget).
func TestBareHandbackSurvivesRestart(t *testing.T) {
	const numSlots = 64
	c := bootstrapped(t, numSlots)
	c.run(time.Second)
	s := grantedSlot(t, c, nil, "")
	e := c.m["n1"].State(s).Epoch
	c.crash("n1")
	c.crash("n2")
	c.restart("n2") // its copy is stale now: it hands the epoch back without one
	c.restart("n1") // owner of epoch e, grantee n2
	for _, n := range c.names {
		c.refresh(n)
	}
	for i := 0; i < 100 && c.m["n2"].State(s).Epoch == e; i++ {
		c.tick(c.now.Add(100 * time.Millisecond))
		c.queue = slices.DeleteFunc(c.queue, func(msg message) bool {
			ev, ok := msg.ev.(HandoverDone)
			return ok && msg.to == "n1" && ev.Slot == s // lost
		})
		c.deliver(1)
	}
	if si := &c.m["n2"].slots[s]; si.epoch != e+1 || si.handedTo != "n1" || si.handedCopy {
		t.Fatalf("setup: n2 did not hand epoch %d back to n1 without a copy: %s", e, c.m["n2"].Debug(s))
	}
	if st := c.m["n2"].State(s); st.Handed != "n1" || !st.HandedBare {
		t.Errorf("n2 did not persist its handover of slot %d to n1 without a copy: %v", s, st)
	}
	if c.m["n1"].State(s).Epoch != e {
		t.Fatalf("setup: n1 left epoch %d: %v", e, c.m["n1"].State(s))
	}
	restartSettled(t, c, "n2", s, "n1", "its own copy")
}
