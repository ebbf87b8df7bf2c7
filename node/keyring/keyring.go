// Package keyring serves gossip key rotation (`chime cluster keys`): the
// public /v1/cluster/keys and the internal /internal/v1/keys.
//
// An operator asks any member; it asks every live member over the signed
// internal API, itself included, and sums up the answers. A rotation is
// three calls, each waiting for every member: install the new key (all
// accept it), use it (all send with it), remove the old one (nobody
// accepts it any more). Keys are never shown, only their fingerprints
// (gossip.KeyFingerprint).
//
// It knows the node only through Config's func fields: the gossip
// keyring, the view's members, a signed call to another member and the
// internal endpoints' authentication.
package keyring

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/chime-scheduler/chime/node/httpapi"
	"github.com/chime-scheduler/chime/ring/gossip"
)

// InternalPath is the internal endpoint that applies one member's part of
// a key operation.
const InternalPath = "/internal/v1/keys"

// Key operations.
const (
	opList    = "list"
	opInstall = "install"
	opUse     = "use"
	opRemove  = "remove"
)

// maxBody bounds a key request, public or internal: an op and a key.
const maxBody = 4 << 10

// callTimeout bounds one member's answer to a key call.
const callTimeout = 5 * time.Second

// Keyring is a member's gossip keyring (*gossip.Membership).
type Keyring interface {
	// Keys fails when gossip runs without encryption.
	Keys() (gossip.Keys, error)
	InstallKey(key []byte) error
	UseKey(key []byte) error
	RemoveKey(key []byte) error
}

// Config is what the key endpoints need of the node, given at
// construction.
type Config struct {
	// Self is this node's member name.
	Self string
	// Keyring is this node's gossip keyring, nil while it has none (a
	// standalone node, or before the cluster started).
	Keyring func() Keyring
	// Members are the members of the node's current view.
	Members func() []gossip.Member
	// Call sends body as a signed POST InternalPath to member m and
	// returns its answer. Errors are transport failures and timeouts.
	Call func(ctx context.Context, m gossip.Member, body []byte) (status int, answer []byte, err error)
	// Authenticate checks an internal call from its headers, then reads
	// its body of at most limit bytes (internalauth.Guard.Read); endpoint
	// names it in metrics.
	Authenticate func(r *http.Request, endpoint string, limit int64) (from string, body []byte, e *httpapi.Error)
	// Log records every change of the keyring.
	Log *slog.Logger
}

// Service serves the key endpoints of one node.
type Service struct{ cfg Config }

// New returns the key endpoints of the node cfg describes.
func New(cfg Config) *Service { return &Service{cfg: cfg} }

// request is the body of POST /v1/cluster/keys and /internal/v1/keys.
type request struct {
	Op  string `json:"op"`
	Key string `json:"key,omitempty"` // base64 of 32 bytes
}

// MemberKeys is one member's keyring after a key call, by fingerprint: the
// answer of /internal/v1/keys.
type MemberKeys struct {
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

// Answer answers /v1/cluster/keys: the keyrings of the live members after
// the operation. Failed names the live members that did not apply it
// (their error); Down the members that were not asked (dead or left).
type Answer struct {
	Op       string            `json:"op"`
	Members  int               `json:"members"`
	Answered int               `json:"answered"`
	Keys     []KeyCount        `json:"keys"`
	Failed   map[string]string `json:"failed,omitempty"`
	Down     []string          `json:"down,omitempty"`
}

// HandleKeys serves GET (list) and POST (install, use, remove)
// /v1/cluster/keys.
func (s *Service) HandleKeys(w http.ResponseWriter, r *http.Request) {
	req := request{Op: opList}
	if r.Method == http.MethodPost {
		body, e := httpapi.ReadBody(w, r, maxBody)
		if e != nil {
			httpapi.WriteError(w, e)
			return
		}
		if err := json.Unmarshal(body, &req); err != nil {
			httpapi.WriteError(w, httpapi.Invalid("body", "want {\"op\":\"install|use|remove\",\"key\":\"<base64 of 32 bytes>\"}: %v", err))
			return
		}
		if req.Op == opList {
			httpapi.WriteError(w, httpapi.Invalid("op", "list is GET /v1/cluster/keys"))
			return
		}
	}
	key, e := parseRequest(req)
	if e != nil {
		httpapi.WriteError(w, e)
		return
	}
	kr := s.cfg.Keyring()
	if kr == nil {
		httpapi.WriteError(w, httpapi.Invalid("op", "a standalone node has no gossip keys"))
		return
	}
	if _, err := kr.Keys(); err != nil {
		httpapi.WriteError(w, &httpapi.Error{Code: httpapi.CodeConflict, Message: err.Error() + " (started with --insecure-cluster): there is no keyring to change"})
		return
	}
	ctx := r.Context()
	if req.Op == opUse || req.Op == opRemove {
		// Check first, on every live member: a key used before everyone has
		// it, or removed while someone still sends with it, cuts members off.
		before := s.everywhere(ctx, kr, request{Op: opList})
		if len(before.Failed) > 0 {
			httpapi.WriteError(w, &httpapi.Error{Code: httpapi.CodeUnavailable, Message: "not every live member answered; nothing was changed: " + failedText(before.Failed)})
			return
		}
		fp := gossip.KeyFingerprint(key)
		for _, name := range slices.Sorted(maps.Keys(before.rings)) {
			k := before.rings[name]
			switch {
			case req.Op == opUse && !slices.Contains(k.Keys, fp):
				httpapi.WriteError(w, &httpapi.Error{Code: httpapi.CodeConflict, Field: "key", Message: fmt.Sprintf("%s has not installed this key; install it first (chime cluster keys install)", name)})
				return
			case req.Op == opRemove && k.Primary == fp:
				httpapi.WriteError(w, &httpapi.Error{Code: httpapi.CodeConflict, Field: "key", Message: fmt.Sprintf("%s still uses this key; use another first (chime cluster keys use)", name)})
				return
			}
		}
	}
	res := s.everywhere(ctx, kr, req)
	if req.Op != opList {
		s.cfg.Log.Warn("gossip keyring changed by an operator", "op", req.Op, "key", gossip.KeyFingerprint(key),
			"answered", res.Answered, "failed", len(res.Failed))
	}
	httpapi.WriteJSON(w, http.StatusOK, res.Answer)
}

// parseRequest checks a key request and decodes its key (nil for list).
func parseRequest(req request) ([]byte, *httpapi.Error) {
	switch req.Op {
	case opList:
		if req.Key != "" {
			return nil, httpapi.Invalid("key", "list takes no key")
		}
		return nil, nil
	case opInstall, opUse, opRemove:
	default:
		return nil, httpapi.Invalid("op", "unknown key operation %q: want install, use or remove", req.Op)
	}
	key, err := gossip.ParseSecretKey(req.Key)
	if err != nil || key == nil {
		return nil, httpapi.Invalid("key", "want the base64 of a 32-byte key (openssl rand -base64 32)")
	}
	return key, nil
}

// result is an Answer with every member's keyring.
type result struct {
	Answer
	rings map[string]MemberKeys
}

// everywhere runs req on every live member of the view, this node
// included, in parallel, and sums up their keyrings.
func (s *Service) everywhere(ctx context.Context, kr Keyring, req request) result {
	members := s.cfg.Members()
	res := result{Answer: Answer{Op: req.Op, Members: len(members), Failed: map[string]string{}}, rings: map[string]MemberKeys{}}
	body, _ := json.Marshal(req)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, m := range members {
		if !m.Up() && m.Name != s.cfg.Self {
			res.Down = append(res.Down, m.Name)
			continue
		}
		wg.Go(func() {
			k, err := s.on(ctx, kr, m, req, body)
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

// on runs req on member m: on this node (keyring kr) directly, on another
// over a signed internal call.
func (s *Service) on(ctx context.Context, kr Keyring, m gossip.Member, req request, body []byte) (MemberKeys, error) {
	if m.Name == s.cfg.Self {
		key, _ := parseRequest(req)
		if err := apply(kr, req.Op, key); err != nil {
			return MemberKeys{}, err
		}
		return fingerprints(kr)
	}
	if m.Meta.HTTPAddr == "" {
		return MemberKeys{}, errors.New("no HTTP address in its gossip meta")
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	status, answer, err := s.cfg.Call(ctx, m, body)
	switch {
	case err != nil:
		return MemberKeys{}, fmt.Errorf("unreachable: %w", err)
	case status != http.StatusOK:
		return MemberKeys{}, fmt.Errorf("answered %d: %.200s", status, answer)
	}
	var k MemberKeys
	if err := json.Unmarshal(answer, &k); err != nil || k.Primary == "" || len(k.Keys) > 64 {
		return MemberKeys{}, fmt.Errorf("answered a malformed keyring: %.200s", answer)
	}
	return k, nil
}

// HandleInternal serves POST /internal/v1/keys: it applies this member's
// part of a key operation and answers its keyring. The call is
// authenticated before its body is read.
func (s *Service) HandleInternal(w http.ResponseWriter, r *http.Request) {
	_, body, e := s.cfg.Authenticate(r, "keys", maxBody)
	if e != nil {
		httpapi.WriteError(w, e)
		return
	}
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		httpapi.WriteError(w, httpapi.Invalid("body", "keys: %v", err))
		return
	}
	key, e := parseRequest(req)
	if e != nil {
		httpapi.WriteError(w, e)
		return
	}
	kr := s.cfg.Keyring()
	if kr == nil {
		httpapi.WriteError(w, &httpapi.Error{Code: httpapi.CodeNotFound, Message: "not a cluster member"})
		return
	}
	if err := apply(kr, req.Op, key); err != nil {
		httpapi.WriteError(w, &httpapi.Error{Code: httpapi.CodeConflict, Field: "key", Message: err.Error()})
		return
	}
	k, err := fingerprints(kr)
	if err != nil {
		httpapi.WriteError(w, &httpapi.Error{Code: httpapi.CodeConflict, Message: err.Error()})
		return
	}
	if req.Op != opList {
		s.cfg.Log.Warn("gossip keyring changed", "op", req.Op, "key", gossip.KeyFingerprint(key), "primary", k.Primary, "keys", len(k.Keys))
	}
	httpapi.WriteJSON(w, http.StatusOK, k)
}

// apply applies op with key to kr.
func apply(kr Keyring, op string, key []byte) error {
	switch op {
	case opInstall:
		return kr.InstallKey(key)
	case opUse:
		return kr.UseKey(key)
	case opRemove:
		return kr.RemoveKey(key)
	}
	return nil
}

// fingerprints is kr by fingerprint.
func fingerprints(kr Keyring) (MemberKeys, error) {
	k, err := kr.Keys()
	if err != nil {
		return MemberKeys{}, err
	}
	out := MemberKeys{Primary: gossip.KeyFingerprint(k.Primary)}
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
