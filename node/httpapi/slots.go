package httpapi

// This file serves GET /v1/cluster/slots, the compact slot map clients route
// with (API.md "The slot map"): the table version and the slots as ranges
// of one owner, follower and epoch each.

import (
	"encoding/json"
	"hash/fnv"
	"net/http"
	"strconv"
	"strings"

	"github.com/chime-scheduler/chime/slots"
)

// Headers of the slot map (API.md "Conventions").
const (
	// HeaderTableVersion is on every answer: the answering node's slot
	// table version, as in GET /v1/cluster/slots.
	HeaderTableVersion = "X-Chime-Table-Version"
	// HeaderOwner is on an answer forwarded from the owner of the task's
	// slot: it names that owner, so a client knows its map is stale.
	HeaderOwner = "X-Chime-Owner"
)

// SlotRange is one range of GET /v1/cluster/slots: the slots Start..End
// (inclusive) with the same owner, owner address, follower and epoch.
type SlotRange struct {
	Start    uint16 `json:"start"`
	End      uint16 `json:"end"`
	Owner    string `json:"owner"`
	HTTPAddr string `json:"http_addr"`
	// Follower is the member that holds the replica and takes over when
	// the owner fails; empty on a node alone.
	Follower string `json:"follower,omitempty"`
	// Epoch is the slots' epoch as the answering node knows it (it owns or
	// follows them); 0 when it does not know it, and always on a
	// standalone node.
	Epoch uint64 `json:"epoch"`
}

// SlotMap is GET /v1/cluster/slots. Slots no member owns yet (a cluster
// forming) are in no range.
type SlotMap struct {
	// Version is the slot table's version (decimal, as in
	// X-Chime-Table-Version and /v1/cluster's table_version).
	Version string      `json:"version"`
	Ranges  []SlotRange `json:"ranges"`
}

// slotMap builds the slot map of v, with each slot's epoch from epoch.
func slotMap(v View, epoch func(uint16) uint64) SlotMap {
	m := SlotMap{Version: tableVersion(v), Ranges: []SlotRange{}}
	var cur *SlotRange
	for s := range slots.Count {
		slot := uint16(s)
		o, ok := v.Owner(slot)
		if !ok {
			cur = nil
			continue
		}
		r := SlotRange{Start: slot, End: slot, Owner: o.Name, HTTPAddr: o.HTTPAddr, Epoch: epoch(slot)}
		if f, ok := v.Follower(slot); ok && f.Name != o.Name {
			r.Follower = f.Name
		}
		if cur != nil && cur.End == slot-1 && cur.Owner == r.Owner && cur.HTTPAddr == r.HTTPAddr &&
			cur.Follower == r.Follower && cur.Epoch == r.Epoch {
			cur.End = slot
			continue
		}
		m.Ranges = append(m.Ranges, r)
		cur = &m.Ranges[len(m.Ranges)-1]
	}
	return m
}

// handleSlots serves the slot map with an ETag (the table version and a
// digest of the ranges, so a change of owner address or epoch changes it
// too); If-None-Match with it answers 304.
func (s *Server) handleSlots(w http.ResponseWriter, r *http.Request) {
	m := slotMap(s.b.View(), s.b.SlotEpoch)
	body, err := json.Marshal(m)
	if err != nil {
		WriteError(w, AsError(err))
		return
	}
	h := fnv.New64a()
	h.Write(body)
	etag := `"` + m.Version + "-" + strconv.FormatUint(h.Sum64(), 16) + `"`
	writeTagged(w, r, etag, "application/json", append(body, '\n'))
}

// etagMatch reports whether the If-None-Match value list names etag (or
// is "*"), comparing weakly as RFC 9110 asks for If-None-Match.
func etagMatch(list, etag string) bool {
	for t := range strings.SplitSeq(list, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || t != "" && t == etag {
			return true
		}
	}
	return false
}

// tableVersion is the X-Chime-Table-Version value of v.
func tableVersion(v View) string { return strconv.FormatUint(v.Version(), 10) }
