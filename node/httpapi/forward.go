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
	"github.com/oklog/ulid/v2"
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

// withID returns the JSON object raw with "id":id as its first member and
// any "id" raw had (null or "": the caller generated id for it) left out:
// the owner refuses a field given twice. raw is a valid JSON object.
func withID(raw []byte, id string) []byte {
	sc := jsonScan{data: bytes.TrimSpace(raw)}
	out := make([]byte, 0, len(raw)+len(id)+8)
	out = append(out, `{"id":`...)
	out = strconv.AppendQuote(out, id) // ids are [A-Za-z0-9._:-{}]: no escapes
	// A member's text starts after '{' or after the value before it.
	from := 1
	_ = sc.object(func(key []byte) *Error {
		sc.skipValue()
		member := bytes.TrimLeft(sc.data[from:sc.i], " \t\r\n,")
		from = sc.i
		if string(key) != "id" {
			out = append(out, ',')
			out = append(out, member...)
		}
		return nil
	})
	return append(out, '}')
}

// routeID returns the id of a batch's task read without decoding the task:
// its "id" (a new one when it has neither id nor flow_key, or "{key}<ulid>"
// for a flow_key alone; generated reports that), enough to send it to its
// slot's owner, which decodes and validates it. A batch's tasks are decoded
// once, by their owner, not once by the node they reach and again by the
// owner. ok is false when the task must be decoded here: an id or flow_key
// that is not a plain valid string, one given twice, or an id the flow_key
// does not match (the decode reports why). raw is valid JSON (the batch
// envelope was decoded).
func routeID(raw []byte) (id string, generated, ok bool) {
	sc := jsonScan{data: raw}
	if sc.peek() != '{' {
		return "", false, false
	}
	var idRaw, keyRaw []byte
	var seenID, seenKey bool
	plain := func(dst *[]byte, seen *bool) *Error {
		if *seen || sc.peek() != '"' {
			return errNotRoutable
		}
		start := sc.i
		sc.skipString()
		v := raw[start+1 : sc.i-1]
		if bytes.IndexByte(v, '\\') >= 0 {
			return errNotRoutable
		}
		*dst, *seen = v, true
		return nil
	}
	e := sc.object(func(key []byte) *Error {
		switch string(key) {
		case "id":
			return plain(&idRaw, &seenID)
		case "flow_key":
			return plain(&keyRaw, &seenKey)
		}
		sc.skipValue()
		return nil
	})
	if e != nil {
		return "", false, false
	}
	key := string(keyRaw)
	if seenKey && validateFlowKey("flow_key", key) != nil {
		return "", false, false
	}
	if seenID {
		id = string(idRaw)
		if id == "" || validateID(id) != nil || (seenKey && slots.HashKey(id) != key) {
			return "", false, false
		}
		return id, false, true
	}
	if !seenKey {
		return ulid.Make().String(), true, true
	}
	if id = "{" + key + "}" + ulid.Make().String(); len(id) > maxIDLen {
		return "", false, false
	}
	return id, true, true
}

// errNotRoutable stops routeID's walk.
var errNotRoutable = &Error{Code: CodeInvalidArgument}

// splitBatch forwards the tasks of a batch whose slots other nodes own in
// v, one sub-batch per owner in parallel, and takes them out of tasks (nil)
// so the caller stores only its own. routed[i] marks a task not decoded
// here (routeID): its id is results[i].ID, and v has an owner of its slot
// other than this node. Their results land in results (same index) by the
// time the returned wg is done. raws are the tasks' JSON objects, with
// generated ids filled in.
func (s *Server) splitBatch(r *http.Request, v View, reqBody []byte, raws []json.RawMessage, routed []bool, tasks []*storage.Task, results []BatchResult) *remoteBatch {
	rb := &remoteBatch{}
	groups := map[string][]int{}
	owners := map[string]ring.Member{}
	for i, t := range tasks {
		var slot uint16
		switch {
		case routed[i]:
			slot = slots.Of(results[i].ID)
		case t == nil || v.Owns(t.Slot):
			continue
		default:
			slot = t.Slot
		}
		o, ok := v.Owner(slot)
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
