package slots

import (
	"math/bits"
	"time"
)

// This file holds the horizon: how long node may go on firing (and
// writing) the slots the machine last said it fires, should its run loop
// get stuck.
//
// Firing(s) is what the machine decided at its last Step. The right it
// stands for runs out by itself: at the earliest lease of the slot's
// suspects (until), or, in degraded mode, when the evidence of a majority
// grows older than Settle. The machine notices that only on its next Tick.
// Should node's run loop be stuck meanwhile (a long step on a loaded box)
// while the process runs on, the data path would fire on a published
// Firing bit while a follower, its lease over and its view settled, promotes
// and fires too (TestFollowerCrashWithFlaps seeds 473, 659, 676: "slot N
// fired by [nX nY] at once"). So the machine also publishes when each firing slot's right
// ends, in two parts, and node fires s only while Firing(s), now is before
// Horizon() and, if Near(s) is set, before Near(s):
//   - Horizon bounds every firing slot whose right ends at least Lease/4
//     after the last pass (refreshHorizon): with leases renewed every
//     Lease/4 that is nearly all of them, so it stays that far ahead and
//     is recomputed on a Tick once it comes within Lease/2;
//   - Near(s) bounds each firing slot whose right ends sooner (its
//     follower died, or acks come late): its own deadline, so that one
//     lapsing lease does not hold every slot up until the next Tick.
// Whenever a Step may bring a firing slot's right closer (it starts
// firing, gets a suspect, goes degraded, an ack replaces a lease), that
// slot's bound is lowered at once (bound); Ticks raise them (refreshHorizon).
// Node publishes what was lowered before the Firing bits of a Step and
// what was raised after them. checkInvariants checks after every simulated
// Step that no firing slot's right ends before its bound.

// fireUntil returns when the right to fire slot s ends unless a lease or
// the evidence is renewed, and false if nothing bounds it (no node can
// hold a grant of its epoch).
func (m *Machine) fireUntil(s Slot) (time.Time, bool) {
	si := &m.slots[s]
	var d time.Time
	ok := false
	if m.cfg.Vote {
		d, ok = m.voteUntil(s)
	} else {
		for i := range si.suspects {
			if u := m.until(&si.suspects[i]); !ok || u.Before(d) {
				d, ok = u, true
			}
		}
	}
	if len(si.dropped) > 0 {
		// Degraded: it fires while the evidence holds (updateEvidence).
		if u := m.evLast.Add(m.cfg.Settle); !ok || u.Before(d) {
			d, ok = u, true
		}
	}
	return d, ok
}

// Horizon returns the time before which node may fire every slot Firing
// reports, unless Near gives that slot an earlier one. Zero before the
// first Tick: nothing may fire yet.
func (m *Machine) Horizon() time.Time { return m.horizon }

// Near returns the time before which node may fire slot s if it is
// earlier than Horizon; zero means Horizon alone bounds s.
func (m *Machine) Near(s Slot) time.Time { return m.near[s] }

// TakeNearChanges appends to dst the slots whose Near changed since the
// last call, and forgets them.
func (m *Machine) TakeNearChanges(dst []Slot) []Slot {
	for _, s := range m.nearChanged {
		m.nearDirty[s/64] &^= 1 << (s % 64)
		dst = append(dst, s)
	}
	m.nearChanged = m.nearChanged[:0]
	return dst
}

// setNear sets slot s's near deadline to t (zero: none).
func (m *Machine) setNear(s Slot, t time.Time) {
	w, b := s/64, uint64(1)<<(s%64)
	if t.IsZero() {
		m.nearBits[w] &^= b
	} else {
		m.nearBits[w] |= b
		if m.nearMin.IsZero() || t.Before(m.nearMin) {
			m.nearMin = t
		}
	}
	if m.near[s].Equal(t) {
		return
	}
	m.near[s] = t
	if m.nearDirty[w]&b == 0 {
		m.nearDirty[w] |= b
		m.nearChanged = append(m.nearChanged, s)
	}
}

// bound keeps the bound of firing slot s at or before the end of its
// right to fire; starting: it starts firing now, and may drop a near
// deadline left from before.
func (m *Machine) bound(s Slot, starting bool) {
	d, ok := m.fireUntil(s)
	n := m.near[s]
	switch {
	case !ok || !d.Before(m.horizon):
		if starting && !n.IsZero() {
			m.setNear(s, time.Time{})
		}
	case !d.Before(m.now.Add(m.cfg.Lease / 4)):
		m.horizon = d
		if starting && !n.IsZero() {
			m.setNear(s, time.Time{})
		}
	case starting || n.IsZero() || d.Before(n):
		m.setNear(s, d)
	}
}

// setFiring records in fireBits whether slot s fires.
func (m *Machine) setFiring(s Slot, on bool) {
	if on {
		m.fireBits[s/64] |= 1 << (s % 64)
	} else {
		m.fireBits[s/64] &^= 1 << (s % 64)
	}
}

// horizonDue reports whether a Tick recomputes the bounds: the horizon
// came within Lease/2, a near deadline is within Lease/8 (a renewed lease
// lifts it before it holds the slot up), or a bound may have moved
// (hzForce).
func (m *Machine) horizonDue() bool {
	return m.hzForce || !m.now.Before(m.horizon.Add(-m.cfg.Lease/2)) ||
		!m.nearMin.IsZero() && !m.now.Before(m.nearMin.Add(-m.cfg.Lease/8))
}

// refreshHorizon recomputes the horizon and the near deadlines. A Tick
// calls it after tickSlots, when every idle owner is quiet (see tickIdle,
// checkInvariants): it fires under the pair lease of its follower, a live
// peer that acked within Lease/2, so the earliest such lease bounds all of
// them at once, at least Lease/2 ahead. Only the busy firing slots and
// those with a near deadline are looked at one by one: O(peers + busy),
// not O(firing slots), on an idle node (an idle 3-node cluster spent 10 %
// of its CPU in a pass over every firing slot).
func (m *Machine) refreshHorizon() {
	m.hzForce = false
	h := m.now.Add(m.cfg.Lease)
	for name, p := range m.peers {
		if p.gen != 0 && !m.dead[name] && m.now.Before(p.acked.Add(m.cfg.Lease/2)) {
			if u := p.acked.Add(m.cfg.Lease); u.Before(h) {
				h = u
			}
		}
	}
	floor := m.now.Add(m.cfg.Lease / 4)
	m.nearMin = time.Time{}
	for w := range m.fireBits {
		word := m.fireBits[w]&m.busy[w] | m.nearBits[w]
		for word != 0 {
			b := word & -word
			word &^= b
			s := Slot(w*64 + bits.TrailingZeros64(b))
			var near time.Time
			if m.slots[s].firing {
				if d, ok := m.fireUntil(s); ok {
					if d.Before(floor) {
						near = d
					} else if d.Before(h) {
						h = d
					}
				}
			}
			m.setNear(s, near)
		}
	}
	m.horizon = h
}
