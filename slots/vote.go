package slots

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// This file holds the exclusive vote (Config.Vote): how an owner fires on
// after its follower's lease ran out, and why no node can take its epoch
// over meanwhile. Reference: DESIGN §4 "Exclusive vote".
//
// Without it an owner whose follower stops acking (it died, or a
// partition cut the two apart) stops firing once that follower's lease
// runs out and waits until the follower is declared dead, its view
// settled: ~2.5 s of every such slot unfired after a crash. And degraded
// mode, firing beside a dropped grantee, rests on each side's own
// evidence of a majority, which both sides can have when a third node
// moves across a partition within DeadAfter (sim seeds 13735, 14309,
// 39947: two nodes fired one slot).
//
// Promises. A node's PairAck to a PairHeartbeat of owner O's incarnation I
// promises not to consent to a takeover of I's grants until Lease+Margin
// after that heartbeat arrived (its own clock); O counts the promise until
// the heartbeat's Sent+Lease (its clock): the inequality of the lease.
//
// Terms. Every grant carries the owner's vote term (Heartbeat.Term,
// SendSnapshot.Term; 1 at start), and its holder acks the term it holds
// (Ack.Term, suspect.term).
//
// Consents. A node T that acts on a grant or a release of term t of (O, I)
// whose owner it saw die (promotes, or hands the slot to an importer)
// first collects consents to its taking over (O, I)'s grants up to t from
// a majority, itself included. A node consents once no PairHeartbeat of
// (O, I) arrived for Lease+Margin and it has run for Lease+Margin (a
// restarted node may have promised before it stopped); it persists the
// consent before it answers (PersistConsents), and from then on its
// promises to (O, I) cover T's grants only from term t+1 (PairAck.Floors):
// the consent never lapses while I may live, and it concerns T alone. A
// new incarnation of O beating proves I gone: the consents to I are
// forgotten then. An owner that learns of a floor above its term moves its
// term up to it and heartbeats every slot with Grant again: its live
// grantees ack the new term, and promises cover them again.
//
// Firing. An owner fires while every suspect x is covered by its lease, or
// by promises from a majority (itself included) that cover x's grant:
// x acked a grant of ours (our incarnation, a term t) and each promiser's
// floor for x is at most t. A promiser consents only after its promise ran
// out, and a consenter's later promises do not cover what it consented
// to: a majority of promises and a majority of consents for one grant
// cannot both stand, so no grantee acts on a grant while its owner fires
// beside it. Degraded mode (dropped suspects) additionally needs such
// promises for every dropped suspect that acked a grant of ours. Grants
// whose incarnation or term the holder does not know (0: a handover's grant
// at the importer's epoch before the importer heartbeated) need no
// consents and are never fired beside on promises. A leader known to have
// moved past the epoch without taking it (leaderPast) fires nothing at it:
// acting on its grant needs no consent either. (A reported restart does
// not spare them: the notice may come after the new incarnation's grant,
// sim seed 37507; the old incarnation's consents come at once anyway.)
//
// Counting. Promises and consents count among TableChanged.Voters (node:
// the Voters that also give Sees and StableSize) and need StableSize/2
// other nodes, like the evidence of a majority; and they need a majority
// of the voters of the grant's time too (suspect.voters: the owner's when
// the suspect acked it; slotInfo.grantVoters: the taker's when it accepted
// it), or a voter set that grew would let newcomers' promises outvote the
// consents given among the old voters (sim seed 592). Pair heartbeats and
// consent requests go to the voters outside the table too (a draining
// node).

// Consent is a consent this node gave (Config.Consents,
// PersistConsents): to Taker's takeover of the grants of Owner's
// incarnation Inc up to vote term Term.
type Consent struct {
	Owner, Taker string
	Inc, Term    uint64
}

// slotWait is a slot waiting for consents to take over the grants of
// one owner incarnation (Machine.firstAsked). The wait is the slot's:
// whether the consents suffice depends on the slot's grant voters, so one
// slot of an incarnation may act while another still waits (sim seed
// 21970: keyed by the incarnation alone, each slot that acted restarted
// the clock of one that never could, which so never said it was
// unavailable). Entries of slots that stop waiting otherwise stay, at
// most one per slot and dead incarnation.
type slotWait struct {
	k pairKey
	s Slot
}

// consentKey names the grants of one owner incarnation to one taker.
type consentKey struct {
	owner string
	inc   uint64
	taker string
}

// loadConsents restores the persisted consents.
func (m *Machine) loadConsents(cs []Consent) {
	for _, c := range cs {
		if k := (consentKey{c.Owner, c.Inc, c.Taker}); c.Owner != "" && c.Taker != "" && c.Inc != 0 && c.Term > m.consents[k] {
			m.consents[k] = c.Term
		}
	}
}

// floors returns PairAck.Floors for (owner, inc): the takers we consented
// to, with the least term our promises still cover for each.
func (m *Machine) floors(owner string, inc uint64) []Floor {
	var fs []Floor
	for k, t := range m.consents {
		if k.owner == owner && k.inc == inc {
			fs = append(fs, Floor{Taker: k.taker, Term: t + 1})
		}
	}
	slices.SortFunc(fs, func(a, b Floor) int { return strings.Compare(a.Taker, b.Taker) })
	return fs
}

// countsVote reports whether name's promise or consent counts.
func (m *Machine) countsVote(name string) bool {
	return name != m.cfg.Self && (m.voterSet == nil || m.voterSet[name])
}

// promKey is a promisedUntil query.
type promKey struct {
	taker  string
	term   uint64
	voters *string // the suspect's voters (their first element), nil for none
}

// promisedUntil returns when the promises covering suspect x's grant
// (taker x.name, term x.term) run out that we hold from a majority, self
// included, of our voters and of x.voters (our voters when it acked that
// grant: a voter set that grew since must not let the newcomers' promises
// outvote the consents given among the old ones); zero if we hold too
// few. Cached until a promise, the voters or the stable size change.
func (m *Machine) promisedUntil(x *suspect) time.Time {
	if m.promDirty {
		clear(m.promCache)
		m.promDirty = false
	}
	q := promKey{taker: x.name, term: x.term}
	if len(x.voters) > 0 {
		q.voters = &x.voters[0]
	}
	if u, ok := m.promCache[q]; ok {
		return u
	}
	u := m.majorityUntil(x.name, x.term, m.countsVote, m.stable/2)
	if len(x.voters) > 0 {
		in := func(name string) bool { _, ok := slices.BinarySearch(x.voters, name); return ok && name != m.cfg.Self }
		if w := m.majorityUntil(x.name, x.term, in, othersNeeded(x.voters, m.cfg.Self)); w.Before(u) {
			u = w
		}
	}
	m.promCache[q] = u
	return u
}

// othersNeeded is how many of voters but self make a majority with self.
func othersNeeded(voters []string, self string) int {
	if _, ok := slices.BinarySearch(voters, self); ok {
		return len(voters) / 2
	}
	return len(voters)/2 + 1
}

// majorityUntil returns when the promises covering taker's grant of term
// t from need of the peers that count run out (the need-th newest);
// far in the future if none is needed, zero if too few hold one.
func (m *Machine) majorityUntil(taker string, t uint64, counts func(string) bool, need int) time.Time {
	if need <= 0 {
		return time.Time{}.Add(1<<63 - 1) // alone: nobody to take over
	}
	var ts []time.Time
	for name, p := range m.peers {
		if !p.promised.IsZero() && max(p.floors[taker], 1) <= t && counts(name) && !m.distrust[name] {
			ts = append(ts, p.promised)
		}
	}
	if len(ts) < need {
		return time.Time{}
	}
	slices.SortFunc(ts, func(a, b time.Time) int { return b.Compare(a) })
	return ts[need-1].Add(m.cfg.Lease)
}

// promised reports whether we hold promises covering suspect x's grant
// from a majority now.
func (m *Machine) promised(x *suspect) bool {
	return m.cfg.Vote && x.term != 0 && m.now.Before(m.promisedUntil(x))
}

// leased reports whether no node can have taken owner s's epoch over:
// every suspect is covered by its lease or (Config.Vote) by promises from
// a majority.
func (m *Machine) leased(s Slot) bool {
	for i := range m.slots[s].suspects {
		if x := &m.slots[s].suspects[i]; !m.now.Before(m.until(x)) && !m.promised(x) {
			return false
		}
	}
	return true
}

// droppedBacked reports whether degraded owner s may fire as far as the
// vote goes: its dropped suspects that acked grants of ours need our
// promises too (our evidence of a majority is not enough, see the file
// comment).
func (m *Machine) droppedBacked(s Slot) bool {
	if !m.cfg.Vote {
		return true
	}
	for i := range m.slots[s].dropped {
		if x := &m.slots[s].dropped[i]; x.term != 0 && !m.promised(x) {
			return false
		}
	}
	return true
}

// voteUntil is fireUntil's bound from the suspects with Config.Vote: a
// suspect that acked a grant of ours is covered until the later of its
// lease and the promises covering it; a dropped one until those promises
// run out.
func (m *Machine) voteUntil(s Slot) (time.Time, bool) {
	si := &m.slots[s]
	var d time.Time
	ok := false
	lower := func(u time.Time) {
		if !ok || u.Before(d) {
			d, ok = u, true
		}
	}
	for i := range si.suspects {
		x := &si.suspects[i]
		u := m.until(x)
		if x.term != 0 {
			if p := m.promisedUntil(x); p.After(u) {
				u = p
			}
		}
		lower(u)
	}
	for i := range si.dropped {
		if x := &si.dropped[i]; x.term != 0 {
			lower(m.promisedUntil(x))
		}
	}
	return d, ok
}

// canConsent reports whether we may consent to a takeover of k now: no
// PairHeartbeat of it arrived within Lease+Margin (our promises to it ran
// out) and we have run that long.
func (m *Machine) canConsent(k pairKey) bool {
	if k.node == m.cfg.Self && k.inc == m.inc {
		return false // our own grants: we live
	}
	if m.started.IsZero() || m.now.Before(m.started.Add(m.cfg.Lease+m.cfg.Margin)) {
		return false
	}
	if r, ok := m.pairRecv[k]; ok && m.now.Before(r.Add(m.cfg.Lease+m.cfg.Margin)) {
		return false
	}
	return true
}

// consented reports whether we may act now on the grant or release we hold
// for s from its dead leader (Config.Vote): a majority consented to
// taking over that incarnation's grants of its term, we among them. If so
// our own consent is persisted first; if not, the others are asked (every
// Lease/4).
func (m *Machine) consented(s Slot) bool {
	si := &m.slots[s]
	if !m.cfg.Vote || si.leaderGone && si.leaderPast || si.grantInc == 0 || si.grantTerm == 0 {
		return true
	}
	k, t := pairKey{si.leader, si.grantInc}, si.grantTerm
	own := consentKey{k.node, k.inc, m.cfg.Self}
	if m.consents[own] < t && !m.canConsent(k) {
		return false // our own promise has not run out yet
	}
	// A majority of our voters, and of our voters when we accepted the
	// grant (see promisedUntil).
	n, g := 0, 0
	for name, vt := range m.votes[k] {
		if vt < t || name == m.cfg.Self {
			continue
		}
		if m.countsVote(name) {
			n++
		}
		if _, ok := slices.BinarySearch(si.grantVoters, name); ok {
			g++
		}
	}
	if n >= m.stable/2 && (len(si.grantVoters) == 0 || g >= othersNeeded(si.grantVoters, m.cfg.Self)) {
		m.giveConsent(own, t)
		delete(m.firstAsked, slotWait{k, s})
		return true
	}
	if _, ok := m.firstAsked[slotWait{k, s}]; !ok {
		m.firstAsked[slotWait{k, s}] = m.now
	}
	m.askConsents(k, t)
	return false
}

// askConsents asks every live member taking part in the vote to consent
// to our takeover of k's grants up to term t, at most every Lease/4.
func (m *Machine) askConsents(k pairKey, t uint64) {
	if at, ok := m.askedConsent[k]; !ok || !m.now.Before(at.Add(m.cfg.Lease/4)) {
		m.askedConsent[k] = m.now
		for _, to := range m.voteNames() {
			if m.alive(to) { // the owner too: a new incarnation of it consents for the old
				m.emit(AskConsent{To: to, Owner: k.node, Inc: k.inc, Term: t})
			}
		}
	}
}

// voteWait reports whether we hold a grant or release for s from a leader
// we saw die or restart whose takeover needs consents (Config.Vote) we
// have not collected yet: the slot is not idle meanwhile (advanceSlot asks
// for them every Lease/4, so that they are in when the importer offers,
// which it does once per round of every member: sim seed 2113 waited two
// rounds, 14 s, for a restarted owner's slot).
func (m *Machine) voteWait(s Slot) bool {
	si := &m.slots[s]
	return m.cfg.Vote && (si.grantor || si.releasedTo != "") && !(si.leaderGone && si.leaderPast) && si.grantInc != 0 && si.grantTerm != 0 &&
		(!m.alive(si.leader) || si.leaderGone) && m.consents[consentKey{si.leader, si.grantInc, m.cfg.Self}] < si.grantTerm
}

// giveConsent records (and persists) our consent to k's takeover of its
// grants up to term t.
func (m *Machine) giveConsent(k consentKey, t uint64) {
	if m.consents[k] >= t {
		return
	}
	m.consents[k] = t
	m.persistConsents()
}

// persistConsents emits the consents given, sorted.
func (m *Machine) persistConsents() {
	cs := make([]Consent, 0, len(m.consents))
	for k, t := range m.consents {
		cs = append(cs, Consent{Owner: k.owner, Taker: k.taker, Inc: k.inc, Term: t})
	}
	slices.SortFunc(cs, func(a, b Consent) int {
		return cmp.Or(strings.Compare(a.Owner, b.Owner), cmp.Compare(a.Inc, b.Inc), strings.Compare(a.Taker, b.Taker))
	})
	m.emit(PersistConsents{Consents: cs})
}

// onConsentAsked answers a node that would take grants of (Owner, Inc)
// of up to Term over: we consent, durably, if our promises to it ran out.
func (m *Machine) onConsentAsked(ev ConsentAsked) {
	if !m.cfg.Vote || ev.From == m.cfg.Self || ev.Inc == 0 || ev.Term == 0 {
		return
	}
	k := consentKey{ev.Owner, ev.Inc, ev.From}
	if m.consents[k] < ev.Term {
		if !m.canConsent(pairKey{ev.Owner, ev.Inc}) {
			return
		}
		m.giveConsent(k, ev.Term)
	}
	m.emit(GiveConsent{To: ev.From, Owner: ev.Owner, Inc: ev.Inc, Term: ev.Term, Quiet: m.quietFor(ev.Owner)})
}

// onConsentGiven records a consent to our takeover of (Owner, Inc) up to
// Term; the slots waiting for it act on their next advance.
func (m *Machine) onConsentGiven(ev ConsentGiven) {
	if !m.cfg.Vote || ev.From == m.cfg.Self {
		return
	}
	k := pairKey{ev.Owner, ev.Inc}
	if _, asked := m.askedConsent[k]; !asked {
		return // not ours to count: nothing grows on unasked answers
	}
	if m.votes[k] == nil {
		m.votes[k] = map[string]uint64{}
	}
	if ev.Term > m.votes[k][ev.From] {
		m.votes[k][ev.From] = ev.Term
	}
	if m.quietFrom[k] == nil {
		m.quietFrom[k] = map[string]quietAnswer{}
	}
	m.quietFrom[k][ev.From] = quietAnswer{at: m.now, last: m.now.Add(-max(ev.Quiet, 0))}
}

// onFloor moves our vote term up to a promiser's floor: it consented to
// takeovers of our grants below it, so they must be granted again at a
// term its promises cover. Every owned slot heartbeats again (quiet needs
// its suspect's ack of the current term).
func (m *Machine) onFloor(f uint64) {
	if f <= m.term {
		return
	}
	m.term = f
	m.lastGlobal = globalKey{dead: -1} // the next Tick advances every slot
}

// forgetConsents drops the consents we gave to takeovers of owner's
// incarnations other than inc, which beats: they are gone for good.
func (m *Machine) forgetConsents(owner string, inc uint64) {
	changed := false
	for k := range m.consents {
		if k.owner == owner && k.inc != inc {
			delete(m.consents, k)
			changed = true
		}
	}
	// The consents we collected to take an older incarnation over stay:
	// that is exactly when we act on them (sim seed 4978 dropped them at
	// every beat of the restarted owner and never acted).
	if changed {
		m.persistConsents()
	}
}

// voteNames returns the members that take part in the vote: the table's
// and the voters (a draining node is a voter outside the table).
func (m *Machine) voteNames() []string {
	if !m.cfg.Vote || len(m.voterList) == 0 {
		return m.names
	}
	out := slices.Clone(m.names)
	for _, v := range m.voterList {
		if !m.members[v] {
			out = append(out, v)
		}
	}
	return out
}
