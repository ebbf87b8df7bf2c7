package slots

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestSimulation runs seeded random fault schedules over 3 to 5 Machines
// (8 slots) wired by the in-test network, in fake time: 20 s of faults, one
// every ~2 s, among message loss (5 %) and delay (0-300 ms, reordering),
// partitions into two groups, crashes, restarts with old data, joins,
// drains and process pauses (0.5-4.5 s), with membership changes noticed
// after a failure detection delay (0.5-3 s plus up to 0.9 s of jitter per
// node). Odd seeds run with Config.DeadAfter 1.5 s and a failure detector
// that declares a node dead only once it has not reached it for that long
// (memberlist's minimum suspicion timeout). Checked after every Step
// (cluster.stepMsg):
//   - each machine's own invariants (checkInvariants);
//   - no slot is fired by two running nodes at once, majority or not;
//   - no two nodes ever take the same epoch of a slot;
//   - no node's epoch for a slot ever decreases, restarts included;
//   - no node claims a valid replica it never received by a chain of
//     snapshots from a bootstrapped copy (never own from nothing);
//   - no node asks one node for a copy of one slot, or offers it one, more
//     than 10 times in a second of fake time (checkAsks: no loop at
//     message rate).
//
// Then the network heals and pauses end, crashed nodes staying down: every
// slot must be fired by exactly one node, or (only if a node crashed) be
// reported unavailable, unless the live nodes are a minority or all
// draining. Then (-simforget, the default) an operator forgets the crashed
// nodes, and the census may take their slots (census.go) under the same
// checks. Then the crashed nodes restart, with their data, or a forgotten
// one on even seeds (every one with -simwipe) with none; either way it is
// told it was forgotten (slots.Disowned). The same must hold again; with
// -simforget=false (TestSimulationRestarts) and no wipe nothing was lost,
// and every slot must fire, none excused as unavailable.
// -simseed=N traces one seed. Reference: DESIGN §1.3, §4.
var (
	simSeed      = flag.Int("simseed", -1, "run only this TestSimulation seed, tracing every effect")
	simSeeds     = flag.Int("simseeds", 400, "number of TestSimulation seeds (50 with -short)")
	simSteps     = flag.Int("simsteps", 200, "fault-phase steps (100 ms each) per TestSimulation seed")
	simFirst     = flag.Int("simfirst", 0, "first TestSimulation seed")
	simForget    = flag.Bool("simforget", true, "TestSimulation forgets the crashed nodes before they restart")
	simDisown    = flag.Bool("simdisown", true, "TestSimulation tells a forgotten node that comes back that it was (slots.Disowned)")
	simWipeFault = flag.Int("simwipefault", 0, "TestSimulation: 1 in N restarts of the fault phase bring the node back with an empty data dir, not forgotten (0: none)")
	simTail      = flag.Int("simtail", 0, "TestSimulation: extra 100 ms ticks before the last check and before the after-forget check")
	simFired     = flag.Bool("simfiredafterforget", false, "TestSimulation: every slot must fire once the crashed nodes are forgotten, before they return (else that is only logged)")
	simStrict    = flag.Bool("simstrict", false, "TestSimulation: once every node is back, excuse an unfired slot only after a wipe, not after a forget (open: see DESIGN §4)")
	simRestarts  = flag.Int("simrestarts", 200, "number of TestSimulationRestarts seeds (50 with -short)")
	simWipe      = flag.Bool("simwipe", false, "TestSimulation restarts every forgotten node with an empty data dir (by default only on even seeds; on odd ones with its data)")
)

func TestSimulation(t *testing.T) {
	if *simSeed >= 0 {
		simulate(t, uint64(*simSeed), simOpts{wipeFault: *simWipeFault, forget: *simForget, strict: *simStrict, firedAfterForget: *simFired})
		return
	}
	seeds := *simSeeds
	if testing.Short() {
		seeds = min(seeds, 50)
	}
	// Seeds beyond the default range that once failed, kept as
	// regressions: 4448 (two owners of one epoch: a restarted owner
	// treated a handback as grant-free while the grantee kept a grant),
	// 5667 (a slot left importing for good: offers to a leader that had
	// handed the slot on), 9825, 22062, 25134 and 25389 (a slot stuck
	// once the node that handed it over restarted before the importer
	// fetched the final copy: the handover was not persisted; and while
	// that node was down the importer did not report the slot
	// unavailable), 2776 (a restarted owner stepped down, voiding the one
	// complete copy, on its grantee's snapshot request at the epoch the
	// grantee had just handed back to it, which overtook the handover).
	// 2332 (two owners: a holder repeating its handover to a restarted
	// importer kept the grant clock of the first handover, while the
	// importer covered it from its new offer). 14850 (two nodes firing:
	// an owner that sealed, paused past DeadAfter while its grantee
	// promoted, then kept a grant at the epoch the grantee had taken by
	// promotion; see sealVoid) and 32400 (two owners of one epoch when a
	// view lapse counted for nothing: the evidence held on a non-voter's
	// signs of life; see checkViewLapse). 30224 and 36823 (a slot unfired:
	// the table owner held a dead owner's release to a node that never
	// offered; fixed by AskOffer), 1227 and 2305 (any release holder
	// asking: two owners of one epoch, or an epoch handed over twice and
	// taken by nobody), 5854 (a draining node answered an AskOffer).
	// 34010 (a slot unfired for good: a restarted follower held a copy it
	// had fetched from another follower and so never accepted its live
	// owner's grant; it now fetches the owner's copy when the owner
	// heartbeats it). 26269 (a slot unfired for good after a forget: the
	// holder of a copyless handover to the forgotten run had no copy, and
	// the returning, disowned importer asked nobody else; see
	// takeSource). 8429 (a slot unfired for good after a forget: a node
	// that had handed its epoch without a copy to an importer that crashed
	// at once kept repeating that handover after the importer was
	// forgotten, and no census could run while it did; endHandovers),
	// and with it 12334, 16450, 20812, 28545, 32510, 34844 and 37182, the
	// other seeds of 400-39,999 left unfired after the forget.
	// 1696 (an epoch taken twice: two nodes ran a census of one slot at
	// once, and each counted the other's NoReplica to a snapshot request
	// as an answer to its census; NoReplica.Census) failed only on a
	// first version of TestSimulationRestarts' fixes.
	// 14340 (one slot fired by two nodes: an owner cleared a suspect on an
	// ack of a heartbeat older than the release it had sent it since, and
	// that release, acked from a non-suspect, was ignored; its holder
	// handed the epoch over while the owner fired on; suspect.releaseSent).
	// 23605 (a draining holder's grant of the importer it had handed its
	// epoch to with a copy, which crashed before the handover reached it,
	// was voided by a pause: the holder left the table owner's offers
	// unanswered, so nobody reported the slot unavailable while the
	// importer was down, waitsForImporter, and after its forget the
	// record of that handover kept the census out, endHandovers).
	all := []uint64{1227, 1696, 2305, 2332, 2776, 4448, 5667, 5854, 8429, 9825, 12334, 14340, 14850, 16450, 20812, 22062, 23605, 25134, 25389,
		26269, 28545, 30224, 32400, 32510, 34010, 34844, 36823, 37182}
	if *voteAll {
		// The seeds the exclusive vote was built or fixed for: 13735 and
		// 14309 (two nodes fire one slot without it: an owner fired
		// degraded on its own evidence of a majority while its follower
		// promoted on its own), 592 (two nodes firing: promises of voters
		// that joined the owner's side while it was cut off; the vote
		// counts among the grant's voters too), 37507 (two owners: a
		// restart notice that came after the new incarnation's grant
		// spared the consents), 4978 (a slot unfired: the consents
		// collected were dropped at every beat of the restarted owner),
		// 2113 (a slot unfired for two rounds of offers: consents asked
		// ahead for a restarted owner's grant). And those its sweep found
		// in the rules beneath: 5122 (a slot unfired for good: a copy held
		// as a past owner's read back as a stale replica after the next
		// restart; SlotState.WasOwner), 26249 (an unavailable slot
		// unflagged by a copy that did not make it ours), 25092 (a
		// handover rejected: a new leader inherited the old one's
		// leaderOwns) and 28403 (a grant holder's early offer answered a
		// round of offers later: heldOffer). 21970 (a grant holder whose
		// consents could never come never reported its slot unavailable:
		// the wait was timed per incarnation, not per slot: slotWait).
		// 29446 (a slot unfired for good: an importer dropped the copy it
		// had offered to a release holder, which handed it the next epoch
		// on the strength of that copy; the owner then dropped its own on
		// learning of that epoch). 5760 (an epoch taken twice: a grantee
		// that had handed its crashed owner's epoch to the table owner took
		// the owner's repeated handover of that epoch too; onHandover).
		all = append(all, 592, 2113, 4978, 5122, 5760, 13735, 14309, 21970, 25092, 26249, 28403, 29446, 37507)
	}
	for i := range seeds {
		all = append(all, uint64(*simFirst+i))
	}
	for _, seed := range slices.Compact(slices.Sorted(slices.Values(all))) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			simulate(t, seed, simOpts{wipeFault: *simWipeFault, forget: *simForget, strict: *simStrict, firedAfterForget: *simFired})
		})
	}
	// Seeds whose slots must all fire after the forget, before the
	// forgotten nodes return (a forgotten node may never): 23605 (the
	// record of a handover with a copy to the forgotten importer, whose
	// grant a pause had voided, kept the census out; endHandovers) and
	// 427 (a member held a voided grant of a live owner, which could never
	// be restored, and answered none of that owner's census; restoreGrant),
	// 781 (an owner whose one uncovered suspect was forgotten ran no
	// census, since a live suspect it still heartbeated was not forgotten;
	// ownerCensusFor) and 1239 (the same, and then the live suspect held a
	// release of that owner's grant and answered none of its census: it
	// yields it now, onOffer), 884 (an importer handed an epoch with the
	// holder's copy, which sealed and crashed before the copy reached it,
	// waited for the forgotten holder for good; tryTake gives the take up
	// to a census once a round of members found no copy), 18287 (an
	// owner's census never counted a member that answered with a copy
	// at its epoch, and asked it again every Lease; onSnapshot). Each
	// forgets one crashed node only.
	for _, seed := range []uint64{427, 781, 884, 1239, 18287, 23605} {
		t.Run(fmt.Sprintf("seed=%d,fired-after-forget", seed), func(t *testing.T) {
			t.Parallel()
			simulate(t, seed, simOpts{forget: true, firedAfterForget: true})
		})
	}
}

// TestSimulationRestarts runs TestSimulation's schedules without the
// forget: crashed nodes come back with their data, as after a SIGKILL, so
// nothing is lost and once every node is back every slot must fire, none
// excused as reported unavailable (the excuse hid these for as long as
// the forget ran on every seed with a crash: 311 of seeds 400-2,399 left
// slots unfired for good). Pinned: 647 (a restarted owner that had
// several suspects at its crash, SlotState.Grantee "*", waited for good
// for one of them to act; it now asks every member, each gives up any
// grant of its epoch, and takes the epoch back once all answered:
// reclaimsByCensus, yieldGrant), 774 (a restarted owner the slot's
// importer never asked: it had crashed while draining, and importers
// asked table members only; askable), 700 and 17 (the same owner, drained,
// that had given no grant, or whose draining grantee held its grant: a
// draining node never promotes and is never offered to; it takes the
// epoch back itself, or the grantee gives it back), 504 and 587 (such a census never
// completed: a member whose slot read back as RoleNone, or whose follower
// copy read back unsynced, did not answer; censusAnswer), 12334 (a
// restarted owner stepped down, voiding its complete copy, on the table
// owner's snapshot request at the epoch its grantee had handed back to
// it; onSnapshotRequest) and 2349 and 1159 (a node that had handed its
// epoch over with a copy and crashed stopped repeating the handover once
// the importer, which never got it, said NoReplica to its copy request;
// onNoReplica), 2167 and 22994 (a holder that handed its epoch on without
// a copy restarted before the importer took it and forgot it had:
// SlotState.HandedBare), 8094 (a table owner whose copy followed another
// follower never offered to the owner heartbeating it, which drained:
// importStep's beatFrom) and 14966, 5634, 20186 (a holder kept its record
// of a handover the importer had taken, since restarted and asking the
// members for its epoch back, and never answered it: onOffer), 23697 (a
// record of a handover of an older epoch did the same: handsOver) and
// 28063 (an owner kept a returned follower's older, dropped grant beside
// the one it gave it again, and never fired again: onAck), 23059 (a
// follower handed its owner's epoch without a copy heard of the handed
// epoch from a third node first, stepped up to it and then waited for a
// final copy the holder never had: slotInfo.takeOwn), 34062 (a restarted
// owner, draining, took its epoch back by census, and the follower of it
// answered with its copy, longer than the seq the owner had read back,
// which a draining node never installs: the census never completed;
// censusAnswer), 8429 (the holder of a release handed the epoch without
// a copy to an importer that had crashed since it offered, its copy read
// back no longer counting, and the restarted owner of the epoch, whose
// copy was the one complete one, answered its requests NoReplica once a
// later epoch had moved it on: slotInfo.finalOf, takeSource) and 23605
// (nobody reported unavailable a slot waiting for the crashed importer a
// holder had handed it to: the holder left the table owner's offers
// unanswered; waitsForImporter).
func TestSimulationRestarts(t *testing.T) {
	seeds := *simRestarts
	if testing.Short() {
		seeds = min(seeds, 50)
	}
	all := []uint64{17, 504, 587, 647, 700, 774, 1159, 2167, 2349, 5634, 8094, 8429, 12334, 14966, 20186, 22994, 23059, 23605, 23697, 28063, 34062}
	for i := range seeds {
		all = append(all, uint64(*simFirst+i))
	}
	for _, seed := range slices.Compact(slices.Sorted(slices.Values(all))) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			simulate(t, seed, simOpts{})
		})
	}
	// Longer fault phases (-simsteps 400). 3301 took one epoch twice: a
	// holder sealed and handed its epoch to its grantee, which never got
	// the handover (a partition), saw the holder die and, as its grantee,
	// handed the epoch to the table owner, which took the next one. Once
	// the grantee had restarted, the record of that gone, the holder
	// repeated its handover and the grantee took that epoch too
	// (slotInfo.tookBy, SlotState.HandedTook). 9126: the holder of a
	// release handed the epoch without a copy to an importer that then
	// crashed and drained, dropping its copy; the restarted owner of the
	// epoch, draining too, dropped the one complete copy on news of the
	// next (stepDown now keeps it, finalOf), and the importer asked only
	// the holder (takeSource asks every member; the owner serves its copy
	// as the final one of the epoch before, SendSnapshot.Final). 8429:
	// the table owner was handed an epoch whose one complete copy was on
	// a crashed owner, and its rounds of members never said so (tryTake
	// reports the slot unavailable after a round that found nobody).
	for _, seed := range []uint64{3301, 8429, 9126} {
		t.Run(fmt.Sprintf("seed=%d,steps=400", seed), func(t *testing.T) {
			t.Parallel()
			simulate(t, seed, simOpts{steps: 400})
		})
	}
}

// TestSimulationForgotten runs seeds whose forgotten nodes come back with
// their data (odd seeds; -simstrict): once every node is back, every slot
// must fire, though the forget declared their data lost. 431 (the one live
// copy was a follower's holding a voided grant of the forgotten owner: it
// never answered the census; dropForgotten), 429 (the returning forgotten run,
// the table owner, held a follower's copy of an epoch its earlier run had
// owned, and ran no census for that run) and 557 (a table owner that had
// never heard the forgotten owner of the epoch ran no census; censusFor's
// ourRun now covers both), 527 and 2155 (a release of our grant to the
// forgotten importer, or from the forgotten owner while we drained, kept
// us from answering the census; dropForgotten), 1373 (a restarted owner's
// census for its epoch, its grantee forgotten, went unanswered by a member
// holding a voided grant of it; yieldGrant) and 1943 (the forgotten run
// returned before the census completed, and the census no longer counted
// its epoch a forgotten owner's; Machine.forgotRun). Two of seeds
// 400-2,399 still fail so (1599, 1877: the one copy left is a follower's
// read back from disk, which answers no census), so TestSimulation does
// not check this by default (DESIGN §4).
func TestSimulationForgotten(t *testing.T) {
	for _, seed := range []uint64{429, 431, 527, 557, 1373, 1943, 2155} {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			simulate(t, seed, simOpts{forget: true, strict: true})
		})
	}
}

// TestSimulationWipedRestarts runs seeds in which a crashed node came back
// with an empty data dir without being forgotten (a replaced disk): 2007
// and 3247 fired one slot on two nodes. The wiped node had consented to a
// takeover of a paused owner's grants; back empty it promised that owner
// again with no floor, and the owner fired its old epoch on the promise
// beside the node that took the slot over. Promises of a node that came
// back empty no longer count (MemberAlive.Empty). In 564, 7377 and 7748
// an epoch was taken twice: a restarted owner asked its grantee, now
// wiped, for its epoch back, and the wiped node, which knew nothing of it,
// handed it back although its earlier run had promoted; told by the
// members that its name had an earlier run, it takes nothing that run
// held (Disowned), as a forgotten run's return does. In 7350, 11797,
// 16820, 20577, 27217 and 27335 an epoch was taken twice, and in 28376 a
// slot fired on two nodes: an owner cut off while its grantee promoted
// took the wiped grantee's new run's ack without a grant as the end of the
// old grant and fired its old epoch. A grant whose lease ran out before
// the owner heard its holder came back empty is lost now (markLost): no
// later ack clears it, and it retires as a dead grantee's does. In 17868
// and 39438 a slot stayed unfired after the forget: a copyless handover to
// a forgotten importer was repeated for good (endHandovers). In 703,
// 2877, 22204, 28441, 31349, 33019, 35361 and 35501 a slot stayed unfired
// for good: its owner sealed and handed it over, then crashed before its
// importer, a synced replica holding its grant, fetched the final copy,
// and came back empty; the importer asked the new run for that copy
// forever (slotInfo.takeLost). In 596 and 38023 a slot stayed unfired
// for good: a restarted owner asked its grantee for its epoch back, the
// grantee, holding no valid copy, handed it back without one, and the
// owner was wiped before it took it; its empty run, the table owner,
// found nobody holding the epoch. It runs the census for its earlier run
// now, as for a forgotten owner (censusFor), and the grantee ends its
// copyless handover to the lost run (endHandovers, slotInfo.censusLost).
// 523 (an epoch taken twice: a restarted owner, whose grantee came back
// empty, answered the table owner's census NoReplica while it took its
// epoch back by a census of its own) and 1717 (one slot fired twice: a
// run back empty long before, holding its owner's fresh grant, told the
// restarted owner it could not vouch for the epoch, and promoted while
// the owner took the epoch back by census; onOffer's ours) failed only on
// first versions of TestSimulationRestarts' fixes.
func TestSimulationWipedRestarts(t *testing.T) {
	for _, seed := range []uint64{564, 703, 2007, 2877, 3247, 7350, 7377, 7748, 11797, 16820, 17868, 20577, 22204, 27217, 27335,
		28376, 28441, 31349, 33019, 35361, 35501, 38023, 39438, 596, 523, 1717} {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			simulate(t, seed, simOpts{wipeFault: 2, forget: *simForget, strict: *simStrict})
		})
	}
}

// simOpts are one simulate run's options: 1 in wipeFault restarts of the
// fault phase come back empty (0: none); forget: the operator forgets the
// crashed nodes before they restart; strict: once every node is back, a
// slot reported unavailable is excused only after a wipe (-simstrict).
type simOpts struct {
	wipeFault      int
	forget, strict bool
	steps          int // fault-phase steps (0: -simsteps)
	// firedAfterForget: once the crashed nodes are forgotten, and before
	// they come back, every slot must fire (else that is only logged: a
	// census may still be under way, Config.MaxMoves slots at a time).
	firedAfterForget bool
}

func simulate(t *testing.T, seed uint64, o simOpts) {
	steps, wipeFault, forget := *simSteps, o.wipeFault, o.forget
	if o.steps > 0 {
		steps = o.steps
	}
	rng := rand.New(rand.NewPCG(seed, 0x51075))
	c := newCluster(t, 8)
	c.vote = *voteAll
	c.rng, c.dropProb, c.maxDelay, c.sealBump = rng, 0.05, 300*time.Millisecond, true
	c.probeEvery = 3 // 300 ms, well within Settle
	c.voters = map[string]*Voters{}
	c.left, c.forgot = map[string]bool{}, map[string]bool{}
	// A quarter of the seeds each import at most 1, 2 or 3 of the 8 slots
	// at once (Config.MaxMoves); the rest leave it unbounded in effect.
	if k := int(seed % 4); k > 0 {
		c.maxMoves = k
	}
	// Odd seeds run with node's Config.DeadAfter (1.5 s, memberlist's local
	// minimum suspicion timeout), and their failure detector declares a
	// node dead only once it has not reached it for that long: pauses and
	// lapses shorter than that void nothing. Even seeds keep the cautious
	// default (Settle), and detect as soon as their view is refreshed.
	if seed%2 == 1 {
		c.deadAfter = 1500 * time.Millisecond
	}
	if *simSeed >= 0 {
		c.trace = true
	}
	var log []string
	note := func(s string) {
		log = append(log, s)
		if c.trace {
			fmt.Println("==", s)
		}
	}
	defer func() {
		if t.Failed() {
			t.Logf("seed %d, schedule:\n%v", seed, log)
		}
	}()
	crashed := false // some node lost its process (and volatile state)
	wiped := false   // some node lost its data dir
	initial := 3 + rng.IntN(2)
	for i := 1; i <= initial; i++ {
		c.add(fmt.Sprintf("n%d", i), nil)
	}
	c.stable = initial
	c.tables(true)
	const dt = 100 * time.Millisecond
	// Long enough for detection (≤ 3.9 s), Settle, the lease and a few
	// 2 s retries, through a chain of handovers.
	const settleTicks = 150
	// Nodes notice a membership change after a failure detection delay
	// (memberlist's mid profile: ~3 s), each with its own jitter below
	// Settle (the machine's assumption, see Config.Settle): for a while
	// views differ and a cut-off owner does not know it is cut off. A node
	// that (re)starts or joins sees the cluster at once.
	settle := c.config("").Settle
	viewDue := map[string]time.Time{}
	membership := func() {
		base := 500*time.Millisecond + time.Duration(rng.Int64N(int64(2500*time.Millisecond)))
		for _, n := range c.names {
			due := c.now.Add(base + time.Duration(rng.Int64N(int64(settle*9/10))))
			if d, ok := viewDue[n]; c.alive[n] && (!ok || due.Before(d)) {
				viewDue[n] = due
			}
		}
	}
	pausedTill := map[string]time.Time{}
	// advance runs one tick: resumes, due view refreshes, then messages.
	advance := func() {
		c.tick(c.now.Add(dt))
		for _, n := range c.names {
			if d, ok := pausedTill[n]; ok && !d.After(c.now) {
				delete(pausedTill, n) // resumed: it and its peers notice
				membership()
			}
			if d, ok := viewDue[n]; ok && !d.After(c.now) && c.running(n) {
				delete(viewDue, n)
				c.refresh(n)
			}
			if r, ok := c.redetect[n]; ok {
				// A death its detector could not declare yet.
				delete(c.redetect, n)
				if d, ok := viewDue[n]; !ok || r.Before(d) {
					viewDue[n] = r
				}
			}
		}
		c.deliver(20)
	}
	for step := range steps {
		advance()
		if rng.IntN(20) != 0 {
			continue
		}
		// One fault every ~2 s of fake time.
		var live, down []string
		for _, n := range c.names {
			if c.alive[n] {
				live = append(live, n)
			} else {
				down = append(down, n)
			}
		}
		switch k := rng.IntN(7); {
		case k == 0 && len(live) > 2:
			n := live[rng.IntN(len(live))]
			note(fmt.Sprintf("%d crash %s", step, n))
			crashed = true
			c.crash(n)
			membership()
		case k == 1 && len(down) > 0:
			n := down[rng.IntN(len(down))]
			if wipeFault > 0 && rng.IntN(wipeFault) == 0 {
				// Its disk was replaced: it comes back empty, and nobody
				// forgot its earlier run.
				note(fmt.Sprintf("%d wipe %s", step, n))
				wiped = true
				c.wipe(n) // restarts it
				// It asks the members, which saw its earlier run, and is
				// told so (node: GET /internal/v1/run).
				c.step(n, Disowned{})
			} else {
				note(fmt.Sprintf("%d restart %s", step, n))
				c.restart(n)
			}
			c.refresh(n)
			membership()
		case k == 2:
			clear(c.group)
			for _, n := range c.names {
				c.group[n] = rng.IntN(2)
			}
			note(fmt.Sprintf("%d partition %v", step, c.group))
			membership()
		case k == 3:
			note(fmt.Sprintf("%d heal", step))
			clear(c.group)
			membership()
		case k == 4 && len(c.names) < 5:
			n := fmt.Sprintf("n%d", len(c.names)+1)
			note(fmt.Sprintf("%d join %s", step, n))
			c.add(n, nil)
			c.stable++
			c.refresh(n)
			membership()
		case k == 6 && len(live) > 0:
			// A stop-the-world pause (GC, VM stall): peers may declare it
			// dead; it resumes with a stale view and only its lease stops
			// it from firing what others took meanwhile.
			n := live[rng.IntN(len(live))]
			d := 500*time.Millisecond + time.Duration(rng.Int64N(int64(4*time.Second)))
			note(fmt.Sprintf("%d pause %s %v", step, n, d))
			c.paused[n] = c.now.Add(d)
			pausedTill[n] = c.now.Add(d)
			membership()
		case k == 5 && len(live) > 3:
			n := live[rng.IntN(len(live))]
			if !c.draining[n] {
				note(fmt.Sprintf("%d drain %s", step, n))
				c.draining[n] = true
				membership()
			}
		}
	}
	// Heal the network and let paused nodes resume, but leave crashed
	// nodes down: every slot must fire again without them (promotion,
	// degraded mode), unless a crash took the one node that could act on
	// it. Then restart them: they resync by epoch and every slot fires.
	clear(c.group)
	c.dropProb = 0
	membership()
	for range settleTicks {
		advance()
	}
	checkLive(t, c, crashed, "crashed nodes still down")
	if forget && crashed {
		// An operator forgets the crashed nodes (chime cluster forget):
		// the census (census.go) may take their slots nobody holds a grant
		// of, under every check above. Then they come back all the same,
		// with their data (which the operator said was lost).
		for _, n := range c.names {
			if !c.alive[n] {
				note(fmt.Sprintf("forget %s", n))
				c.left[n], c.forgot[n] = true, true
			}
		}
		c.deaths()
		for _, n := range c.names {
			c.refresh(n)
		}
		for range settleTicks + *simTail {
			advance()
		}
		waiting := 0
		var why strings.Builder
		for s := range c.numSlots {
			if len(c.firing(Slot(s))) != 1 {
				waiting++
				for _, n := range c.names {
					fmt.Fprintf(&why, "%s: %s\n", n, c.m[n].Debug(Slot(s)))
				}
			}
		}
		if waiting > 0 && o.firedAfterForget {
			t.Errorf("after the forget: %d slots not fired by one node\n%s%s", waiting, c.states(), why.String())
		} else if waiting > 0 {
			t.Logf("after the forget: %d slots not fired by one node", waiting)
		}
		for _, n := range c.names {
			if c.forgot[n] && (*simWipe || seed%2 == 0) {
				note(fmt.Sprintf("wipe %s", n))
				wiped = true
				c.wipe(n)
				if *simDisown {
					c.step(n, Disowned{}) // its join tells it, as below
				}
			}
		}
	}
	for _, n := range c.names {
		if !c.alive[n] {
			c.restart(n)
			if c.forgot[n] && *simDisown {
				// It comes back with its data: its join tells it that its
				// earlier run was forgotten (gossip RunForgotten).
				c.step(n, Disowned{})
			}
		}
	}
	clear(c.left)
	clear(c.forgot)
	for _, n := range c.names {
		c.refresh(n)
	}
	for range settleTicks + *simTail {
		advance()
	}
	// Every node is back, and unless one lost its data or was forgotten
	// (its data declared lost), nothing excuses a slot left unfired.
	checkLive(t, c, wiped || forget && crashed && !o.strict, "all nodes up")
}

// checkLive asserts that, if the live nodes are a majority (of the cluster
// and of every live node's voters) and not all draining, every slot is
// fired by exactly one node. Unless excused, that is all: without
// crashes every owner and grant survives, and once every crashed node is
// back with its data nothing was lost. Excused (while a crashed node is
// down, or after one lost its data or was forgotten) a slot may instead
// be reported unavailable, never started empty: the crash may have taken
// the only node that could act on it (the owner and its grantee, or a
// restarted grantee).
func checkLive(t *testing.T, c *cluster, excused bool, when string) {
	t.Helper()
	up, eligible := 0, 0
	for _, n := range c.names {
		if c.alive[n] {
			up++
			if !c.draining[n] {
				eligible++
			}
		}
	}
	if 2*up <= c.stable || eligible == 0 {
		return // the live nodes are a minority, or all draining: nobody owns
	}
	for _, n := range c.names {
		if v := c.voters[n]; c.alive[n] && v != nil {
			voters, seen := v.Members(), 0
			for _, o := range voters {
				if c.alive[o] {
					seen++
				}
			}
			if 2*seen <= len(voters) {
				// Its voters are a minority now (members that joined
				// while a majority of them was gone are no voters; see
				// Voters): it rightly waits for one of them to return.
				return
			}
		}
	}
	for s := range c.numSlots {
		firing := c.firing(Slot(s))
		unavailable := false
		for _, n := range c.names {
			if c.alive[n] && c.m[n].slots[s].unavail {
				unavailable = true
			}
		}
		if len(firing) != 1 && (!excused || !unavailable) {
			var why strings.Builder
			for _, n := range c.names {
				fmt.Fprintf(&why, "%s: %s\n", n, c.m[n].Debug(Slot(s)))
			}
			t.Errorf("%s: slot %d fired by %v (excused: %v), want exactly one\n%s%s", when, s, firing, excused, c.states(), why.String())
		}
	}
}
