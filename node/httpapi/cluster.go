package httpapi

import (
	"net/http"
	"strconv"
)

// Member is one member in GET /v1/cluster.
type Member struct {
	Name       string `json:"name"`
	GossipAddr string `json:"gossip_addr,omitempty"`
	HTTPAddr   string `json:"http_addr"`
	// State is the member's own word (active, joining, draining) while it
	// is alive; "dead" or "left" once gossip says so (Status).
	State  string `json:"state"`
	Status string `json:"status"`
	// Forgotten: left because an operator declared it gone for good
	// (POST .../forget), not by draining.
	Forgotten      bool `json:"forgotten,omitempty"`
	SlotsOwned     int  `json:"slots_owned"`
	SlotsFollowing int  `json:"slots_following"`
	// The slot ranges, only with ?ranges=true: thousands per member (the
	// table spreads the slots by hashing), ~90 KB a member.
	OwnedRanges     *[][2]uint16 `json:"owned_ranges,omitempty"`
	FollowingRanges *[][2]uint16 `json:"following_ranges,omitempty"`
}

// Cluster is GET /v1/cluster: the cluster as a node sees it, every known
// member (dead and left ones too, owning nothing) and the slot table.
type Cluster struct {
	Self string `json:"self"`
	// TableVersion identifies the slot table: its checksum, equal on every
	// node that computed the same table.
	TableVersion uint64 `json:"table_version"`
	ViewChecksum string `json:"view_checksum"`
	// Settled is false while the membership changed within the last
	// SettleTime: the table may still move.
	Settled bool `json:"settled"`
	// Insecure is set on a member started with --insecure-cluster: calls
	// between its nodes are not authenticated.
	Insecure bool     `json:"insecure"`
	Members  []Member `json:"members"`
}

// handleCluster describes the cluster as this node sees it; with
// ?ranges=true each member's slot ranges too.
func (s *Server) handleCluster(w http.ResponseWriter, r *http.Request) {
	ranges := false
	if v := r.URL.Query().Get("ranges"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			WriteError(w, Invalid("ranges", "ranges must be true or false"))
			return
		}
		ranges = b
	}
	WriteJSON(w, http.StatusOK, s.b.Cluster(ranges))
}

// handleForget serves POST /v1/cluster/members/{name}/forget: an operator
// declares a dead member gone for good (Backend.Forget).
func (s *Server) handleForget(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := s.b.Forget(name); err != nil {
		WriteError(w, AsError(err))
		return
	}
	WriteJSON(w, http.StatusOK, map[string]string{"forgotten": name})
}
