package node

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/chime-scheduler/chime/node/dispatch"
	"github.com/chime-scheduler/chime/node/membership"
)

// metrics holds the node's Prometheus collectors, registered on a registry
// of the node's own (no global state, so several nodes share a process).
type metrics struct {
	reg     *prometheus.Registry
	handler http.Handler // /metrics

	created        prometheus.Counter
	fires          *prometheus.CounterVec // by result: success, failure, gone
	firesSuccess   prometheus.Counter
	firesFailure   prometheus.Counter
	firesGone      prometheus.Counter
	retries        prometheus.Counter
	fireDeferred   prometheus.Counter
	misfireSkipped prometheus.Counter
	expired        prometheus.Counter
	chainRefused   prometheus.Counter
	lateness       prometheus.Histogram
	callback       prometheus.Histogram
	wheelSize      prometheus.Gauge
	loaded         prometheus.Counter
	groupTasks     prometheus.Histogram
	commit         prometheus.Histogram
	fsyncs         prometheus.Counter
	startLag       *prometheus.HistogramVec

	slotsOwned     prometheus.Gauge
	slotsFollowing prometheus.Gauge
	members        *prometheus.GaugeVec   // by status and state
	tableChanges   prometheus.Counter     // views built
	forwarded      *prometheus.CounterVec // by result: ok, error
	takeovers      prometheus.Counter

	aeChecks        *prometheus.CounterVec // by result: match, mismatch, not_comparable
	aeMatch         prometheus.Counter
	aeMismatch      prometheus.Counter
	aeNotComparable prometheus.Counter
	aeResyncs       prometheus.Counter
	// internalRejected counts calls between nodes refused, by endpoint
	// and reason (node/internalauth, wired in internal_wiring.go).
	internalRejected *prometheus.CounterVec
	// callbacksDenied counts callback addresses the address policy refused
	// (dispatch.Policy), by stage: create (a task refused with 400) or dial (a
	// fire failed without being sent).
	callbacksDenied *prometheus.CounterVec
	deniedDial      prometheus.Counter
	// circuitOpen (0/1) and circuitHeld are the circuit breaker's state
	// and held fires per callback host (scheme://host:port), for the hosts
	// whose circuit has opened at least once.
	circuitOpen  *prometheus.GaugeVec
	circuitHeld  *prometheus.GaugeVec
	circuitHolds prometheus.Counter
	// flowHolds counts fire starts held by a flow key's limits (node/flow).
	flowHolds prometheus.Counter

	// noticesDelivered and noticesDropped count result callbacks
	// (notice.go); dropped by reason: overflow, attempts, gone, denied.
	noticesDelivered prometheus.Counter
	noticesDropped   *prometheus.CounterVec
}

// gauges are read on scrape from the parts that own them.
type gauges struct {
	storeBytes    func() float64
	dispatchQueue func() float64
	dispatchRun   func() float64
	writeQueue    func() float64
	replPending   func() float64
	replBehind    func() float64
	importing     func() float64
	unavailable   func() float64
	tasksStored   func() float64
	stalled       func() float64
	overdue       func() float64
	storageFailed func() float64
	corrupt       func() float64
}

func newMetrics(g gauges) *metrics {
	reg := prometheus.NewRegistry()
	m := &metrics{
		reg: reg,
		created: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chime_tasks_created_total", Help: "Tasks created (acknowledged)."}),
		fires: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chime_fires_total", Help: "Callback attempts finished, by result (success, failure, gone)."}, []string{"result"}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chime_retries_total", Help: "Failed attempts that will be retried."}),
		fireDeferred: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chime_fires_deferred_total", Help: "Fire starts postponed because the dispatcher backlog was full."}),
		misfireSkipped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chime_misfires_skipped_total", Help: "Periodic fires skipped by misfire=skip."}),
		chainRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chime_chain_children_refused_total", Help: "Children of chains not created: their body was no longer valid at the parent's finish, or their id was taken."}),
		expired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chime_tasks_expired_total", Help: "Final tasks deleted, with their executions, once their retention passed."}),
		lateness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "chime_fire_lateness_seconds",
			Help:    "Time from a fire's due time to the start of its first attempt.",
			Buckets: []float64{.001, .002, .005, .01, .015, .02, .03, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}),
		callback: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "chime_callback_duration_seconds",
			Help:    "Duration of one callback attempt.",
			Buckets: prometheus.ExponentialBuckets(.0005, 2, 16),
		}),
		wheelSize: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "chime_wheel_tasks", Help: "Tasks in the in-memory timing wheel."}),
		loaded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chime_loader_tasks_total", Help: "Tasks moved from the due index into the wheel."}),
		startLag: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "chime_fire_start_lag_seconds",
			Help:    "Where a first attempt's lateness arises before the dispatcher: stage=loop (due to the wheel handing it over), stage=writer (handover to the intent being written).",
			Buckets: []float64{.001, .002, .005, .01, .015, .02, .03, .05, .1, .25, .5, 1},
		}, []string{"stage"}),
		fsyncs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chime_fsyncs_total", Help: "WAL fsyncs (each makes every earlier write durable)."}),
		commit: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "chime_write_commit_seconds",
			Help:    "Time to commit one write group to the store (before its fsync).",
			Buckets: prometheus.ExponentialBuckets(.0001, 2, 16),
		}),
		groupTasks: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "chime_write_group_tasks",
			Help:    "Task writes per group commit (one fsync).",
			Buckets: prometheus.ExponentialBuckets(1, 4, 8),
		}),
	}
	m.slotsOwned = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "chime_slots_owned", Help: "Slots this node owns in its current view."})
	m.slotsFollowing = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "chime_slots_following", Help: "Slots this node follows in its current view."})
	m.members = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "chime_members", Help: "Cluster members in this node's view, by liveness status and lifecycle state."},
		[]string{"status", "state"})
	m.tableChanges = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "chime_table_changes_total", Help: "Membership changes that produced a new view of the slot table."})
	m.forwarded = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "chime_forwarded_requests_total", Help: "API requests forwarded to the slot's owner, by result (ok, error: the owner could not be reached)."},
		[]string{"result"})
	m.takeovers = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "chime_slot_takeovers_total", Help: "Slots this node started owning (at a new epoch) after a join, leave, drain or crash."})
	m.aeChecks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "chime_antientropy_checks_total", Help: "Slot checksums this node, as owner, had a replica compare, by result: match, mismatch, not_comparable (the replica was not at the same position)."},
		[]string{"result"})
	m.aeMatch = m.aeChecks.WithLabelValues("match")
	m.aeMismatch = m.aeChecks.WithLabelValues("mismatch")
	m.aeNotComparable = m.aeChecks.WithLabelValues("not_comparable")
	m.aeResyncs = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "chime_antientropy_resyncs_total", Help: "Replica copies of this node's slots that anti-entropy found different from its own and had resynced (a snapshot of the slot)."})
	m.internalRejected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "chime_internal_rejected_total", Help: "Calls to /internal/v1/ endpoints refused, by endpoint and reason (unsigned, malformed, stale, misdirected, not_member, length_required, too_large, bad_mac, replayed, busy, bad_body)."},
		[]string{"endpoint", "reason"})
	m.callbacksDenied = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "chime_callbacks_denied_total", Help: "Callback addresses refused by the address policy (--callback-allow, --callback-deny, --callback-deny-private and the built-in link-local/metadata/multicast rules), by stage: create (the task was refused with 400), dial (a fire failed without being sent)."},
		[]string{"stage"})
	m.deniedDial = m.callbacksDenied.WithLabelValues("dial")
	m.callbacksDenied.WithLabelValues("create")
	reg.MustRegister(m.callbacksDenied)
	m.circuitOpen = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "chime_callback_circuit_open", Help: "1 while the circuit breaker of the callback host (scheme://host:port) is open or half-open (its fires are held), 0 once it closed again; only hosts whose circuit has opened."},
		[]string{"host"})
	m.circuitHeld = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "chime_callback_circuit_held", Help: "Fires held (not attempted, no retry spent) by the open circuit of the callback host."},
		[]string{"host"})
	m.circuitHolds = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "chime_callback_circuit_holds_total", Help: "Fire starts held back by an open circuit (a fire held across several probe times counts each time)."})
	reg.MustRegister(m.circuitOpen, m.circuitHeld, m.circuitHolds)
	m.flowHolds = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "chime_flow_holds_total", Help: "Fire starts held back by their flow key's rate or parallelism (a fire held several times counts each time)."})
	reg.MustRegister(m.flowHolds)
	reg.MustRegister(m.slotsOwned, m.slotsFollowing, m.members, m.tableChanges, m.forwarded, m.takeovers, m.aeChecks, m.aeResyncs, m.internalRejected)
	m.firesSuccess = m.fires.WithLabelValues("success")
	m.firesFailure = m.fires.WithLabelValues("failure")
	m.firesGone = m.fires.WithLabelValues("gone")
	reg.MustRegister(m.created, m.fires, m.retries, m.fireDeferred, m.misfireSkipped, m.expired, m.chainRefused,
		m.lateness, m.callback, m.wheelSize, m.loaded, m.groupTasks, m.commit, m.fsyncs, m.startLag,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "chime_store_disk_bytes", Help: "Disk space used by the Pebble store."}, g.storeBytes),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "chime_dispatch_queued", Help: "Callback attempts waiting for a worker."}, g.dispatchQueue),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "chime_dispatch_running", Help: "Callback attempts in flight."}, g.dispatchRun),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "chime_write_queue", Help: "API writes waiting for the writer."}, g.writeQueue),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "chime_replication_pending", Help: "Replicated slot groups not yet acknowledged by their follower (a follower behind or unreachable)."}, g.replPending),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "chime_slots_under_replicated", Help: "Owned slots without a caught-up follower (a new follower is being fed a snapshot, or none is alive)."}, g.replBehind),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "chime_slots_stalled", Help: "Slots the table gives this node that have not been firing for --overdue-after or longer (the safety net: a healthy cluster has none)."}, g.stalled),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "chime_tasks_overdue", Help: "Tasks in the slots this node owns due more than --overdue-after ago and not fired (the safety net: a healthy node has none)."}, g.overdue),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "chime_corrupt_records_total", Help: "Reads of task records that did not decode (skipped by listings, not fired; each key logged once). A healthy store has none."}, g.corrupt),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "chime_storage_failed", Help: "1 once a write or sync of the store failed: the node took no more writes, stopped firing and left the cluster (its followers took its slots over). Replace the disk or move the data, then restart."}, g.storageFailed),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "chime_slots_unavailable", Help: "Slots this node should own but cannot take over: no live node holds a copy it may take them from (they are not started empty)."}, g.unavailable),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "chime_tasks_stored", Help: "Tasks in this node's store, the replicas it follows included (an estimate kept since the start-up count; 0 until that count is done)."}, g.tasksStored),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "chime_slots_importing", Help: "Slots the table gives this node that it does not own yet: it is catching up or waiting for the handover."}, g.importing),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	m.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
	m.noticesDelivered = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "chime_result_callbacks_delivered_total", Help: "Result callbacks (success_url, failure_url) answered 2xx."})
	m.noticesDropped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "chime_result_callbacks_dropped_total", Help: "Result callbacks given up, by reason: overflow (too many pending), attempts, gone, denied."}, []string{"reason"})
	reg.MustRegister(m.noticesDelivered, m.noticesDropped)
	return m
}

// noteView updates the cluster gauges from a new view.
func (m *metrics) noteView(v *membership.View) {
	m.tableChanges.Inc()
	c := v.Table.Counts()[v.Self]
	m.slotsOwned.Set(float64(c.Owned))
	m.slotsFollowing.Set(float64(c.Following))
	m.members.Reset()
	for _, mb := range v.Members {
		m.members.WithLabelValues(mb.Status.String(), mb.Meta.State.String()).Inc()
	}
}

func (m *metrics) writeGroup(tasks int) {
	if tasks > 0 {
		m.groupTasks.Observe(float64(tasks))
	}
}

// observeResult counts one finished attempt.
func (m *metrics) observeResult(r *dispatch.Result) {
	switch r.Outcome {
	case dispatch.OutcomeSuccess:
		m.firesSuccess.Inc()
	case dispatch.OutcomeGone:
		m.firesGone.Inc()
	case dispatch.OutcomeDenied:
		m.firesFailure.Inc()
		m.deniedDial.Inc()
	default:
		m.firesFailure.Inc()
	}
	m.callback.Observe(r.FinishedAt.Sub(r.StartedAt).Seconds())
	if r.Job.Attempt == 1 && !r.Job.Ack { // an ACK is late by its ack_delay_ms on purpose
		m.lateness.Observe(float64(r.StartedAt.UnixNano()-r.Job.Due) / 1e9)
	}
}

// latenessBuckets returns the lateness histogram's cumulative bucket counts
// and their upper bounds (seconds), the last bucket being +Inf.
func (m *metrics) latenessBuckets() ([]uint64, []float64) {
	var d dto.Metric
	if err := m.lateness.Write(&d); err != nil || d.Histogram == nil {
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
