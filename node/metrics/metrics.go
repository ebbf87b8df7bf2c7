// Package metrics is the node's Prometheus collectors: what /metrics
// serves, and what the dashboard reads of the lateness histogram.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/chime-scheduler/chime/node/dispatch"
	"github.com/chime-scheduler/chime/ring/gossip"
)

// Metrics holds the node's Prometheus collectors, registered on a registry
// of the node's own (no global state, so several nodes share a process).
type Metrics struct {
	Reg     *prometheus.Registry
	Handler http.Handler // /metrics

	Created        prometheus.Counter
	Fires          *prometheus.CounterVec // by result: success, failure, gone
	FiresSuccess   prometheus.Counter
	FiresFailure   prometheus.Counter
	FiresGone      prometheus.Counter
	Retries        prometheus.Counter
	FireDeferred   prometheus.Counter
	FireHeld       prometheus.Counter
	FireUnacked    prometheus.Counter
	MisfireSkipped prometheus.Counter
	Expired        prometheus.Counter
	ChainRefused   prometheus.Counter
	Lateness       prometheus.Histogram
	Callback       prometheus.Histogram
	WheelSize      prometheus.Gauge
	LateLane       prometheus.Gauge
	ReadyLane      prometheus.Gauge
	Loaded         prometheus.Counter
	GroupTasks     prometheus.Histogram
	Commit         prometheus.Histogram
	Fsyncs         prometheus.Counter
	StartLag       *prometheus.HistogramVec
	// StartLagSync and StartLagDispatch are StartLag's "sync" and
	// "dispatch" stages.
	StartLagSync, StartLagDispatch prometheus.Observer

	SlotsOwned     prometheus.Gauge
	SlotsFollowing prometheus.Gauge
	Members        *prometheus.GaugeVec   // by status and state
	TableChanges   prometheus.Counter     // views built
	Forwarded      *prometheus.CounterVec // by result: ok, error
	Takeovers      prometheus.Counter

	AeChecks        *prometheus.CounterVec // by result: match, mismatch, not_comparable
	AeMatch         prometheus.Counter
	AeMismatch      prometheus.Counter
	AeNotComparable prometheus.Counter
	AeResyncs       prometheus.Counter
	// internalRejected counts calls between nodes refused, by endpoint
	// and reason (node/internalauth, wired in internal_wiring.go).
	InternalRejected *prometheus.CounterVec
	// callbacksDenied counts callback addresses the address policy refused
	// (dispatch.Policy), by stage: create (a task refused with 400) or dial (a
	// fire failed without being sent).
	CallbacksDenied *prometheus.CounterVec
	DeniedDial      prometheus.Counter
	// circuitOpen (0/1) and circuitHeld are the circuit breaker's state
	// and held fires per callback host (scheme://host:port), for the hosts
	// whose circuit has opened at least once.
	CircuitOpen  *prometheus.GaugeVec
	CircuitHeld  *prometheus.GaugeVec
	CircuitHolds prometheus.Counter
	// flowHolds counts fire starts held by a flow key's limits (node/flow).
	FlowHolds prometheus.Counter

	// noticesDelivered and noticesDropped count result callbacks
	// (notice.go); dropped by reason: overflow, attempts, gone, denied.
	NoticesDelivered prometheus.Counter
	NoticesDropped   *prometheus.CounterVec
}

// Gauges are read on scrape from the parts that own them.
type Gauges struct {
	StoreBytes    func() float64
	DispatchQueue func() float64
	DispatchRun   func() float64
	WriteQueue    func() float64
	ReplPending   func() float64
	ReplBehind    func() float64
	ReplUngranted func() float64
	Importing     func() float64
	Unavailable   func() float64
	TasksStored   func() float64
	Stalled       func() float64
	Overdue       func() float64
	StorageFailed func() float64
	Corrupt       func() float64
}

// New makes the collectors and registers them, with the gauges read on
// scrape from g, on a registry of their own.
func New(g Gauges) *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		Reg: reg,
		Created: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chime_tasks_created_total", Help: "Tasks created (acknowledged)."}),
		Fires: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chime_fires_total", Help: "Callback attempts finished, by result (success, failure, gone)."}, []string{"result"}),
		Retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chime_retries_total", Help: "Failed attempts that will be retried."}),
		FireDeferred: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chime_fires_deferred_total", Help: "Fire starts postponed because the dispatcher backlog was full."}),
		FireHeld: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chime_fires_held_total", Help: "Fire starts postponed 50 ms because the ownership loop had not yet renewed the slot's right to fire (its bound; a busy or stuck ownership step)."}),
		FireUnacked: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chime_fires_unacked_total", Help: "Fire starts postponed because the write that made the task due was not acknowledged yet (durable, and on the followers)."}),
		MisfireSkipped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chime_misfires_skipped_total", Help: "Periodic fires skipped by misfire=skip."}),
		ChainRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chime_chain_children_refused_total", Help: "Children of chains not created: their body was no longer valid at the parent's finish, or their id was taken."}),
		Expired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chime_tasks_expired_total", Help: "Final tasks deleted, with their executions, once their retention passed."}),
		Lateness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "chime_fire_lateness_seconds",
			Help:    "Time from a fire's due time to the start of its first attempt.",
			Buckets: []float64{.001, .002, .005, .01, .015, .02, .03, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}),
		Callback: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "chime_callback_duration_seconds",
			Help:    "Duration of one callback attempt.",
			Buckets: prometheus.ExponentialBuckets(.0005, 2, 16),
		}),
		WheelSize: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "chime_wheel_tasks", Help: "Tasks in the in-memory timing wheel."}),
		LateLane: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "chime_late_lane_tasks", Help: "Expired tasks due more than the late threshold ago, waiting in the loop's late lane for the writer."}),
		ReadyLane: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "chime_ready_lane_tasks", Help: "Expired tasks on time waiting in the loop's ready lane for room at the dispatcher."}),
		Loaded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chime_loader_tasks_total", Help: "Tasks moved from the due index into the wheel."}),
		StartLag: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "chime_fire_start_lag_seconds",
			Help:    "Where a first attempt's lateness arises: stage=loop (due to the wheel handing it over), stage=writer (handover to the intent being written), stage=sync (the intent's group committed to the attempt handed to the dispatcher: after the group's fsync when it holds an API write, at once when it holds only fire intents and results), stage=dispatch (handed over to a worker starting it).",
			Buckets: []float64{.001, .002, .005, .01, .015, .02, .03, .05, .1, .25, .5, 1},
		}, []string{"stage"}),
		Fsyncs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chime_fsyncs_total", Help: "WAL fsyncs (each makes every earlier write durable)."}),
		Commit: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "chime_write_commit_seconds",
			Help:    "Time to commit one write group to the store (before its fsync).",
			Buckets: prometheus.ExponentialBuckets(.0001, 2, 16),
		}),
		GroupTasks: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "chime_write_group_tasks",
			Help:    "Task writes per group commit (one fsync).",
			Buckets: prometheus.ExponentialBuckets(1, 4, 8),
		}),
	}
	m.SlotsOwned = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "chime_slots_owned", Help: "Slots this node owns in its current view."})
	m.SlotsFollowing = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "chime_slots_following", Help: "Slots this node follows in its current view."})
	m.Members = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "chime_members", Help: "Cluster members in this node's view, by liveness status and lifecycle state."},
		[]string{"status", "state"})
	m.TableChanges = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "chime_table_changes_total", Help: "Membership changes that produced a new view of the slot table."})
	m.Forwarded = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "chime_forwarded_requests_total", Help: "API requests forwarded to the slot's owner, by result (ok, error: the owner could not be reached)."},
		[]string{"result"})
	m.Takeovers = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "chime_slot_takeovers_total", Help: "Slots this node started owning (at a new epoch) after a join, leave, drain or crash."})
	m.AeChecks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "chime_antientropy_checks_total", Help: "Slot checksums this node, as owner, had a replica compare, by result: match, mismatch, not_comparable (the replica was not at the same position)."},
		[]string{"result"})
	m.AeMatch = m.AeChecks.WithLabelValues("match")
	m.AeMismatch = m.AeChecks.WithLabelValues("mismatch")
	m.AeNotComparable = m.AeChecks.WithLabelValues("not_comparable")
	m.AeResyncs = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "chime_antientropy_resyncs_total", Help: "Replica copies of this node's slots that anti-entropy found different from its own and had resynced (a snapshot of the slot)."})
	m.InternalRejected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "chime_internal_rejected_total", Help: "Calls to /internal/v1/ endpoints refused, by endpoint and reason (unsigned, malformed, stale, misdirected, not_member, length_required, too_large, bad_mac, replayed, busy, bad_body)."},
		[]string{"endpoint", "reason"})
	m.CallbacksDenied = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "chime_callbacks_denied_total", Help: "Callback addresses refused by the address policy (--callback-allow, --callback-deny, --callback-deny-private and the built-in link-local/metadata/multicast rules), by stage: create (the task was refused with 400), dial (a fire failed without being sent)."},
		[]string{"stage"})
	m.DeniedDial = m.CallbacksDenied.WithLabelValues("dial")
	m.CallbacksDenied.WithLabelValues("create")
	reg.MustRegister(m.CallbacksDenied)
	m.CircuitOpen = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "chime_callback_circuit_open", Help: "1 while the circuit breaker of the callback host (scheme://host:port) is open or half-open (its fires are held), 0 once it closed again; only hosts whose circuit has opened."},
		[]string{"host"})
	m.CircuitHeld = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "chime_callback_circuit_held", Help: "Fires held (not attempted, no retry spent) by the open circuit of the callback host."},
		[]string{"host"})
	m.CircuitHolds = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "chime_callback_circuit_holds_total", Help: "Fire starts held back by an open circuit (a fire held across several probe times counts each time)."})
	reg.MustRegister(m.CircuitOpen, m.CircuitHeld, m.CircuitHolds)
	m.FlowHolds = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "chime_flow_holds_total", Help: "Fire starts held back by their flow key's rate or parallelism (a fire held several times counts each time)."})
	reg.MustRegister(m.FlowHolds)
	reg.MustRegister(m.SlotsOwned, m.SlotsFollowing, m.Members, m.TableChanges, m.Forwarded, m.Takeovers, m.AeChecks, m.AeResyncs, m.InternalRejected)
	m.StartLagSync = m.StartLag.WithLabelValues("sync")
	m.StartLagDispatch = m.StartLag.WithLabelValues("dispatch")
	m.FiresSuccess = m.Fires.WithLabelValues("success")
	m.FiresFailure = m.Fires.WithLabelValues("failure")
	m.FiresGone = m.Fires.WithLabelValues("gone")
	reg.MustRegister(m.Created, m.Fires, m.Retries, m.FireDeferred, m.FireHeld, m.FireUnacked, m.MisfireSkipped, m.Expired, m.ChainRefused,
		m.Lateness, m.Callback, m.WheelSize, m.LateLane, m.ReadyLane, m.Loaded, m.GroupTasks, m.Commit, m.Fsyncs, m.StartLag,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "chime_store_disk_bytes", Help: "Disk space used by the Pebble store."}, g.StoreBytes),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "chime_dispatch_queued", Help: "Callback attempts waiting for a worker."}, g.DispatchQueue),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "chime_dispatch_running", Help: "Callback attempts in flight."}, g.DispatchRun),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "chime_write_queue", Help: "API writes waiting for the writer."}, g.WriteQueue),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "chime_replication_pending", Help: "Replicated slot groups not yet acknowledged by their follower (a follower behind or unreachable)."}, g.ReplPending),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "chime_slots_under_replicated", Help: "Owned slots without a caught-up follower (a new follower is being fed a snapshot, or none is alive)."}, g.ReplBehind),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "chime_slots_follower_pending", Help: "Owned slots whose follower could not take them over yet if this node died (it has not acknowledged its copy, or no replica a grant): writes to them wait."}, g.ReplUngranted),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "chime_slots_stalled", Help: "Slots the table gives this node that have not been firing for --overdue-after or longer (the safety net: a healthy cluster has none)."}, g.Stalled),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "chime_tasks_overdue", Help: "Tasks in the slots this node owns due more than --overdue-after ago and not fired (the safety net: a healthy node has none)."}, g.Overdue),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "chime_corrupt_records_total", Help: "Reads of task records that did not decode (skipped by listings, not fired; each key logged once). A healthy store has none."}, g.Corrupt),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "chime_storage_failed", Help: "1 once a write or sync of the store failed: the node took no more writes, stopped firing and left the cluster (its followers took its slots over). Replace the disk or move the data, then restart."}, g.StorageFailed),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "chime_slots_unavailable", Help: "Slots this node should own but cannot take over: no live node holds a copy it may take them from (they are not started empty)."}, g.Unavailable),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "chime_tasks_stored", Help: "Tasks in this node's store, the replicas it follows included (an estimate kept since the start-up count; 0 until that count is done)."}, g.TasksStored),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "chime_slots_importing", Help: "Slots the table gives this node that it does not own yet: it is catching up or waiting for the handover."}, g.Importing),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	m.Handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
	m.NoticesDelivered = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "chime_result_callbacks_delivered_total", Help: "Result callbacks (success_url, failure_url) answered 2xx."})
	m.NoticesDropped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "chime_result_callbacks_dropped_total", Help: "Result callbacks given up, by reason: overflow (too many pending), attempts, gone, denied."}, []string{"reason"})
	reg.MustRegister(m.NoticesDelivered, m.NoticesDropped)
	return m
}

// NoteView updates the cluster gauges from a new view: the slots this
// node owns and follows in its table, and its members.
func (m *Metrics) NoteView(owned, following int, members []gossip.Member) {
	m.TableChanges.Inc()
	m.SlotsOwned.Set(float64(owned))
	m.SlotsFollowing.Set(float64(following))
	m.Members.Reset()
	for _, mb := range members {
		m.Members.WithLabelValues(mb.Status.String(), mb.Meta.State.String()).Inc()
	}
}

func (m *Metrics) WriteGroup(tasks int) {
	if tasks > 0 {
		m.GroupTasks.Observe(float64(tasks))
	}
}

// ObserveResult counts one finished attempt.
func (m *Metrics) ObserveResult(r *dispatch.Result) {
	switch r.Outcome {
	case dispatch.OutcomeSuccess:
		m.FiresSuccess.Inc()
	case dispatch.OutcomeGone:
		m.FiresGone.Inc()
	case dispatch.OutcomeDenied:
		m.FiresFailure.Inc()
		m.DeniedDial.Inc()
	default:
		m.FiresFailure.Inc()
	}
	m.Callback.Observe(r.FinishedAt.Sub(r.StartedAt).Seconds())
	if r.Job.Attempt == 1 && !r.Job.Ack { // an ACK is late by its ack_delay_ms on purpose
		m.Lateness.Observe(float64(r.StartedAt.UnixNano()-r.Job.Due) / 1e9)
		if r.Job.Submitted != 0 {
			m.StartLagDispatch.Observe(float64(r.StartedAt.UnixNano()-r.Job.Submitted) / 1e9)
		}
	}
}

// LatenessBuckets returns the lateness histogram's cumulative bucket counts
// and their upper bounds (seconds), the last bucket being +Inf.
func (m *Metrics) LatenessBuckets() ([]uint64, []float64) {
	var d dto.Metric
	if err := m.Lateness.Write(&d); err != nil || d.Histogram == nil {
		return nil, nil
	}
	bs := d.Histogram.GetBucket()
	cum := make([]uint64, 0, len(bs)+1)
	bounds := make([]float64, 0, len(bs))
	for _, b := range bs {
		cum = append(cum, b.GetCumulativeCount())
		bounds = append(bounds, b.GetUpperBound())
	}
	return append(cum, d.Histogram.GetSampleCount()), bounds
}
