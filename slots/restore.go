package slots

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// This file restores a grant a lapse voided after its owner died.
// Reference: DESIGN §4 "A grant voided after its owner died".
//
// A follower holding a dead owner's grant waits out the lease (and the
// vote) before it promotes or hands the slot to the table owner. A lapse
// of DeadAfter or more meanwhile (a process stall, its view or evidence of
// a majority lost that long: lostMajority) voids every grant it holds: the
// others may have declared it dead, and a live owner whose death was a
// flap of this node's view may have dropped it, fired degraded (writes it
// lacks) and granted another follower. With nobody else holding a grant
// the slot then stayed unavailable until the owner came back (slots
// TestPauseBeforeTakeover; once in a 3-process CI run).
//
// The lapse began at P: the last Tick that ran and showed a majority and
// its evidence (Machine.sure), or when we last heard from a majority
// (Machine.evLast) if earlier. Until then this node answered probes,
// so O cannot have declared it dead, and dropped its grant, before
// P+DeadAfter (the premise of voiding only on a lapse of DeadAfter, see
// Tick and checkViewLapse). What the lapse allows is that drop and then
// firing degraded, acknowledging writes we lack, which needs promises
// (vote.go) from a majority: PairAcks to O's PairHeartbeats. A promise
// counts until its heartbeat's Sent+Lease (O's clock), so one good at
// P+DeadAfter or later came from a heartbeat sent after
// X = P+DeadAfter-Lease-Margin (Margin covers the clocks' rates). So if
// no node but O heard anything from O since X, O never fired degraded
// beside our grant, nor granted anyone, after the lapse could have let it:
// the lapse changed nothing and the grant stands as it did at P (what O
// could do before then, it could do beside a grant never voided too).
// Nor did it if a majority (we among them) heard nothing from O since X:
// O's promisers, a majority too, would include one of them. O counts
// promises among its voters and among its voters when we acked the grant
// (suspect.voters, promisedUntil); we count the quiet among our voters when
// we accepted it (slotInfo.grantVoters, the same set but for a change of
// voters between the two moments, as the vote's consents assume), or
// among our voters if we have none recorded. Not among our voters now: a
// node that joined after O died, a voter to us but never to O, cannot say
// it heard nothing from O before it started.
//
// The answers ride on the vote's consents (ConsentGiven.Quiet): how long
// the giver had heard nothing from O when it answered, capped by its
// uptime (a restart forgets what it heard). No clocks are compared: the
// answer arrived at r on our clock, it was made no later than that, so the
// giver's last word from O came before r-Quiet. An answer counts if it
// arrived after the void (it covers the lapse) and r-Quiet is before X.
// Only with Config.Vote: acting on the restored grant needs the consents
// anyway.

// grantVoid records a grant lostMajority voided: when the lapse began
// (from: Machine.sure then), when it was voided, and which grant.
type grantVoid struct {
	from, at time.Time
	epoch    Epoch
	leader   string
	inc      uint64
	term     uint64
}

// quietAnswer is one ConsentGiven's Quiet: received at, and the latest
// moment its giver can have last heard from the owner (at-Quiet).
type quietAnswer struct {
	at, last time.Time
}

// dropForgotten applies the forget of node name to what we hold on its
// account: the voided grants it gave us, and the releases of our grant it
// gave us or that name it. Its firing is over, and the census takes its
// slots (census.go) with the longest copy a live member holds, ours among
// them; but a member holding a voided grant or a release never answers a
// census (it may yet restore the grant and promote, or hand the epoch to
// the release's importer), and neither need happen now: the restore's
// consents need not come (sim seed 431 with -simstrict), a forgotten
// importer never offers (527), and a live one offers only when its table
// owner holds the release and asks it (2155: a draining node held it).
// The slot stayed with nobody for good. An importer the forgotten owner
// handed the epoch to holds that handover, and answers no census either.
// A grant held intact still takes the usual way.
func (m *Machine) dropForgotten(name string) {
	for s := range m.slots {
		si := &m.slots[s]
		release := si.releasedTo != "" && (si.releasedTo == name || si.leader == name)
		if si.void != nil && si.void.leader == name || release && si.role != RoleOwner && si.role != RoleSealing {
			if si.void != nil && si.void.leader == name {
				si.void = nil
			}
			if release {
				si.releasedTo = ""
			}
			m.noteGrant(Slot(s))
			m.advance(Slot(s))
		}
	}
}

// voidGrant records, before a lapse voids it, the grant s holds from a
// leader it saw die, so that restoreGrant may restore it.
func (m *Machine) voidGrant(s Slot) {
	si := &m.slots[s]
	if !si.grantor || !m.cfg.Vote || !si.synced || si.grantInc == 0 || si.grantTerm == 0 {
		return
	}
	from := m.sure
	if !m.evLast.IsZero() && m.evLast.Before(from) {
		from = m.evLast // a partition: the others may not have reached us since
	}
	si.void = &grantVoid{from: from, at: m.now, epoch: si.epoch, leader: si.leader, inc: si.grantInc, term: si.grantTerm}
}

// quietSince is X of the file comment for v: the owner's last word must
// precede it, for us and for the majority that answers.
func (m *Machine) quietSince(v *grantVoid) time.Time {
	return v.from.Add(m.cfg.deadAfter() - m.cfg.Lease - m.cfg.Margin)
}

// quietFor is ConsentGiven.Quiet for owner: how long we have heard
// nothing from it, at most our uptime.
func (m *Machine) quietFor(owner string) time.Duration {
	if m.started.IsZero() {
		return 0
	}
	q := m.now.Sub(m.started)
	if h, ok := m.heard[owner]; ok && m.now.Sub(h) < q {
		q = m.now.Sub(h)
	}
	return max(q, 0)
}

// restoreGrant restores the grant of s that a lapse voided once a
// majority says it heard nothing from the dead owner since X (see the file
// comment), asking (with the vote's consent request) until then. It
// reports whether it did.
func (m *Machine) restoreGrant(s Slot) bool {
	si := &m.slots[s]
	v := si.void
	if v == nil {
		return false
	}
	if si.grantor || si.releasedTo != "" || !si.synced || si.epoch != v.epoch || si.leader != v.leader ||
		si.grantInc != v.inc || si.grantTerm != v.term || si.role == RoleOwner || si.role == RoleSealing {
		si.void = nil // another grant, another epoch, or no copy: nothing to restore
		return false
	}
	x := m.quietSince(v)
	if h, ok := m.heard[v.leader]; v.from.IsZero() || ok && !h.Before(x) {
		// We heard from it since: it may have acted on the lapse, and
		// nothing we hear later changes that. The grant is void for good:
		// kept, it held us out of every census (censusAnswer) while its
		// owner lived on, and that owner's own census (ownerCensusFor),
		// its grantee forgotten, never completed (sim seed 427 after the
		// forget: its grant had moved on to that grantee since).
		si.void = nil
		return false
	}
	if m.alive(v.leader) || !m.takeQuorate() || !m.backed() {
		return false
	}
	k := pairKey{v.leader, v.inc}
	n, g := 0, 0 // quiet answers among our voters, among the grant's
	for name, a := range m.quietFrom[k] {
		if name == m.cfg.Self || name == v.leader || a.at.Before(v.at) || !a.last.Before(x) {
			continue
		}
		if m.countsVote(name) {
			n++
		}
		if _, ok := slices.BinarySearch(si.grantVoters, name); ok {
			g++
		}
	}
	if len(si.grantVoters) > 0 && g < othersNeeded(si.grantVoters, m.cfg.Self) || len(si.grantVoters) == 0 && n < m.stable/2 {
		m.askConsents(k, v.term)
		return false
	}
	si.grantor, si.void = true, nil
	m.noteGrant(s)
	return true
}

// voidString describes slot s's voided grant and the quiet answers it
// has, for Debug.
func (m *Machine) voidString(s Slot) string {
	v := m.slots[s].void
	if v == nil {
		return "-"
	}
	x := m.quietSince(v)
	var b strings.Builder
	fmt.Fprintf(&b, "%s@%d#%d,t%d from=%s at=%s x=%s quiet=[", v.leader, v.epoch, v.inc, v.term,
		v.from.Format("15:04:05.000"), v.at.Format("15:04:05.000"), x.Format("15:04:05.000"))
	answers := m.quietFrom[pairKey{v.leader, v.inc}]
	names := make([]string, 0, len(answers))
	for n := range answers {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(&b, " %s:%s/%s", n, answers[n].at.Format("15:04:05.000"), answers[n].last.Format("15:04:05.000"))
	}
	b.WriteString("]")
	return b.String()
}
