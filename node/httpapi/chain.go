package httpapi

// This file validates and builds chains (API.md "Chains"): a task's
// on_success and on_failure lists of task bodies, created when one of its
// fires finishes with that outcome. Each child is validated exactly like a
// create, its errors named by their path ("on_success[2].callback_url").

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"

	"github.com/chime-scheduler/chime/slots"
	"github.com/chime-scheduler/chime/storage"
)

// Chain limits (API.md "Chains").
const (
	// MaxChainChildren bounds each of on_success and on_failure.
	MaxChainChildren = 16
	// MaxChainDepth bounds how deep chains nest: a top-level task's
	// children are at depth 1, and a child at depth MaxChainDepth has no
	// chains of its own.
	MaxChainDepth = 4
	// maxChainBytes bounds the JSON of a task's chains, all levels
	// together: they live in the task's record.
	maxChainBytes = 256 << 10
)

// chainURL is a child's callback URL with the path of its field, for the
// node's callback address check.
type chainURL struct {
	field, url string
}

// prefixed returns e with its field put under path ("on_success[2]" and
// "callback_url" give "on_success[2].callback_url").
func prefixed(path string, e *Error) *Error {
	c := *e
	if c.Field == "" {
		c.Field = path
	} else {
		c.Field = path + "." + c.Field
	}
	return &c
}

// validateChains checks payload_from_parent, on_success and on_failure of
// a task at depth (0 for a request's own task) and fills the chains into
// spec, each child's body compacted. now is the request time; every child
// is validated against it like a create, and its callback URL (with those
// of its own children) is collected into r.chainURLs.
func (r *TaskRequest) validateChains(now time.Time, lim Limits, depth int, spec *storage.Spec) *Error {
	if r.PayloadFromParent != nil && *r.PayloadFromParent {
		if depth == 0 {
			return Invalid("payload_from_parent", "applies only to a task in on_success or on_failure")
		}
		if spec.Payload != nil {
			return Invalid("payload_from_parent", "a task takes payload or payload_from_parent, not both")
		}
	}
	r.chainURLs = nil
	total := 0
	for _, list := range []struct {
		name   string
		bodies []json.RawMessage
		out    *[][]byte
	}{{"on_success", r.OnSuccess, &spec.OnSuccess}, {"on_failure", r.OnFailure, &spec.OnFailure}} {
		if len(list.bodies) == 0 {
			continue
		}
		if depth >= MaxChainDepth {
			return Invalid(list.name, "chains nest at most %d deep; this task is at depth %d", MaxChainDepth, depth)
		}
		if len(list.bodies) > MaxChainChildren {
			return Invalid(list.name, "at most %d tasks allowed, got %d", MaxChainChildren, len(list.bodies))
		}
		out := make([][]byte, 0, len(list.bodies))
		for i, raw := range list.bodies {
			path := list.name + "[" + strconv.Itoa(i) + "]"
			if string(bytes.TrimSpace(raw)) == "null" {
				return Invalid(path, "must be a task object")
			}
			child, e := decodeTaskRequest(raw)
			if e != nil {
				return prefixed(path, e)
			}
			id, cs, e := child.validateAt(now, lim, depth+1)
			if e != nil {
				return prefixed(path, e)
			}
			if _, e := newTask(id, cs, now); e != nil {
				return prefixed(path, e)
			}
			r.chainURLs = append(r.chainURLs, chainURL{path + ".callback_url", cs.CallbackURL})
			if cs.AckURL != "" {
				r.chainURLs = append(r.chainURLs, chainURL{path + ".ack_url", cs.AckURL})
			}
			for _, u := range child.chainURLs {
				r.chainURLs = append(r.chainURLs, chainURL{path + "." + u.field, u.url})
			}
			var buf bytes.Buffer
			if err := json.Compact(&buf, raw); err != nil {
				return Invalid(path, "malformed JSON: %v", err) // decoded already: cannot happen
			}
			total += buf.Len()
			if total > maxChainBytes {
				return &Error{Code: CodeTooLarge, Field: list.name, Status: 400,
					Message: "on_success and on_failure together are over " + strconv.Itoa(maxChainBytes) + " bytes of JSON"}
			}
			out = append(out, buf.Bytes())
		}
		*list.out = out
	}
	return nil
}

// ChildID is the id of the child at index of a chain of the task parent,
// for its fire seq: the id its body gives, else "<parent>.<seq>.<index>".
// A default id longer than a task id may be (128 bytes) keeps its suffix
// and replaces the parent's id with a hash of it, so it stays unique and
// the same at every repeat.
//
// A child with a flow_key and no id gets the key as its id's hash tag
// (API.md "Flow keys"): the parent's default id when its tag is the key
// already, else "{key}h<hash of the parent's id>.<seq>.<index>".
func ChildID(body []byte, parent string, seq uint64, index int) string {
	var b struct {
		ID      string `json:"id"`
		FlowKey string `json:"flow_key"`
	}
	if json.Unmarshal(body, &b) == nil && b.ID != "" {
		return b.ID
	}
	suffix := "." + strconv.FormatUint(seq, 10) + "." + strconv.Itoa(index)
	if len(parent)+len(suffix) <= maxIDLen && (b.FlowKey == "" || slots.HashKey(parent+suffix) == b.FlowKey) {
		return parent + suffix
	}
	sum := sha256.Sum256([]byte(parent))
	if b.FlowKey != "" {
		return "{" + b.FlowKey + "}h" + hex.EncodeToString(sum[:8]) + suffix
	}
	return "h" + hex.EncodeToString(sum[:16]) + suffix
}

// ChildTask builds the record of a chain's child (API.md "Chains"): body
// is its create body as stored in the parent's spec, validated again like
// a create as of at, the instant the parent's fire finished, so its
// delay_ms counts from then; id is its id (ChildID); result is the
// parent's response body (its kept part), the child's payload when the
// body asks for payload_from_parent: as it is when it is JSON, else as a
// JSON string, and none when empty. The parent link is the caller's.
func ChildTask(body []byte, id string, result []byte, at time.Time, lim Limits) (*storage.Task, *Error) {
	req, e := decodeTaskRequest(body)
	if e != nil {
		return nil, e
	}
	req.ID = id
	// Depth 1: the body was checked at its real depth when its parent was
	// written; its own chains are at most as deep as they were then.
	id, spec, e := req.validateAt(at, lim.withDefaults(), 1)
	if e != nil {
		return nil, e
	}
	if req.PayloadFromParent != nil && *req.PayloadFromParent && len(result) > 0 {
		if json.Valid(result) {
			spec.Payload = bytes.Clone(result)
		} else {
			spec.Payload, _ = json.Marshal(resultText(result))
		}
	}
	t, e := newTask(id, spec, at)
	if e != nil {
		return nil, e
	}
	t.Status, _ = req.initialStatus()
	return t, nil
}
