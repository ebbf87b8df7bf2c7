package httpapi

// This file forwards a request for a task to the owner of its slot (API.md
// "Routing"): every node serves the whole API. The transport, signed calls
// over keep-alive connections, is the node's (Backend.Forward).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"github.com/chime-scheduler/chime/ring"
	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

// maxHops bounds forwarding: a request is forwarded at most twice (a table
// change in flight can make the first owner wrong), then answered 503.
const maxHops = 2

// Relayed are the answer headers a forwarded answer keeps.
var Relayed = []string{"Content-Type", "Retry-After", "X-Chime-Node", "WWW-Authenticate"}

// ErrNoOwner answers a request for a slot no member owns yet.
var ErrNoOwner = &Error{Code: CodeUnavailable, Message: "no member owns this slot yet: the cluster is forming"}

// routed answers r, for task id, whose slot this node does not own in v,
// by forwarding it to the slot's owner (or refusing: no owner, hop limit,
// owner unreachable). body is the request body as it should reach the
// owner.
func (s *Server) routed(w http.ResponseWriter, r *http.Request, v View, id string, body []byte) {
	owner, ok := v.Owner(slots.Of(id))
	if !ok {
		WriteError(w, ErrNoOwner)
		return
	}
	s.forwardTo(w, r, owner, body)
}

// forwardTo relays r to owner and its answer back, naming the owner in
// X-Chime-Owner: the client's slot map sent it to the wrong node.
func (s *Server) forwardTo(w http.ResponseWriter, r *http.Request, owner ring.Member, body []byte) {
	hop := s.b.Hops(r, body)
	if hop >= maxHops {
		WriteError(w, &Error{Code: CodeUnavailable, Message: fmt.Sprintf(
			"not the owner after %d forwards (owner here: %s): the slot table is changing", hop, owner.Name)})
		return
	}
	c, err := s.b.Forward(r.Context(), owner, r.Method, r.URL.RequestURI(), body, r.Header, hop+1)
	s.forwarded(err == nil)
	if err != nil {
		WriteError(w, unreachable(owner, err))
		return
	}
	for _, k := range Relayed {
		if v := c.Header.Get(k); v != "" {
			w.Header().Set(k, v)
		}
	}
	w.Header().Set(HeaderOwner, owner.Name)
	w.WriteHeader(c.Status)
	_, _ = w.Write(c.Body)
}

// forwarded counts a forwarded request.
func (s *Server) forwarded(ok bool) {
	if s.cfg.Forwarded != nil {
		s.cfg.Forwarded(ok)
	}
}

// unreachable is the 503 for an owner that did not answer.
func unreachable(owner ring.Member, err error) *Error {
	msg := err.Error()
	if errors.Is(err, context.DeadlineExceeded) {
		msg = "timed out"
	}
	return &Error{Code: CodeUnavailable, Message: fmt.Sprintf("owner %s (%s) is unreachable: %s", owner.Name, owner.HTTPAddr, msg)}
}

// withID returns the JSON object raw with "id":id added as its first
// member. raw is a valid object without an id (the caller decoded it).
func withID(raw []byte, id string) []byte {
	raw = bytes.TrimSpace(raw)
	rest := bytes.TrimSpace(raw[1:]) // after '{'
	out := make([]byte, 0, len(raw)+len(id)+8)
	out = append(out, `{"id":`...)
	out = strconv.AppendQuote(out, id) // ids are [A-Za-z0-9._:-]: no escapes
	if len(rest) > 0 && rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, rest...)
}

// splitBatch forwards the tasks of a batch whose slots other nodes own, one
// sub-batch per owner in parallel, and takes them out of tasks (nil) so the
// caller stores only its own. Their results land in results (same index)
// by the time the returned wg is done. raws are the tasks' JSON
// objects, with generated ids filled in.
func (s *Server) splitBatch(r *http.Request, reqBody []byte, raws []json.RawMessage, tasks []*storage.Task, results []BatchResult) *remoteBatch {
	rb := &remoteBatch{}
	v := s.b.View()
	groups := map[string][]int{}
	owners := map[string]ring.Member{}
	for i, t := range tasks {
		if t == nil || v.Owns(t.Slot) {
			continue
		}
		o, ok := v.Owner(t.Slot)
		if !ok {
			results[i].Status, results[i].Error = ErrNoOwner.HTTPStatus(), ErrNoOwner
			tasks[i] = nil
			continue
		}
		groups[o.Name] = append(groups[o.Name], i)
		owners[o.Name] = o
		tasks[i] = nil
	}
	if len(groups) == 0 {
		return rb
	}
	hop := s.b.Hops(r, reqBody) // the whole request's count decides for every sub-batch
	for name, idx := range groups {
		owner := owners[name]
		fail := func(e *Error) {
			for _, i := range idx {
				results[i].Status, results[i].Error = e.HTTPStatus(), e
			}
		}
		if hop >= maxHops {
			fail(&Error{Code: CodeUnavailable, Message: fmt.Sprintf(
				"not the owner after %d forwards (owner here: %s): the slot table is changing", hop, name)})
			continue
		}
		var body bytes.Buffer
		body.WriteString(`{"tasks":[`)
		for k, i := range idx {
			if k > 0 {
				body.WriteByte(',')
			}
			body.Write(raws[i])
		}
		body.WriteString("]}")
		rb.n++
		rb.wg.Go(func() {
			c, err := s.b.Forward(r.Context(), owner, http.MethodPost, "/v1/tasks:batch", body.Bytes(), r.Header, hop+1)
			s.forwarded(err == nil)
			if err != nil {
				fail(unreachable(owner, err))
				return
			}
			if c.Status != http.StatusOK {
				var eb struct {
					Error *Error `json:"error"`
				}
				if json.Unmarshal(c.Body, &eb) != nil || eb.Error == nil {
					eb.Error = &Error{Code: CodeInternal, Message: fmt.Sprintf("owner %s answered %d", name, c.Status)}
				}
				eb.Error.Status = c.Status
				fail(eb.Error)
				return
			}
			var ans struct {
				Results []BatchResult `json:"results"`
			}
			if err := json.Unmarshal(c.Body, &ans); err != nil || len(ans.Results) != len(idx) {
				fail(&Error{Code: CodeInternal, Message: fmt.Sprintf("owner %s answered a malformed batch result", name)})
				return
			}
			for k, i := range idx {
				res := ans.Results[k]
				res.Index = i
				results[i] = res
			}
		})
	}
	return rb
}

// remoteBatch is the part of a batch forwarded to other nodes.
type remoteBatch struct {
	n  int // sub-batches sent
	wg sync.WaitGroup
}
