package gossip

import (
	"slices"
	"time"

	"github.com/hashicorp/memberlist"
)

// reconnectLoop retries one dead member every ReconnectInterval, round
// robin over the dead members in name order, until Close or Leave closes
// stop. memberlist itself never contacts a member again once it is
// declared dead (after GossipToTheDeadTime), so without this loop the two
// sides of a healed partition would stay apart for good; Serf runs the
// same loop. A member that left is not retried: it meant to go.
func (m *Membership) reconnectLoop(ml *memberlist.Memberlist) {
	defer m.wg.Done()
	tick := time.NewTicker(m.cfg.ReconnectInterval)
	defer tick.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-tick.C:
		}
		name, addr, ok := m.nextReconnect(time.Now())
		if !ok {
			continue
		}
		m.reconnects.Add(1)
		if _, err := ml.Join([]string{addr}); err != nil {
			m.log.Debug("gossip: reconnect failed", logMember, name, "addr", addr, "err", err)
			continue
		}
		m.log.Info("gossip: reconnected to dead member", logMember, name, "addr", addr)
	}
}

// nextReconnect picks the dead member after the previous pick in name
// order (wrapping around) among those dead for less than ReconnectTimeout.
func (m *Membership) nextReconnect(now time.Time) (name, addr string, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var dead []string
	for n, e := range m.mu.view {
		if e.m.Status == StatusDead && now.Sub(e.since) < m.cfg.ReconnectTimeout {
			dead = append(dead, n)
		}
	}
	if len(dead) == 0 {
		return "", "", false
	}
	slices.Sort(dead)
	i, _ := slices.BinarySearch(dead, m.mu.reconnectCursor+"\x00")
	if i == len(dead) {
		i = 0
	}
	name = dead[i]
	m.mu.reconnectCursor = name
	return name, m.mu.view[name].m.Addr, true
}
