package httpapi

import "net/http"

// Member is one member in GET /v1/cluster.
type Member struct {
	Name            string      `json:"name"`
	GossipAddr      string      `json:"gossip_addr,omitempty"`
	HTTPAddr        string      `json:"http_addr"`
	State           string      `json:"state"`
	Status          string      `json:"status"`
	SlotsOwned      int         `json:"slots_owned"`
	SlotsFollowing  int         `json:"slots_following"`
	OwnedRanges     [][2]uint16 `json:"owned_ranges"`
	FollowingRanges [][2]uint16 `json:"following_ranges"`
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

// handleCluster describes the cluster as this node sees it.
func (s *Server) handleCluster(w http.ResponseWriter, _ *http.Request) {
	WriteJSON(w, http.StatusOK, s.b.Cluster())
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
