package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/chime-scheduler/chime/node/httpapi"
	"github.com/chime-scheduler/chime/ring"
	"github.com/chime-scheduler/chime/ring/gossip"
)

// Gossip key rotation (`chime cluster keys`). An operator asks any member;
// it asks every live member over the signed internal API, itself
// included, and sums up the answers. A rotation is three calls, each
// waiting for every member: install the new key (all accept it), use it
// (all send with it), remove the old one (nobody accepts it any more).
// Keys are never shown, only their fingerprints (gossip.KeyFingerprint).

// Key operations.
const (
	keyList    = "list"
	keyInstall = "install"
	keyUse     = "use"
	keyRemove  = "remove"
)

// maxKeyBody bounds a key request, public or internal: an op and a key.
const maxKeyBody = 4 << 10

// keyCallTimeout bounds one member's answer to a key call.
const keyCallTimeout = 5 * time.Second

// keyRequest is the body of POST /v1/cluster/keys and /internal/v1/keys.
type keyRequest struct {
	Op  string `json:"op"`
	Key string `json:"key,omitempty"` // base64 of 32 bytes
}

// memberKeys is one member's keyring after a key call, by fingerprint.
type memberKeys struct {
	Primary string   `json:"primary"`
	Keys    []string `json:"keys"`
}

// KeyCount is one key in a keys answer: how many members have it
// installed, and how many use it as their primary key.
type KeyCount struct {
	Fingerprint string `json:"fingerprint"`
	Installed   int    `json:"installed"`
	Primary     int    `json:"primary"`
}

// KeysAnswer answers /v1/cluster/keys: the keyrings of the live members
// after the operation. Failed names the live members that did not apply
// it (their error); Down the members that were not asked (dead or left).
type KeysAnswer struct {
	Op       string            `json:"op"`
	Members  int               `json:"members"`
	Answered int               `json:"answered"`
	Keys     []KeyCount        `json:"keys"`
	Failed   map[string]string `json:"failed,omitempty"`
	Down     []string          `json:"down,omitempty"`
}

// handleKeys serves GET (list) and POST (install, use, remove)
// /v1/cluster/keys.
func (n *Node) handleKeys(w http.ResponseWriter, r *http.Request) {
	req := keyRequest{Op: keyList}
	if r.Method == http.MethodPost {
		body, e := httpapi.ReadBody(w, r, maxKeyBody)
		if e != nil {
			writeError(w, e)
			return
		}
		if err := json.Unmarshal(body, &req); err != nil {
			writeError(w, invalid("body", "want {\"op\":\"install|use|remove\",\"key\":\"<base64 of 32 bytes>\"}: %v", err))
			return
		}
		if req.Op == keyList {
			writeError(w, invalid("op", "list is GET /v1/cluster/keys"))
			return
		}
	}
	key, e := parseKeyRequest(req)
	if e != nil {
		writeError(w, e)
		return
	}
	if n.cluster == nil {
		writeError(w, invalid("op", "a standalone node has no gossip keys"))
		return
	}
	if _, err := n.cluster.mem.Keys(); err != nil {
		writeError(w, &Error{Code: CodeConflict, Message: err.Error() + " (started with --insecure-cluster): there is no keyring to change"})
		return
	}
	ctx := r.Context()
	if req.Op == keyUse || req.Op == keyRemove {
		// Check first, on every live member: a key used before everyone has
		// it, or removed while someone still sends with it, cuts members off.
		before := n.keysEverywhere(ctx, keyRequest{Op: keyList})
		if len(before.Failed) > 0 {
			writeError(w, &Error{Code: CodeUnavailable, Message: "not every live member answered; nothing was changed: " + failedText(before.Failed)})
			return
		}
		fp := gossip.KeyFingerprint(key)
		for _, name := range slices.Sorted(maps.Keys(before.rings)) {
			k := before.rings[name]
			switch {
			case req.Op == keyUse && !slices.Contains(k.Keys, fp):
				writeError(w, &Error{Code: CodeConflict, Field: "key", Message: fmt.Sprintf("%s has not installed this key; install it first (chime cluster keys install)", name)})
				return
			case req.Op == keyRemove && k.Primary == fp:
				writeError(w, &Error{Code: CodeConflict, Field: "key", Message: fmt.Sprintf("%s still uses this key; use another first (chime cluster keys use)", name)})
				return
			}
		}
	}
	res := n.keysEverywhere(ctx, req)
	if req.Op != keyList {
		n.log.Warn("gossip keyring changed by an operator", "op", req.Op, "key", gossip.KeyFingerprint(key),
			"answered", res.Answered, "failed", len(res.Failed))
	}
	writeJSON(w, http.StatusOK, res.KeysAnswer)
}

// parseKeyRequest checks a key request and decodes its key (nil for list).
func parseKeyRequest(req keyRequest) ([]byte, *Error) {
	switch req.Op {
	case keyList:
		if req.Key != "" {
			return nil, invalid("key", "list takes no key")
		}
		return nil, nil
	case keyInstall, keyUse, keyRemove:
	default:
		return nil, invalid("op", "unknown key operation %q: want install, use or remove", req.Op)
	}
	key, err := gossip.ParseSecretKey(req.Key)
	if err != nil || key == nil {
		return nil, invalid("key", "want the base64 of a 32-byte key (openssl rand -base64 32)")
	}
	return key, nil
}

// keysResult is a KeysAnswer with every member's keyring.
type keysResult struct {
	KeysAnswer
	rings map[string]memberKeys
}

// keysEverywhere runs req on every live member of the view, this node
// included, in parallel, and sums up their keyrings.
func (n *Node) keysEverywhere(ctx context.Context, req keyRequest) keysResult {
	v := n.view.Load()
	res := keysResult{KeysAnswer: KeysAnswer{Op: req.Op, Members: len(v.members), Failed: map[string]string{}}, rings: map[string]memberKeys{}}
	body, _ := json.Marshal(req)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, m := range v.members {
		if !m.Up() && m.Name != n.cfg.Name {
			res.Down = append(res.Down, m.Name)
			continue
		}
		wg.Go(func() {
			k, err := n.keysOn(ctx, m, req, body)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				res.Failed[m.Name] = err.Error()
				return
			}
			res.rings[m.Name] = k
		})
	}
	wg.Wait()
	counts := map[string]*KeyCount{}
	for _, k := range res.rings {
		res.Answered++
		for _, fp := range k.Keys {
			c := counts[fp]
			if c == nil {
				c = &KeyCount{Fingerprint: fp}
				counts[fp] = c
			}
			c.Installed++
			if fp == k.Primary {
				c.Primary++
			}
		}
	}
	res.Keys = []KeyCount{}
	for _, c := range counts {
		res.Keys = append(res.Keys, *c)
	}
	slices.SortFunc(res.Keys, func(a, b KeyCount) int {
		if a.Primary != b.Primary {
			return b.Primary - a.Primary
		}
		return strings.Compare(a.Fingerprint, b.Fingerprint)
	})
	if len(res.Failed) == 0 {
		res.Failed = nil
	}
	return res
}

// keysOn runs req on member m: on this node directly, on another over a
// signed internal call.
func (n *Node) keysOn(ctx context.Context, m gossip.Member, req keyRequest, body []byte) (memberKeys, error) {
	if m.Name == n.cfg.Name {
		key, _ := parseKeyRequest(req)
		if err := n.applyKeyOp(req.Op, key); err != nil {
			return memberKeys{}, err
		}
		return n.localKeys()
	}
	if m.Meta.HTTPAddr == "" {
		return memberKeys{}, errors.New("no HTTP address in its gossip meta")
	}
	ctx, cancel := context.WithTimeout(ctx, keyCallTimeout)
	defer cancel()
	c, err := n.fwd.do(ctx, ring.Member{Name: m.Name, HTTPAddr: m.Meta.HTTPAddr}, http.MethodPost, "/internal/v1/keys", body, http.Header{}, 0)
	switch {
	case err != nil:
		return memberKeys{}, fmt.Errorf("unreachable: %w", err)
	case c.status != http.StatusOK:
		return memberKeys{}, fmt.Errorf("answered %d: %.200s", c.status, c.body)
	}
	var k memberKeys
	if err := json.Unmarshal(c.body, &k); err != nil || k.Primary == "" || len(k.Keys) > 64 {
		return memberKeys{}, fmt.Errorf("answered a malformed keyring: %.200s", c.body)
	}
	return k, nil
}

// handleInternalKeys applies one member's part of a key operation and
// answers its keyring.
func (n *Node) handleInternalKeys(w http.ResponseWriter, r *http.Request) {
	_, body, e := n.guard.Read(r, "keys", maxKeyBody)
	if e != nil {
		writeError(w, e)
		return
	}
	var req keyRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, invalid("body", "keys: %v", err))
		return
	}
	key, e := parseKeyRequest(req)
	if e != nil {
		writeError(w, e)
		return
	}
	if n.cluster == nil {
		writeError(w, &Error{Code: CodeNotFound, Message: "not a cluster member"})
		return
	}
	if err := n.applyKeyOp(req.Op, key); err != nil {
		writeError(w, &Error{Code: CodeConflict, Field: "key", Message: err.Error()})
		return
	}
	k, err := n.localKeys()
	if err != nil {
		writeError(w, &Error{Code: CodeConflict, Message: err.Error()})
		return
	}
	if req.Op != keyList {
		n.log.Warn("gossip keyring changed", "op", req.Op, "key", gossip.KeyFingerprint(key), "primary", k.Primary, "keys", len(k.Keys))
	}
	writeJSON(w, http.StatusOK, k)
}

// applyKeyOp applies op with key to this node's keyring.
func (n *Node) applyKeyOp(op string, key []byte) error {
	mem := n.cluster.mem
	switch op {
	case keyInstall:
		return mem.InstallKey(key)
	case keyUse:
		return mem.UseKey(key)
	case keyRemove:
		return mem.RemoveKey(key)
	}
	return nil
}

// localKeys is this node's keyring by fingerprint.
func (n *Node) localKeys() (memberKeys, error) {
	k, err := n.cluster.mem.Keys()
	if err != nil {
		return memberKeys{}, err
	}
	out := memberKeys{Primary: gossip.KeyFingerprint(k.Primary)}
	for _, key := range k.All {
		out.Keys = append(out.Keys, gossip.KeyFingerprint(key))
	}
	return out, nil
}

// failedText lists failed members and their errors on one line.
func failedText(failed map[string]string) string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(failed)) {
		parts = append(parts, name+": "+failed[name])
	}
	return strings.Join(parts, "; ")
}
