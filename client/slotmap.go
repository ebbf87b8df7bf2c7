package client

// The slot map (GET /v1/cluster/slots, API.md "The slot map"): which node
// owns, and which follows, each slot, and how the client keeps it fresh.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/chime-scheduler/chime/slots"
)

// minReload is the least time between two loads of the slot map that no
// new table version asked for (the first load failed, or an answer was
// forwarded while the version is the map's).
const minReload = time.Second

// slotMap is one loaded slot map, immutable.
type slotMap struct {
	version string
	etag    string
	// nodes are the base URLs of the owners and followers; owner and
	// follower index them per slot, -1 for none (or no usable address).
	nodes    []string
	owner    [slots.Count]int16
	follower [slots.Count]int16
}

// slotRange is one range of the map on the wire.
type slotRange struct {
	Start    int    `json:"start"`
	End      int    `json:"end"`
	Owner    string `json:"owner"`
	HTTPAddr string `json:"http_addr"`
	Follower string `json:"follower"`
	Epoch    uint64 `json:"epoch"`
}

// parseSlotMap reads a slot map body; nodes are reached with scheme. An
// owner whose address is unusable from here (empty, or a wildcard such as
// 0.0.0.0) has no route: its slots go to the seeds.
func parseSlotMap(body []byte, etag, scheme string) (*slotMap, error) {
	var w struct {
		Version string      `json:"version"`
		Ranges  []slotRange `json:"ranges"`
	}
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("chime: decoding the slot map: %w", err)
	}
	m := &slotMap{version: w.Version, etag: etag}
	for i := range m.owner {
		m.owner[i], m.follower[i] = -1, -1
	}
	addrOf := map[string]string{} // member name → http address
	for _, r := range w.Ranges {
		addrOf[r.Owner] = r.HTTPAddr
	}
	index := map[string]int16{} // base URL → index in nodes
	node := func(name string) int16 {
		addr := addrOf[name]
		host, _, err := net.SplitHostPort(addr)
		if name == "" || err != nil || host == "" {
			return -1
		}
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			return -1
		}
		base := scheme + "://" + addr
		i, ok := index[base]
		if !ok {
			i = int16(len(m.nodes))
			index[base] = i
			m.nodes = append(m.nodes, base)
		}
		return i
	}
	for _, r := range w.Ranges {
		if r.Start < 0 || r.End >= slots.Count || r.Start > r.End {
			return nil, fmt.Errorf("chime: the slot map has a range %d..%d outside 0..%d", r.Start, r.End, slots.Count-1)
		}
		o, f := node(r.Owner), node(r.Follower)
		for s := r.Start; s <= r.End; s++ {
			m.owner[s], m.follower[s] = o, f
		}
	}
	return m, nil
}

// route returns the base URLs of the owner and the follower of id's slot
// ("" when unknown).
func (m *slotMap) route(id string) (owner, follower string) {
	s := slots.Of(id)
	if i := m.owner[s]; i >= 0 {
		owner = m.nodes[i]
	}
	if i := m.follower[s]; i >= 0 {
		follower = m.nodes[i]
	}
	return owner, follower
}

// slotMap returns the current slot map, loading it first from the seeds
// if there is none yet (at most once per minReload: without a map the
// requests go to the seeds, which forward them).
func (c *Client) slotMap(ctx context.Context) *slotMap {
	if m := c.slots.Load(); m != nil || c.noRoute {
		return m
	}
	c.reload.Lock()
	defer c.reload.Unlock()
	if m := c.slots.Load(); m != nil || time.Since(c.lastLoad) < minReload {
		return m
	}
	c.lastLoad = time.Now()
	for _, s := range c.seeds {
		if m, err := c.loadFrom(ctx, s, nil); err == nil {
			return m
		} else if ctx.Err() != nil {
			return nil
		} else {
			c.log.Warn("chime: loading the slot map", "node", s, "err", err)
		}
	}
	return nil
}

// noteAnswer reloads the slot map from the node at base when its answer
// says the map is stale: another table version, or the answer was
// forwarded from the owner (X-Chime-Owner).
func (c *Client) noteAnswer(ctx context.Context, base string, h http.Header) {
	if c.noRoute {
		return
	}
	version, owner := h.Get(headerTableVersion), h.Get(headerOwner)
	m := c.slots.Load()
	if m != nil && (version == "" || version == m.version) && owner == "" {
		return
	}
	c.reload.Lock()
	defer c.reload.Unlock()
	m = c.slots.Load()
	newVersion := m != nil && version != "" && version != m.version
	if !newVersion && time.Since(c.lastLoad) < minReload {
		return // loaded since, or asked too often for the same version
	}
	c.lastLoad = time.Now()
	if _, err := c.loadFrom(ctx, base, m); err != nil {
		c.log.Warn("chime: reloading the slot map", "node", base, "err", err)
	}
}

// loadFrom loads the slot map from the node at base, conditionally on
// old's ETag, and installs it. Called with c.reload held.
func (c *Client) loadFrom(ctx context.Context, base string, old *slotMap) (*slotMap, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/cluster/slots", nil)
	if err != nil {
		return nil, err
	}
	if old != nil && old.etag != "" {
		req.Header.Set("If-None-Match", old.etag)
	}
	ans, err := c.exchange(req, false)
	switch {
	case err != nil:
		return nil, err
	case ans.status == http.StatusNotModified && old != nil:
		return old, nil
	case ans.status != http.StatusOK:
		return nil, apiError(ans)
	}
	m, err := parseSlotMap(ans.body, ans.header.Get("ETag"), c.scheme)
	if err != nil {
		return nil, err
	}
	c.slots.Store(m)
	c.log.Debug("chime: slot map loaded", "node", base, "version", m.version, "nodes", len(m.nodes))
	return m, nil
}
