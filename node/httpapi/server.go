// Package httpapi is the HTTP edge of a Chime node (docs/API.md): routing,
// the edge checks (Host, bearer tokens, Content-Type), request decoding and
// validation, the JSON shapes and the error shape, forwarding a request to
// the owner of its task's slot, and the cluster-wide listing.
//
// It knows the node only through Backend, a small interface of plain
// methods (create, get, delete, pause, list, …) that act on the node's own
// store, and through the handlers of Config.Handlers for the endpoints the
// node serves itself (gossip keys, backup, metrics, the calls between
// nodes). Package node implements Backend and wires the server in New; the
// API's tests run against a fake.
package httpapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/chime-scheduler/chime/client/signature"
	"github.com/chime-scheduler/chime/node/clock"
	"github.com/chime-scheduler/chime/ring"
	"github.com/chime-scheduler/chime/storage"
)

// Backend is the node as the API sees it. The task methods act on this
// node's own store: the server has routed the request to the owner of the
// task's slot before it calls them. An error that is not an *Error is
// answered 500 internal.
type Backend interface {
	// Now is the node's clock.
	Now() time.Time
	// View is the cluster as the node sees it now.
	View() View
	// Stopped is the answer to a /v1/ request while the node is not
	// running, nil while it runs.
	Stopped() *Error
	// Overloaded refuses new work while the callback backlog is full.
	Overloaded() *Error
	// CheckCallback checks a callback URL against the node's address
	// policy.
	CheckCallback(url string) error

	// Write stores t, a new task (put false: an existing id is a
	// conflict) or a new or replaced one (put true). now is the request's
	// time. created reports a new task; out is the stored record.
	Write(ctx context.Context, t *storage.Task, put bool, now time.Time) (out *storage.Task, created bool, err error)
	// CreateBatch stores the non-nil tasks as new ones in one write and
	// returns each one's refusal (nil: created), or err when nothing was
	// acknowledged.
	CreateBatch(ctx context.Context, tasks []*storage.Task, now time.Time) (errs []*Error, err error)
	// Get returns task id (ErrNotFound when there is none).
	Get(ctx context.Context, id string) (*storage.Task, error)
	// Delete deletes task id.
	Delete(ctx context.Context, id string) error
	// Pause, Resume and Trigger change task id and return it.
	Pause(ctx context.Context, id string) (*storage.Task, error)
	Resume(ctx context.Context, id string) (*storage.Task, error)
	// Trigger's dueAt (Unix ns, 0 = the request time) is the fire's
	// X-Chime-Due-At.
	Trigger(ctx context.Context, id string, dueAt int64) (*storage.Task, error)
	// Backfill queues the fires of task id's occurrences in [from, to]
	// (Unix ns; API.md "Backfill").
	Backfill(ctx context.Context, id string, from, to int64) (*storage.Task, BackfillResult, error)
	// Retry fires the failed task id again now, as a new fire (a conflict
	// for any other status).
	Retry(ctx context.Context, id string) (*storage.Task, error)
	// RecentExecutions returns the node's newest executions matching q in
	// the slots it owns, newest first, and whether more match.
	RecentExecutions(q storage.ExecQuery) ([]storage.LoggedExecution, bool, error)
	// Executions returns the last limit execution records of task id,
	// newest first (ErrNotFound when there is no such task).
	Executions(ctx context.Context, id string, limit int) ([]storage.Execution, error)
	// CountDue counts the due index of the slots the node owns
	// (the store's CountDue): GET /v1/stats/due.
	CountDue(q storage.DueCountQuery) (storage.DueCounts, error)
	// DueVersion changes whenever what CountDue counts may have: a write
	// to the store or a new view (GET /v1/stats/due reuses a count while
	// it stands).
	DueVersion() uint64
	// ScanTasks calls f with the stored tasks from position from on, in
	// key order (slot, then id), until f returns false.
	ScanTasks(from storage.Position, f func(*storage.Task) bool) error

	// PutFlow creates or replaces flow f (Key, Slot and limits set; the
	// server routed it to the owner of f.Slot) and returns the stored one.
	PutFlow(ctx context.Context, f *storage.Flow) (out *storage.Flow, created bool, err error)
	// GetFlow returns flow key with its limiter's state (ErrFlowNotFound
	// when there is none).
	GetFlow(ctx context.Context, key string) (FlowState, error)
	// DeleteFlow deletes flow key (ErrFlowNotFound when there is none).
	DeleteFlow(ctx context.Context, key string) error
	// ScanFlows calls f with the stored flows from position from on, in
	// (slot, key) order, in the slots owned reports true for (nil: all),
	// until f returns false.
	ScanFlows(from storage.Position, owned func(uint16) bool, f func(*storage.Flow) bool) error

	// Cluster describes the cluster as the node sees it (GET /v1/cluster),
	// each member's slot ranges too if ranges.
	Cluster(ranges bool) Cluster
	// SlotEpoch returns slot s's epoch as this node knows it (it owns or
	// follows s), 0 when it does not (GET /v1/cluster/slots).
	SlotEpoch(s uint16) uint64
	// Forget declares the dead member name gone for good.
	Forget(name string) error
	// Readiness reports whether the node is ready, why not (reason), and
	// the safety net's findings (degraded, also on a ready node).
	Readiness() (ready bool, reason string, degraded []string)

	// Hops returns how often r was forwarded already (0 unless it is a
	// signed call from a member). body is r's body, already read.
	Hops(r *http.Request, body []byte) int
	// Forward sends a request to member to, signed, with hop as its hop
	// count, and returns the answer. Errors are transport failures and
	// timeouts.
	Forward(ctx context.Context, to ring.Member, method, uri string, body []byte, hdr http.Header, hop int) (Answer, error)
	// Authenticate checks that r is a signed call from a member (the
	// /internal/ endpoints); endpoint names it in metrics.
	Authenticate(r *http.Request, endpoint string) *Error
}

// View is one immutable view of the cluster's slot table.
type View interface {
	// Owns reports whether this node owns slot s.
	Owns(s uint16) bool
	// Owner returns the owner of slot s (false: nobody owns it yet).
	Owner(s uint16) (ring.Member, bool)
	// Follower returns the follower of slot s (false: none).
	Follower(s uint16) (ring.Member, bool)
	// Members are the members that hold slots.
	Members() []ring.Member
	// Version identifies the slot table (X-Chime-Table-Version): equal on
	// the nodes that computed the same table.
	Version() uint64
}

// Answer is another node's answer to a forwarded request: its status, the
// headers relayed to clients, and its body.
type Answer struct {
	Status int
	Header http.Header
	Body   []byte
}

// Config is what the server needs of the node's configuration.
type Config struct {
	// Name is the node's member name: X-Chime-Node on every answer and the
	// owner in task answers.
	Name string
	// HTTPAddr and PublicHosts are the Host names, besides loopback, that
	// a node without APIToken answers (edge.go).
	HTTPAddr    string
	PublicHosts []string
	// APIToken and ReadToken are the bearer tokens (edge.go).
	APIToken, ReadToken string
	Limits              Limits
	// HistoryLimit bounds GET /v1/tasks/{id}/executions?limit=.
	HistoryLimit int
	// Clustered makes GET /v1/tasks list over every member, and a batch
	// read each task's id to route it before decoding it.
	Clustered bool
	// DueScanKeys is the key budget of this node's part of
	// GET /v1/stats/due (0: DefaultDueScanKeys).
	DueScanKeys int
	// SigningKeys are the callback signing keys, current first, that
	// POST /v1/test/callback checks signatures with.
	SigningKeys [][]byte
	// Forwarded, when set, counts each request forwarded to an owner by
	// outcome.
	Forwarded func(ok bool)
	// Handlers serve the endpoints the node answers itself.
	Handlers Handlers
	// Clock is the node's clock (POST /v1/test/callback's delay and
	// signature check); nil means clock.Real.
	Clock clock.Clock
}

// Handlers are the endpoints the node serves itself, behind the server's
// edge checks. A nil one answers 404.
type Handlers struct {
	Keys         http.HandlerFunc // GET and POST /v1/cluster/keys
	Stats        http.HandlerFunc // GET /v1/stats
	Snapshot     http.HandlerFunc // GET /v1/snapshot
	Backup       http.HandlerFunc // GET /v1/admin/backup
	Metrics      http.HandlerFunc // GET /metrics
	Replicate    http.HandlerFunc // POST /internal/v1/replicate
	Ctl          http.HandlerFunc // POST /internal/v1/ctl
	AntiEntropy  http.HandlerFunc // POST /internal/v1/antientropy
	SlotDebug    http.HandlerFunc // GET /internal/v1/slots/{slot}
	Member       http.HandlerFunc // GET /internal/v1/member
	Run          http.HandlerFunc // GET /internal/v1/run
	InternalKeys http.HandlerFunc // POST /internal/v1/keys
	Chain        http.HandlerFunc // POST /internal/v1/chain
}

// Server is the HTTP API of one node.
type Server struct {
	cfg     Config
	b       Backend
	tokens  apiTokens // the bearer tokens (edge.go)
	guard   hostGuard // the Host check (edge.go)
	handler http.Handler
	due     dueCache // GET /v1/stats/due's recent counts (due.go)
}

// New builds the API of the node b with cfg.
func New(cfg Config, b Backend) *Server {
	cfg.Clock = clock.Or(cfg.Clock)
	cfg.Limits = cfg.Limits.withDefaults()
	s := &Server{cfg: cfg, b: b, tokens: newAPITokens(cfg.APIToken, cfg.ReadToken),
		guard: newHostGuard(cfg.APIToken, cfg.HTTPAddr, cfg.PublicHosts)}
	s.handler = s.withCommon(s.routes())
	return s
}

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// routes builds the HTTP API of API.md.
func (s *Server) routes() http.Handler {
	h := s.cfg.Handlers
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/tasks", s.handleCreate)
	mux.HandleFunc("GET /v1/tasks", s.handleList)
	mux.HandleFunc("POST /v1/tasks:batch", s.handleBatch)
	mux.HandleFunc("PUT /v1/tasks/{id}", s.handlePut)
	mux.HandleFunc("GET /v1/tasks/{id}", s.handleGet)
	mux.HandleFunc("DELETE /v1/tasks/{id}", s.handleDelete)
	mux.HandleFunc("POST /v1/tasks/{id}/pause", s.handleOne(Backend.Pause, http.StatusOK))
	mux.HandleFunc("POST /v1/tasks/{id}/resume", s.handleOne(Backend.Resume, http.StatusOK))
	mux.HandleFunc("POST /v1/tasks/{id}/trigger", s.handleTrigger)
	mux.HandleFunc("POST /v1/tasks/{id}/backfill", s.handleBackfill)
	mux.HandleFunc("GET /v1/tasks/{id}/executions", s.handleExecutions)
	mux.HandleFunc("POST /v1/tasks/{id}/retry", s.handleOne(Backend.Retry, http.StatusOK))
	mux.HandleFunc("POST /v1/tasks:retry", s.handleRetryMany)
	mux.HandleFunc("GET /v1/executions", s.handleExecLog)
	mux.HandleFunc("GET /v1/flows", s.handleFlowList)
	mux.HandleFunc("PUT /v1/flows/{key}", s.handleFlowPut)
	mux.HandleFunc("GET /v1/flows/{key}", s.handleFlowGet)
	mux.HandleFunc("DELETE /v1/flows/{key}", s.handleFlowDelete)
	mux.HandleFunc("GET /v1/tasks/{id}/preview", s.handleTaskPreview)
	mux.HandleFunc("GET /v1/schedule:preview", s.handleSchedulePreview)
	mux.HandleFunc("GET /v1/cluster", s.handleCluster)
	mux.HandleFunc("GET /v1/cluster/slots", s.handleSlots)
	mux.HandleFunc("POST /v1/cluster/members/{name}/forget", s.handleForget)
	mux.HandleFunc("GET /v1/cluster/keys", orNotFound(h.Keys))
	mux.HandleFunc("POST /v1/cluster/keys", orNotFound(h.Keys))
	mux.HandleFunc("GET /v1/stats", orNotFound(h.Stats))
	mux.HandleFunc("GET /v1/stats/due", s.handleDue)
	mux.HandleFunc("GET /v1/snapshot", orNotFound(h.Snapshot))
	mux.HandleFunc("GET /v1/admin/backup", orNotFound(h.Backup))
	mux.HandleFunc("POST /v1/test/callback", s.handleTestCallback)
	mux.HandleFunc("GET /v1/openapi.yaml", handleOpenAPI)
	mux.HandleFunc("GET /healthz", handleHealth)
	mux.HandleFunc("GET /readyz", s.handleReady)
	mux.HandleFunc("GET /metrics", orNotFound(h.Metrics))
	mux.HandleFunc("GET /internal/v1/tasks", s.handleInternalList)
	mux.HandleFunc("GET /internal/v1/executions", s.handleInternalExecLog)
	mux.HandleFunc("GET /internal/v1/flows", s.handleInternalFlows)
	mux.HandleFunc("GET /internal/v1/stats/due", s.handleInternalDue)
	mux.HandleFunc("POST /internal/v1/replicate", orNotFound(h.Replicate))
	mux.HandleFunc("POST /internal/v1/ctl", orNotFound(h.Ctl))
	mux.HandleFunc("POST /internal/v1/antientropy", orNotFound(h.AntiEntropy))
	mux.HandleFunc("GET /internal/v1/slots/{slot}", orNotFound(h.SlotDebug))
	mux.HandleFunc("GET /internal/v1/member", orNotFound(h.Member))
	mux.HandleFunc("GET /internal/v1/run", orNotFound(h.Run))
	mux.HandleFunc("POST /internal/v1/keys", orNotFound(h.InternalKeys))
	mux.HandleFunc("POST /internal/v1/chain", orNotFound(h.Chain))
	// Anything else under /v1/ (an unknown path, or a known path with the
	// wrong method) gets a JSON error rather than the mux's plain text.
	for _, p := range []string{"/v1/", "/v1/tasks", "/v1/tasks:batch", "/v1/tasks:retry", "/v1/executions", "/v1/tasks/{id}", "/v1/tasks/{id}/{action}",
		"/v1/flows", "/v1/flows/{key}"} {
		mux.HandleFunc(p, handleNoRoute)
	}
	return mux
}

// orNotFound returns h, or for a nil h a handler that answers 404.
func orNotFound(h http.HandlerFunc) http.HandlerFunc {
	if h != nil {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, &Error{Code: CodeNotFound, Message: "this node does not serve " + r.URL.Path})
	}
}

// withCommon names the node and its slot table version on every answer and
// runs the edge checks (edge.go): Host, bearer token and role, Content-Type.
func (s *Server) withCommon(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Chime-Node", s.cfg.Name)
		w.Header().Set(HeaderTableVersion, tableVersion(s.b.View()))
		r, e := s.checkEdge(r)
		if e != nil {
			if e.Code == CodeUnauthenticated {
				w.Header().Set("WWW-Authenticate", `Bearer realm="chime"`)
			}
			WriteError(w, e)
			return
		}
		if strings.HasPrefix(r.URL.Path, "/v1/") {
			if e := s.b.Stopped(); e != nil {
				WriteError(w, e)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func handleNoRoute(w http.ResponseWriter, r *http.Request) {
	if (strings.HasPrefix(r.URL.Path, "/v1/tasks") && r.URL.Path != "/v1/tasks/") ||
		(strings.HasPrefix(r.URL.Path, "/v1/flows") && r.URL.Path != "/v1/flows/") {
		WriteError(w, &Error{Code: CodeInvalidArgument, Status: http.StatusMethodNotAllowed,
			Message: "method " + r.Method + " is not allowed on " + r.URL.Path})
		return
	}
	WriteError(w, &Error{Code: CodeNotFound, Message: "no such endpoint: " + r.URL.Path})
}

// ReadBody reads a request body of at most limit bytes.
func ReadBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *Error) {
	rd := http.MaxBytesReader(w, r.Body, limit)
	var (
		body []byte
		err  error
	)
	if n := r.ContentLength; n > 0 && n <= limit {
		// Its length is announced and within the limit: room for it at
		// once, where io.ReadAll grows from 512 bytes by copying (a batch
		// of 1,000 tasks, ~200 KB, ten times). At most 1 MiB before the
		// bytes arrive: an announced length is only a claim.
		buf := bytes.NewBuffer(make([]byte, 0, min(n, 1<<20)+bytes.MinRead))
		_, err = buf.ReadFrom(rd)
		body = buf.Bytes()
	} else {
		body, err = io.ReadAll(rd)
	}
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, &Error{Code: CodeTooLarge, Message: "request body is over " + strconv.FormatInt(limit, 10) + " bytes"}
		}
		return nil, &Error{Code: CodeInvalidArgument, Message: "reading the body: " + err.Error()}
	}
	return body, nil
}

// JSON serves what get returns as a 200 JSON answer, or its error.
func JSON[T any](get func(ctx context.Context) (T, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, err := get(r.Context())
		if err != nil {
			WriteError(w, AsError(err))
			return
		}
		WriteJSON(w, http.StatusOK, v)
	}
}

func handleHealth(w http.ResponseWriter, _ *http.Request) {
	WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// handleReady answers 200 {"status":"ready"} on a ready healthy node, 200
// {"status":"degraded","reasons":[...]} on a ready node the safety net
// flags (overdue tasks), and 503 with the error shape, plus "status" and
// "reasons", while it is not ready: loading, joining, taking slots over,
// or owning slots it does not fire (stalled ones among the reasons).
func (s *Server) handleReady(w http.ResponseWriter, _ *http.Request) {
	ready, reason, reasons := s.b.Readiness()
	if !ready {
		msg := reason
		status := "not_ready"
		if len(reasons) > 0 {
			status, msg = "degraded", msg+"; "+strings.Join(reasons, "; ")
		}
		w.Header().Set("Retry-After", "1")
		WriteJSON(w, http.StatusServiceUnavailable, map[string]any{"status": status, "reasons": append([]string{reason}, reasons...),
			"error": &Error{Code: CodeUnavailable, Message: msg}})
		return
	}
	if len(reasons) > 0 {
		WriteJSON(w, http.StatusOK, map[string]any{"status": "degraded", "reasons": reasons})
		return
	}
	WriteJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// handleTestCallback is a built-in callback receiver for trying Chime
// without writing one: it answers ?status= (default 200) after ?delay_ms=
// (default 0, at most 60000) and echoes the fire's headers, and checks
// X-Chime-Signature with this node's signing keys ("signature": valid,
// invalid, expired, missing, or "no key" when the node has none). The
// verdict is reported, not enforced: the status stays ?status=.
func (s *Server) handleTestCallback(w http.ResponseWriter, r *http.Request) {
	status := http.StatusOK
	if v := r.URL.Query().Get("status"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 200 || n > 599 {
			WriteError(w, Invalid("status", "status must be an HTTP status code 200..599"))
			return
		}
		status = n
	}
	if v := r.URL.Query().Get("delay_ms"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 60000 {
			WriteError(w, Invalid("delay_ms", "delay_ms must be 0..60000"))
			return
		}
		select {
		case <-s.cfg.Clock.After(time.Duration(n) * time.Millisecond):
		case <-r.Context().Done():
			return
		}
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20+1))
	sig := signature.Invalid
	switch {
	case err != nil || len(body) > 1<<20:
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20)) // too large to check: invalid
	default:
		sig = signature.Verify(r.Header.Get(signature.Header), r.Header.Get("X-Chime-Fire-Id"), body, s.cfg.SigningKeys, s.cfg.Clock.Now(), signature.DefaultMaxAge)
	}
	WriteJSON(w, status, map[string]string{
		"task_id":   r.Header.Get("X-Chime-Task-Id"),
		"fire_id":   r.Header.Get("X-Chime-Fire-Id"),
		"due_at":    r.Header.Get("X-Chime-Due-At"),
		"attempt":   r.Header.Get("X-Chime-Attempt"),
		"signature": string(sig),
	})
}
