package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/chime-scheduler/chime/node/dispatch"
	"github.com/chime-scheduler/chime/ring"
	"github.com/chime-scheduler/chime/ring/gossip"
	"github.com/chime-scheduler/chime/slots"
)

// memberFetchTimeout bounds the fetch of one member's row for a cluster
// snapshot. The fetches run in parallel, so a snapshot waits at most this
// long for members that are alive in gossip but do not answer; 500 ms is
// far above a loopback or LAN round trip plus a stats gather (about a
// millisecond) and keeps a once-a-second dashboard at its pace.
const memberFetchTimeout = 500 * time.Millisecond

// hostsShared is how many callback hosts a member sends with its row: more
// than the 10 the dashboard shows, so that a host busy on every member but
// first on none still makes the cluster's top 10.
const hostsShared = 20

// memberAnswer is GET /internal/v1/member: the node's MemberSnapshot (its
// fields at the top level, so it decodes as one), plus its wheel heatmap
// and callback latency histograms, which the serving node adds up.
type memberAnswer struct {
	MemberSnapshot
	Wheel *WheelHeatmap       `json:"wheel,omitempty"`
	Hosts []dispatch.HostHist `json:"host_histograms,omitempty"`
	// UnderReplicated are the slots this member owns whose follower has
	// not acknowledged all writes; Importing the slots the view gives it
	// that it does not serve yet (their writes answer 503).
	UnderReplicated []uint16 `json:"under_replicated,omitempty"`
	Importing       []uint16 `json:"importing,omitempty"`
	// Stalled are the slots it owns that have not fired for
	// --overdue-after (the safety net).
	Stalled []uint16 `json:"stalled,omitempty"`
}

// slotHealth returns this node's under-replicated and importing slots.
func (n *Node) slotHealth() (under, importing []uint16) {
	if n.ctl != nil {
		under, importing = n.ctl.Flagged()
	}
	return under, importing
}

// peerAnswer is a member's last good answer and when it arrived.
type peerAnswer struct {
	ans memberAnswer
	at  time.Time
}

// handleInternalMember serves this node's own dashboard row, for the node
// that serves the dashboard. Only other nodes may call it.
func (n *Node) handleInternalMember(w http.ResponseWriter, r *http.Request) {
	if _, _, e := n.guard.Read(r, "member", 0); e != nil {
		writeError(w, e)
		return
	}
	row, heat, err := n.localRow(r.Context())
	if err != nil {
		writeError(w, asError(err))
		return
	}
	under, importing := n.slotHealth()
	writeJSON(w, http.StatusOK, memberAnswer{MemberSnapshot: row, Wheel: &heat, Hosts: n.hosts.Hists(hostsShared),
		UnderReplicated: under, Importing: importing, Stalled: n.stalledSlots().Slots})
}

// selfFromView sets row's lifecycle state, liveness and gossip address from
// this node's own entry in v: joining and alive until it is in the view.
func (n *Node) selfFromView(row *MemberSnapshot, v *view) {
	row.State, row.Status, row.SlotsOwned = gossip.StateJoining.String(), gossip.StatusAlive.String(), v.owned.count()
	for _, m := range v.members {
		if m.Name == n.cfg.Name {
			row.State, row.Status, row.GossipAddr = m.Meta.State.String(), m.Status.String(), m.Addr
		}
	}
	row.SlotsFollowing = v.table.Counts()[n.cfg.Name].Following
}

// clusterSnapshot fills snap's members, slot table, wheel and hosts from
// view v: one row per member of v (dead and left too), in v's order (by
// name), self being this node's own row. Every other live member is asked
// for its row in parallel, each within memberFetchTimeout; a member that
// does not answer, or is dead or left, keeps its last good row (or an
// empty one), marked Stale. The wheel heatmap and callback latencies add
// up those of the live members.
func (n *Node) clusterSnapshot(ctx context.Context, v *view, self MemberSnapshot, snap *Snapshot) {
	members := v.members
	fresh := make([]*memberAnswer, len(members))
	errs := make([]error, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		if m.Name == n.cfg.Name || !m.Up() {
			continue
		}
		wg.Go(func() { fresh[i], errs[i] = n.fetchMember(ctx, m) })
	}
	wg.Wait()
	now := n.now()

	s := &n.sampler
	s.mu.Lock()
	ct := &s.mu.clusterTable
	if ct.v != v {
		ct.v, ct.owners = v, slotOwners(v)
	}
	owners := ct.owners
	known := make(map[string]peerAnswer, len(members))
	for i, m := range members {
		if fresh[i] != nil {
			known[m.Name] = peerAnswer{*fresh[i], now}
		} else if p, ok := s.mu.peers[m.Name]; ok {
			known[m.Name] = p
		}
	}
	s.mu.peers = known // members gone from the view are forgotten
	s.mu.Unlock()

	// Slot health: a slot is under-replicated when its owner reports no
	// caught-up follower, unavailable while the table's owner cannot take
	// it over (no live holder of a copy) or when no member owns it, and
	// stalled when its owner has not fired it for --overdue-after.
	states := make([]SlotState, slots.Count)
	mark := func(ss []uint16, st SlotState) {
		for _, x := range ss {
			if int(x) < len(states) && states[x] < st {
				states[x] = st
			}
		}
	}
	under, importing := n.slotHealth()
	mark(under, SlotUnderReplicated)
	mark(importing, SlotUnavailable)
	mark(n.stalledSlots().Slots, SlotStalled)
	for _, m := range members {
		if p, ok := known[m.Name]; ok && m.Up() && m.Name != n.cfg.Name {
			mark(p.ans.UnderReplicated, SlotUnderReplicated)
			mark(p.ans.Importing, SlotUnavailable)
			mark(p.ans.Stalled, SlotStalled)
		}
	}
	for i, o := range owners {
		if o == NoOwner {
			states[i] = SlotUnavailable
		}
	}
	counts := v.table.Counts()
	rows := make([]MemberSnapshot, 0, len(members)+1)
	wheels := []WheelHeatmap{snap.Wheel}
	hosts := [][]dispatch.HostHist{n.hosts.Hists(hostsShared)}
	hasSelf := false
	for i, m := range members {
		var row MemberSnapshot
		switch p, ok := known[m.Name]; {
		case m.Name == n.cfg.Name:
			row, hasSelf = self, true
		case ok:
			row = p.ans.MemberSnapshot
			if fresh[i] == nil {
				row.Stale, row.StatsAgeSeconds = true, now.Sub(p.at).Seconds()
				row.State = m.Meta.State.String() // its own last word may be old
			}
			if m.Up() {
				if p.ans.Wheel != nil {
					wheels = append(wheels, *p.ans.Wheel)
				}
				hosts = append(hosts, p.ans.Hosts)
			}
		default:
			row = MemberSnapshot{Stale: true, TasksStored: -1, State: m.Meta.State.String()}
		}
		if errs[i] != nil {
			row.Error = errs[i].Error()
		}
		c := counts[m.Name]
		row.Name, row.HTTPAddr, row.GossipAddr, row.Status = m.Name, m.Meta.HTTPAddr, m.Addr, m.Status.String()
		row.SlotsOwned, row.SlotsFollowing = c.Owned, c.Following
		rows = append(rows, row)
	}
	if !hasSelf { // not in its own view yet: before Start
		rows = append(rows, self)
	}
	snap.Members = rows
	snap.SlotOwners, snap.SlotStates, snap.TableVersion = owners, states, v.table.Checksum()
	snap.Wheel = mergeWheels(wheels)
	snap.Hosts = dispatch.MergeHosts(10, hosts...)
}

// fetchMember asks member m for its row, signed, within memberFetchTimeout.
func (n *Node) fetchMember(ctx context.Context, m gossip.Member) (*memberAnswer, error) {
	if m.Meta.HTTPAddr == "" {
		return nil, errors.New("no HTTP address in its gossip meta")
	}
	ctx, cancel := context.WithTimeout(ctx, memberFetchTimeout)
	defer cancel()
	c, err := n.fwd.do(ctx, ring.Member{Name: m.Name, HTTPAddr: m.Meta.HTTPAddr},
		http.MethodGet, "/internal/v1/member", nil, http.Header{}, 0)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return nil, fmt.Errorf("unreachable: timed out after %v", memberFetchTimeout)
	case err != nil:
		return nil, fmt.Errorf("unreachable: %w", err)
	case c.status != http.StatusOK:
		return nil, fmt.Errorf("%s answered %d: %.200s", m.Name, c.status, c.body)
	}
	var a memberAnswer
	if err := json.Unmarshal(c.body, &a); err != nil {
		return nil, fmt.Errorf("%s answered a malformed row: %w", m.Name, err)
	}
	return &a, nil
}

// slotOwners is v's slot table as Snapshot.SlotOwners: for every slot the
// index in v.members of its owner, or NoOwner. Members past index 254 do
// not fit a byte; their slots show as NoOwner. O(slots).
func slotOwners(v *view) []byte {
	index := make(map[string]byte, len(v.members))
	for i, m := range v.members {
		if i < NoOwner {
			index[m.Name] = byte(i)
		}
	}
	owners := make([]byte, slots.Count)
	for s := range owners {
		owners[s] = NoOwner
		if o, ok := v.table.Owner(uint16(s)); ok {
			if i, ok := index[o.Name]; ok {
				owners[s] = i
			}
		}
	}
	return owners
}

// mergeWheels adds heatmaps up on the first one's buckets: a bucket of
// another member counts where its start falls (members truncate their own
// clocks to the minute, so they may be a bucket apart). Counts that fall
// outside are dropped, and the sum is Truncated if any part was.
func mergeWheels(ws []WheelHeatmap) WheelHeatmap {
	out := ws[0]
	out.Counts = append([]int(nil), out.Counts...)
	bucket := time.Duration(out.BucketSeconds) * time.Second
	for _, w := range ws[1:] {
		out.Truncated = out.Truncated || w.Truncated
		if bucket <= 0 || w.BucketSeconds != out.BucketSeconds {
			continue
		}
		for i, c := range w.Counts {
			at := w.Start.Add(time.Duration(i) * bucket).Sub(out.Start)
			if j := int(at / bucket); at >= 0 && j < len(out.Counts) {
				out.Counts[j] += c
			}
		}
	}
	return out
}

// noteMembers records the membership changes from old to v on the
// dashboard's timeline: joins, deaths, leaves, restarts, state changes.
func (n *Node) noteMembers(old, v *view) {
	for _, c := range memberChanges(old.members, v.members) {
		n.event(c.kind, c.text)
	}
}
