// Package dashboard builds what the live dashboard shows: the Snapshot of
// GET /v1/snapshot and the /v1/ws stream, with one row per cluster member,
// the slot table and its health, the event timeline, the pending-fire
// heatmap and callback latency per host.
//
// It reads its node only through the Source it is built with (package node
// implements it), so that the snapshot's logic — rates between calls,
// lateness quantiles, the merge of every member's row over signed internal
// HTTP — is tested here against a fake, without a store or a cluster.
package dashboard

import (
	"fmt"
	"strconv"
	"time"

	"github.com/chime-scheduler/chime/node/dispatch"
	"github.com/chime-scheduler/chime/slots"
)

// Snapshot is what the live dashboard shows: every member's vital signs,
// where the slots live, recent events, the pending-fire heatmap and
// callback latency per host. It is JSON for the websocket stream
// (GET /v1/ws) and GET /v1/snapshot.
//
// JSON field names are append-only: never rename or remove one, and never
// change what an existing field's bytes mean; add a new field instead. The
// same holds for the byte values of SlotOwners and SlotStates (SlotState,
// NoOwner).
type Snapshot struct {
	// Time is when the snapshot was taken (json "time").
	Time time.Time `json:"time"`
	// Self is the name of the node that took it (json "self").
	Self string `json:"self"`
	// Members is one row per cluster member (json "members"): in a
	// cluster every member of the serving node's view by name, dead and
	// left ones too (Status, Stale). Its order is the one SlotOwners
	// indexes into.
	Members []MemberSnapshot `json:"members"`

	// SlotOwners is the owner of every slot (json "slot_owners", which
	// encoding/json writes as standard padded base64): slots.Count (16384)
	// bytes, byte i being the index in Members of slot i's owner, or
	// NoOwner (255). So a table names at most 255 members (indexes 0–254).
	// Set it with SetSlotTable, check a decoded one with CheckSlotTable.
	//
	// A flat byte per slot is the smallest form after permessage-deflate
	// for a cluster: rendezvous hashing leaves ~13,000 runs over 5
	// members, and a run-length form is 40 % larger deflated (README,
	// Dashboard).
	SlotOwners []byte `json:"slot_owners"`
	// SlotStates is every slot's health (json "slot_states", base64 like
	// SlotOwners): slots.Count bytes, byte i being slot i's SlotState (0
	// ok, 1 under_replicated, 2 unavailable, 3 stalled). In a cluster a slot is
	// under-replicated while its owner has no caught-up follower, and
	// unavailable while the node the table names owner cannot take it
	// over (no live holder of a copy; writes answer 503) or when no
	// member owns it. A standalone node reports every slot ok.
	SlotStates []SlotState `json:"slot_states"`
	// TableVersion is the version of the slot table SlotOwners shows, the
	// table_version of GET /v1/cluster (json "table_version"). Owners
	// change only with it; SlotStates may change between versions (a
	// follower falls behind, a node dies), so a reader that caches
	// SlotOwners by version must still read SlotStates on every push.
	TableVersion uint64 `json:"table_version"`
	// Events is the recent membership and handover timeline, oldest first
	// (json "events"; at most 200).
	Events []Event `json:"events"`
	// Wheel is the pending-fire heatmap (json "wheel").
	Wheel WheelHeatmap `json:"wheel"`
	// Hosts is callback latency per host, busiest first (json "hosts").
	Hosts []HostLatency `json:"hosts"`
	// URLs is callback latency per URL (scheme://host:port/path, no
	// query), busiest first (json "urls"; each row's "host" holds the URL).
	URLs []HostLatency `json:"urls"`
	// Insecure is set when the serving node runs with --insecure-cluster
	// (json "insecure"): the dashboard shows a warning.
	Insecure bool `json:"insecure,omitempty"`
}

// SlotState is one slot's health in Snapshot.SlotStates. The values are
// bytes on the wire: append-only. The zero value means ok.
type SlotState uint8

// Slot states, as the bytes of Snapshot.SlotStates.
const (
	// SlotOK: the slot has an owner and, in a cluster, a caught-up follower.
	SlotOK SlotState = 0
	// SlotUnderReplicated: the slot is served but its replica is missing
	// or behind.
	SlotUnderReplicated SlotState = 1
	// SlotUnavailable: no member can serve the slot now.
	SlotUnavailable SlotState = 2
	// SlotStalled: the slot's owner (by the table) has not fired it for
	// --overdue-after or longer: acknowledged tasks in it wait (the safety
	// net, chime_slots_stalled).
	SlotStalled SlotState = 3
)

// String returns the state's name: "ok", "under_replicated",
// "unavailable", "stalled", or "SlotState(n)".
func (s SlotState) String() string {
	switch s {
	case SlotOK:
		return "ok"
	case SlotUnderReplicated:
		return "under_replicated"
	case SlotUnavailable:
		return "unavailable"
	case SlotStalled:
		return "stalled"
	}
	return "SlotState(" + strconv.Itoa(int(s)) + ")"
}

// NoOwner is the Snapshot.SlotOwners byte of a slot that no member owns.
const NoOwner = 255

// SetSlotTable sets SlotOwners, SlotStates and TableVersion: owners holds
// the index in s.Members of each slot's owner (or NoOwner), states each
// slot's state, both slots.Count long. The snapshot
// keeps owners and states (a node shares one table between snapshots), so
// the caller must not modify them afterwards. On error s is unchanged.
// O(slots).
func (s *Snapshot) SetSlotTable(version uint64, owners []byte, states []SlotState) error {
	if err := checkSlotTable(len(s.Members), owners, states); err != nil {
		return err
	}
	s.SlotOwners, s.SlotStates, s.TableVersion = owners, states, version
	return nil
}

// CheckSlotTable reports whether SlotOwners and SlotStates form a valid
// table for the snapshot's Members, as a reader of the JSON should check:
// slots.Count of each, every owner a Members index or NoOwner, every state
// known. O(slots).
func (s *Snapshot) CheckSlotTable() error {
	return checkSlotTable(len(s.Members), s.SlotOwners, s.SlotStates)
}

func checkSlotTable(members int, owners []byte, states []SlotState) error {
	if len(owners) != slots.Count || len(states) != slots.Count {
		return fmt.Errorf("dashboard: slot table of %d owners and %d states, want %d of each", len(owners), len(states), slots.Count)
	}
	for i, o := range owners {
		if o != NoOwner && int(o) >= members {
			return fmt.Errorf("dashboard: slot %d has owner index %d, but the snapshot has %d members", i, o, members)
		}
		if states[i] > SlotStalled {
			return fmt.Errorf("dashboard: slot %d has state %v", i, states[i])
		}
	}
	return nil
}

// MemberSnapshot is one node's row in the dashboard. A node serves its own
// at GET /internal/v1/member; in a cluster snapshot, the identity, Status
// and slot counts come from the serving node's view, the stats from the
// member itself.
type MemberSnapshot struct {
	Name string `json:"name"`
	// State is the member's lifecycle state as in GET /v1/cluster
	// (joining, active, draining), or loading for an active member that is
	// not ready (its due tasks are loading, or its view has not settled).
	State string `json:"state"`
	// Status is the member's liveness as gossip sees it, as in GET
	// /v1/cluster: alive, suspect, dead or left (json "status"). A
	// standalone node is alive.
	Status string `json:"status"`
	// Stale is set when the stats of this row are not fresh (json
	// "stale"): the member is dead or left, or did not answer this
	// snapshot's fetch in time. The row then shows the last stats it
	// served, StatsAgeSeconds old, or none (zero rates, TasksStored -1)
	// if it never answered.
	Stale           bool    `json:"stale"`
	StatsAgeSeconds float64 `json:"stats_age_seconds,omitempty"`
	// Error says why a live member's fetch failed (json "error").
	Error          string  `json:"error,omitempty"`
	HTTPAddr       string  `json:"http_addr"`
	GossipAddr     string  `json:"gossip_addr"`
	SlotsOwned     int     `json:"slots_owned"`
	SlotsFollowing int     `json:"slots_following"`
	TasksStored    int64   `json:"tasks_stored"` // -1 while unknown (counting after a start)
	WheelTasks     int     `json:"wheel_tasks"`
	FiresPerSec    float64 `json:"fires_per_sec"`
	FailuresPerSec float64 `json:"failures_per_sec"`
	CreatesPerSec  float64 `json:"creates_per_sec"`
	LatenessP50Ms  float64 `json:"lateness_p50_ms"`
	LatenessP99Ms  float64 `json:"lateness_p99_ms"`
	CPUPercent     float64 `json:"cpu_percent"`
	RSSBytes       float64 `json:"rss_bytes"`
	Goroutines     int     `json:"goroutines"`
	DiskBytes      float64 `json:"disk_bytes"`
	UptimeSeconds  float64 `json:"uptime_seconds"`
	// AntiEntropyResyncs counts the replica copies of this member's slots
	// that anti-entropy found different and had resynced since it started
	// (json "antientropy_resyncs"; chime_antientropy_resyncs_total).
	AntiEntropyResyncs int64 `json:"antientropy_resyncs"`
	// TasksOverdue and SlotsStalled are the member's safety net (GET
	// /v1/stats): tasks in its slots due over --overdue-after ago and not
	// fired (-1 before its first scan), and its slots not firing that long.
	TasksOverdue int64 `json:"tasks_overdue"`
	SlotsStalled int   `json:"slots_stalled"`
}

// Event is one membership or handover event for the dashboard timeline.
type Event struct {
	Time time.Time `json:"time"`
	Kind string    `json:"kind"`
	Text string    `json:"text"`
}

// WheelHeatmap counts pending fires (by wake time) per bucket from Start.
type WheelHeatmap struct {
	Start         time.Time `json:"start"`
	BucketSeconds int       `json:"bucket_seconds"`
	Counts        []int     `json:"counts"`
	Truncated     bool      `json:"truncated"` // the scan stopped early; counts are lower bounds
}

// HostLatency is one callback host's latency summary (Snapshot.Hosts);
// dispatch.HostStats computes it.
type HostLatency = dispatch.HostLatency

// SingleTableVersion is the slot table's version while one node owns
// every slot; GET /v1/cluster reports the same 1.
const SingleTableVersion = 1

// singleNodeTable returns a snapshot holding only the slot table of a
// one-node cluster: member 0, name, owns every slot and all are ok.
func singleNodeTable(name string) *Snapshot {
	t := &Snapshot{Members: []MemberSnapshot{{Name: name}}}
	if err := t.SetSlotTable(SingleTableVersion, make([]byte, slots.Count), make([]SlotState, slots.Count)); err != nil {
		panic("dashboard: single-node slot table: " + err.Error()) // owner 0 of 1 member, states ok
	}
	return t
}
