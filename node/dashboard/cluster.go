package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/chime-scheduler/chime/node/dispatch"
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

// MemberAnswer is GET /internal/v1/member: the node's MemberSnapshot (its
// fields at the top level, so it decodes as one), plus its wheel heatmap
// and callback latency histograms, which the serving node adds up. Like
// Snapshot's, its JSON field names are append-only: members of different
// versions read each other's answers.
type MemberAnswer struct {
	MemberSnapshot
	Wheel *WheelHeatmap       `json:"wheel,omitempty"`
	Hosts []dispatch.HostHist `json:"host_histograms,omitempty"`
	URLs  []dispatch.HostHist `json:"url_histograms,omitempty"`
	// UnderReplicated are the slots this member owns whose follower has
	// not acknowledged all writes; Importing the slots the view gives it
	// that it does not serve yet (their writes answer 503).
	UnderReplicated []uint16 `json:"under_replicated,omitempty"`
	Importing       []uint16 `json:"importing,omitempty"`
	// Stalled are the slots it owns that have not fired for
	// --overdue-after (the safety net).
	Stalled []uint16 `json:"stalled,omitempty"`
	// Circuits are its callback circuits that are not closed (the
	// circuit breaker).
	Circuits []dispatch.CircuitInfo `json:"circuits,omitempty"`
}

// peerAnswer is a member's last good answer and when it arrived.
type peerAnswer struct {
	ans MemberAnswer
	at  time.Time
}

// Member returns this node's own row with what the serving node adds up,
// for GET /internal/v1/member (the caller checks that another node asks).
func (d *Dashboard) Member(ctx context.Context) (*MemberAnswer, error) {
	row, heat, err := d.localRow(ctx, d.src.View())
	if err != nil {
		return nil, err
	}
	under, importing, stalled := d.src.SlotHealth()
	return &MemberAnswer{MemberSnapshot: row, Wheel: &heat, Hosts: d.cfg.Hosts.Hists(hostsShared),
		URLs:            d.cfg.Hosts.URLHists(hostsShared),
		UnderReplicated: under, Importing: importing, Stalled: stalled, Circuits: d.circuits()}, nil
}

// clusterSnapshot fills snap's members, slot table, wheel and hosts from
// view v: one row per member of v (dead and left too), in v's order (by
// name), self being this node's own row. Every other live member is asked
// for its row in parallel, each within memberFetchTimeout; a member that
// does not answer, or is dead or left, keeps its last good row (or an
// empty one), marked Stale. The wheel heatmap and callback latencies add
// up those of the live members; it returns the live members' circuits
// that are not closed (for markCircuits).
func (d *Dashboard) clusterSnapshot(ctx context.Context, v *View, self MemberSnapshot, snap *Snapshot) [][]dispatch.CircuitInfo {
	members := v.Members
	fresh := make([]*MemberAnswer, len(members))
	errs := make([]error, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		if m.Name == d.cfg.Name || !m.Up {
			continue
		}
		wg.Go(func() { fresh[i], errs[i] = d.fetchMember(ctx, m) })
	}
	wg.Wait()
	now := d.cfg.Now()

	d.mu.Lock()
	ct := &d.mu.clusterTable
	if ct.v != v {
		ct.v, ct.owners = v, slotOwners(v)
	}
	owners := ct.owners
	known := make(map[string]peerAnswer, len(members))
	for i, m := range members {
		if fresh[i] != nil {
			known[m.Name] = peerAnswer{*fresh[i], now}
		} else if p, ok := d.mu.peers[m.Name]; ok {
			known[m.Name] = p
		}
	}
	d.mu.peers = known // members gone from the view are forgotten
	d.mu.Unlock()

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
	under, importing, stalled := d.src.SlotHealth()
	mark(under, SlotUnderReplicated)
	mark(importing, SlotUnavailable)
	mark(stalled, SlotStalled)
	for _, m := range members {
		if p, ok := known[m.Name]; ok && m.Up && m.Name != d.cfg.Name {
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
	counts := v.Table.Counts()
	rows := make([]MemberSnapshot, 0, len(members)+1)
	wheels := []WheelHeatmap{snap.Wheel}
	hosts := [][]dispatch.HostHist{d.cfg.Hosts.Hists(hostsShared)}
	urls := [][]dispatch.HostHist{d.cfg.Hosts.URLHists(hostsShared)}
	hasSelf := false
	var circuits [][]dispatch.CircuitInfo
	for i, m := range members {
		var row MemberSnapshot
		switch p, ok := known[m.Name]; {
		case m.Name == d.cfg.Name:
			row, hasSelf = self, true
		case ok:
			row = p.ans.MemberSnapshot
			if fresh[i] == nil {
				row.Stale, row.StatsAgeSeconds = true, now.Sub(p.at).Seconds()
				row.State = m.State // its own last word may be old
			}
			if m.Up {
				if p.ans.Wheel != nil {
					wheels = append(wheels, *p.ans.Wheel)
				}
				hosts = append(hosts, p.ans.Hosts)
				urls = append(urls, p.ans.URLs)
				circuits = append(circuits, p.ans.Circuits)
			}
		default:
			row = MemberSnapshot{Stale: true, TasksStored: -1, State: m.State}
		}
		if errs[i] != nil {
			row.Error = errs[i].Error()
		}
		c := counts[m.Name]
		row.Name, row.HTTPAddr, row.GossipAddr, row.Status = m.Name, m.HTTPAddr, m.GossipAddr, m.Status
		row.SlotsOwned, row.SlotsFollowing = c.Owned, c.Following
		rows = append(rows, row)
	}
	if !hasSelf { // not in its own view yet: before Start
		rows = append(rows, self)
	}
	snap.Members = rows
	snap.SlotOwners, snap.SlotStates, snap.TableVersion = owners, states, v.Table.Checksum()
	snap.Wheel = mergeWheels(wheels)
	snap.Hosts = dispatch.MergeHosts(10, hosts...)
	snap.URLs = dispatch.MergeHosts(10, urls...)
	return circuits
}

// fetchMember asks member m for its row, signed, within memberFetchTimeout.
func (d *Dashboard) fetchMember(ctx context.Context, m Member) (*MemberAnswer, error) {
	if m.HTTPAddr == "" {
		return nil, errors.New("no HTTP address in its gossip meta")
	}
	ctx, cancel := context.WithTimeout(ctx, memberFetchTimeout)
	defer cancel()
	status, body, err := d.src.FetchMember(ctx, m.Name, m.HTTPAddr)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return nil, fmt.Errorf("unreachable: timed out after %v", memberFetchTimeout)
	case err != nil:
		return nil, fmt.Errorf("unreachable: %w", err)
	case status != http.StatusOK:
		return nil, fmt.Errorf("%s answered %d: %.200s", m.Name, status, body)
	}
	var a MemberAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return nil, fmt.Errorf("%s answered a malformed row: %w", m.Name, err)
	}
	return &a, nil
}

// slotOwners is v's slot table as Snapshot.SlotOwners: for every slot the
// index in v.Members of its owner, or NoOwner. Members past index 254 do
// not fit a byte; their slots show as NoOwner. O(slots).
func slotOwners(v *View) []byte {
	index := make(map[string]byte, len(v.Members))
	for i, m := range v.Members {
		if i < NoOwner {
			index[m.Name] = byte(i)
		}
	}
	owners := make([]byte, slots.Count)
	for s := range owners {
		owners[s] = NoOwner
		if o, ok := v.Table.Owner(uint16(s)); ok {
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
