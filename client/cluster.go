package client

// The cluster and admin endpoints (API.md "Cluster endpoints", "Backup").
// Their answers are returned as the node's JSON: they are views for
// operators whose shape follows the node, not data a program computes with.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// Cluster returns GET /v1/cluster: the cluster as the node that answered
// sees it (self, table_version, view_checksum, settled, members), with
// each member's slot ranges if ranges (a few KB without, ~90 KB a member
// with).
func (c *Client) Cluster(ctx context.Context, ranges bool) (json.RawMessage, error) {
	cl := call{method: http.MethodGet, path: "/v1/cluster", idempotent: true}
	if ranges {
		cl.query = url.Values{"ranges": {"true"}}
	}
	return c.raw(ctx, cl)
}

// ForgetMember makes every member count the member name as left (POST
// /v1/cluster/members/{name}/forget) and returns the node's answer. It is
// sent once.
func (c *Client) ForgetMember(ctx context.Context, name string) (json.RawMessage, error) {
	return c.raw(ctx, call{method: http.MethodPost, path: "/v1/cluster/members/" + url.PathEscape(name) + "/forget"})
}

// Keys returns GET /v1/cluster/keys: the gossip keys each live member
// holds.
func (c *Client) Keys(ctx context.Context) (json.RawMessage, error) {
	return c.raw(ctx, call{method: http.MethodGet, path: "/v1/cluster/keys", idempotent: true})
}

// ChangeKeys applies op ("install", "use" or "remove") to the gossip key
// key (base64 of 32 bytes) on every live member (POST /v1/cluster/keys)
// and returns the node's answer, which names the members that failed. It
// is sent once.
func (c *Client) ChangeKeys(ctx context.Context, op, key string) (json.RawMessage, error) {
	body, err := json.Marshal(map[string]string{"op": op, "key": key})
	if err != nil {
		return nil, err
	}
	return c.raw(ctx, call{method: http.MethodPost, path: "/v1/cluster/keys", body: body})
}

// raw sends cl and returns its answer's body, which must be JSON.
func (c *Client) raw(ctx context.Context, cl call) (json.RawMessage, error) {
	a, err := c.do(ctx, cl)
	if err != nil {
		return nil, err
	}
	if !json.Valid(a.body) {
		return nil, fmt.Errorf("chime: decoding the answer (%d): not JSON: %q", a.status, a.body[:min(len(a.body), 120)])
	}
	return a.body, nil
}

// maxErrorAnswer bounds how much of an error answer to a stream is read.
const maxErrorAnswer = 64 << 10

// Backup streams the store of the node at node (a base URL such as
// https://10.0.0.2:7070; "": the first seed): GET /v1/admin/backup, a
// consistent checkpoint as a tar.gz. The caller reads the archive and
// closes it. The request is sent once, to that node only, and only ctx
// bounds it: WithTimeout does not apply, an archive takes as long as it
// takes.
func (c *Client) Backup(ctx context.Context, node string) (io.ReadCloser, error) {
	if node == "" {
		node = c.seeds[0]
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, node+"/v1/admin/backup", nil)
	if err != nil {
		return nil, err
	}
	c.setHeaders(req, false)
	req.Header.Set("Accept", "application/gzip")
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: GET /v1/admin/backup at %s: %w", ErrUnavailable, node, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorAnswer))
		return nil, apiError(answer{status: resp.StatusCode, header: resp.Header, body: b})
	}
	return resp.Body, nil
}
