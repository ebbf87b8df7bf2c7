package storage

// This file holds the records Chime persists. They are stored as msgpack
// arrays by the hand-written codec in codec.go, whose field order is the
// source of truth: add a field at the end of its struct and of its codec
// array, never in between. The msgpack tags are not used for storage.
// All instants are Unix nanoseconds (int64, UTC); 0 means "none".

// Status is the lifecycle state of a task.
type Status uint8

// Task statuses. The zero value is invalid on purpose.
const (
	StatusScheduled Status = 1 + iota // waiting for its next fire
	StatusPaused                      // schedule suspended by the user
	StatusDone                        // one-shot task fired successfully
	StatusFailed                      // one-shot task whose fire failed, or got 404/410
	StatusInactive                    // periodic task stopped by max_fails or 404/410
	StatusCompleted                   // periodic task that reached its end_at or max_runs
)

// StatusAwaitingAck is a one-shot task whose callback succeeded and whose
// ACK (Spec.AckURL) is pending. Not final.
const StatusAwaitingAck Status = StatusCompleted + 1

// String returns the API name of the status.
func (s Status) String() string {
	switch s {
	case StatusScheduled:
		return "scheduled"
	case StatusPaused:
		return "paused"
	case StatusDone:
		return "done"
	case StatusFailed:
		return "failed"
	case StatusInactive:
		return "inactive"
	case StatusCompleted:
		return "completed"
	case StatusAwaitingAck:
		return "awaiting_ack"
	}
	return "unknown"
}

// Final reports whether s is a final status: done, failed, inactive or
// completed. A final task expires after its retention (Task.ExpireAt).
func (s Status) Final() bool {
	return s == StatusDone || s == StatusFailed || s == StatusInactive || s == StatusCompleted
}

// ParseStatus is the inverse of Status.String. It returns 0, false for an
// unknown name.
func ParseStatus(name string) (Status, bool) {
	for s := StatusScheduled; s <= StatusAwaitingAck; s++ {
		if s.String() == name {
			return s, true
		}
	}
	return 0, false
}

// Kind is the kind of schedule a task has.
type Kind uint8

// Schedule kinds.
const (
	KindOnce  Kind = 1 + iota // delay_ms or due_at
	KindEvery                 // every_ms, fixed rate
	KindCron                  // cron expression in a timezone
)

// Misfire is what a periodic task does with fires missed while the cluster
// could not fire.
type Misfire uint8

// Misfire policies.
const (
	MisfireFireOnce Misfire = 1 + iota // one fire for all missed occurrences
	MisfireSkip                        // drop missed occurrences
	MisfireFireAll                     // fire every missed occurrence
)

// String returns the API name of the policy.
func (m Misfire) String() string {
	switch m {
	case MisfireFireOnce:
		return "fire_once"
	case MisfireSkip:
		return "skip"
	case MisfireFireAll:
		return "fire_all"
	}
	return "unknown"
}

// DSTGap is what a cron task in a zone does with a local time that does not
// exist (spring forward). The zero value is the default, DSTGapShift.
type DSTGap uint8

// Gap policies.
const (
	DSTGapDefault DSTGap = iota // field absent: shift
	DSTGapShift                 // fire at the first instant after the gap
	DSTGapSkip                  // do not fire
)

// String returns the API name of the policy ("shift" for the default).
func (g DSTGap) String() string {
	switch g {
	case DSTGapDefault, DSTGapShift:
		return "shift"
	case DSTGapSkip:
		return "skip"
	}
	return "unknown"
}

// DSTOverlap is what a cron task in a zone does with a local time that occurs
// twice (fall back). The zero value is the default, DSTOverlapFirst.
type DSTOverlap uint8

// Overlap policies.
const (
	DSTOverlapDefault DSTOverlap = iota // field absent: first
	DSTOverlapFirst                     // fire once, at the first occurrence
	DSTOverlapBoth                      // fire at both occurrences
)

// String returns the API name of the policy ("first" for the default).
func (o DSTOverlap) String() string {
	switch o {
	case DSTOverlapDefault, DSTOverlapFirst:
		return "first"
	case DSTOverlapBoth:
		return "both"
	}
	return "unknown"
}

// Spec is what the user asked for: the request fields of a task, normalized.
// It does not change when the task fires.
type Spec struct {
	CallbackURL string            `msgpack:"u"`
	Kind        Kind              `msgpack:"k"`
	DelayMs     int64             `msgpack:"dm,omitempty"` // as given, for echoing back
	DueAt       int64             `msgpack:"da,omitempty"` // one-shot due instant (from delay_ms or due_at)
	EveryMs     int64             `msgpack:"em,omitempty"` // KindEvery period
	Cron        string            `msgpack:"cr,omitempty"` // KindCron expression
	Timezone    string            `msgpack:"tz,omitempty"` // KindCron IANA zone, "" = UTC
	StartAt     int64             `msgpack:"sa,omitempty"` // periodic: no fire before it
	Payload     []byte            `msgpack:"p,omitempty"`  // raw JSON body of the callback
	Headers     map[string]string `msgpack:"h,omitempty"`  // extra callback headers
	TimeoutMs   int64             `msgpack:"to"`           // one attempt's timeout
	MaxRetries  int               `msgpack:"mr"`           // retries after the first attempt
	Misfire     Misfire           `msgpack:"mf"`           // periodic misfire policy
	MaxFails    int               `msgpack:"mx,omitempty"` // periodic: consecutive failures before inactive
	Labels      map[string]string `msgpack:"l,omitempty"`  // user labels for filtering
	DSTGap      DSTGap            `msgpack:"dg,omitempty"` // KindCron: nonexistent local times; 0 = default (shift)
	DSTOverlap  DSTOverlap        `msgpack:"do,omitempty"` // KindCron: repeated local times; 0 = default (first)
	EndAt       int64             `msgpack:"ea,omitempty"` // periodic: no fire due after it; 0 = none
	MaxRuns     int64             `msgpack:"mn,omitempty"` // periodic: completed after this many scheduled fires; 0 = none
	MaxCatchup  int64             `msgpack:"mc,omitempty"` // periodic: most missed occurrences fire_all fires, and the most a backfill fires; 0 = default (100)
	// RetentionMs is how long the task is kept once final (Final), in ms;
	// 0 = forever. It counts only with RetentionSet: without it (absent
	// from the request, or an older record) the node's default applies.
	RetentionMs  int64 `msgpack:"rt,omitempty"`
	RetentionSet bool  `msgpack:"rs,omitempty"`
	// OnSuccess and OnFailure are the task's chains (API.md "Chains"): the
	// bodies of the tasks to create when one of its fires finishes with
	// that outcome, each the compact JSON of a create body as validated
	// when the task was written. nil = none.
	OnSuccess [][]byte `msgpack:"os,omitempty"`
	OnFailure [][]byte `msgpack:"of,omitempty"`
	// SuccessURL and FailureURL receive the task's result notifications
	// (API.md "Result callbacks"): a POST when a fire finishes with that
	// outcome. "" = none.
	SuccessURL string `msgpack:"su,omitempty"`
	FailureURL string `msgpack:"fu,omitempty"`
	// AckURL is the one-shot task's ACK endpoint (API.md "The ACK
	// phase"), "" = none. AckDelayMs is the wait after the callback's 2xx
	// before the first ACK attempt, AckRetries the ACK attempts after the
	// first; both as normalized at create (defaults filled in).
	AckURL     string `msgpack:"au,omitempty"`
	AckDelayMs int64  `msgpack:"ad,omitempty"`
	AckRetries int    `msgpack:"ar,omitempty"`
	// FlowKey is the task's flow key (API.md "Flow keys"), "" = none: its
	// fires are held to the limits of the flow of that key (Flow), and
	// its id's hash tag is the key, so every task of a key is in the
	// key's slot.
	FlowKey string `msgpack:"fk,omitempty"`
}

// PendingNotice is a result notification of a finished fire still to be
// delivered (API.md "Result callbacks"): written with the fire's outcome,
// removed once its URL answered 2xx or it was given up. The writer sends
// it through the dispatcher (node/notice.go).
type PendingNotice struct {
	Seq      uint64 `msgpack:"s"` // the fire's sequence (fire id = task id ":" Seq)
	Failure  bool   `msgpack:"f"` // to failure_url (else success_url)
	URL      string `msgpack:"u"` // where it goes (the task's URL at the fire's finish)
	DueAt    int64  `msgpack:"d"` // the fire's logical due time (X-Chime-Due-At)
	Body     []byte `msgpack:"b"` // the notification's JSON body, fixed at the finish
	Attempts int    `msgpack:"a"` // delivery attempts that failed so far
	At       int64  `msgpack:"t"` // when the next attempt may start
}

// PendingChild is a child of a finished fire that is still to be created
// (API.md "Chains"): written with the fire's outcome, removed once the
// child's owner acknowledged its creation. The chain outbox (node/chain.go)
// creates it; its id is fixed, so a repeat finds it created.
type PendingChild struct {
	ID      string `msgpack:"i"` // the child's id
	Seq     uint64 `msgpack:"s"` // the parent's fire sequence
	Index   int    `msgpack:"x"` // its index in on_success or on_failure
	Failure bool   `msgpack:"f"` // from on_failure (else on_success)
	At      int64  `msgpack:"a"` // when the parent's fire finished: the child's delay_ms counts from it
	Body    []byte `msgpack:"b"` // the child's create body (compact JSON)
	Result  []byte `msgpack:"r"` // the parent's response body (kept part), for payload_from_parent
}

// Inflight is the persisted intent of a fire that has started and not
// finished. Its presence makes a restarted node repeat the fire with the same
// fire id (task id ":" Seq).
type Inflight struct {
	Seq           uint64 `msgpack:"s"`  // fire sequence number
	Due           int64  `msgpack:"d"`  // logical due time of this fire
	Attempt       int    `msgpack:"a"`  // attempts started so far (1 = first attempt)
	NextAttemptAt int64  `msgpack:"n"`  // when the next attempt may start (retry backoff)
	StartedAt     int64  `msgpack:"t"`  // when the current attempt started
	Trigger       bool   `msgpack:"tr"` // an extra fire from the trigger endpoint
	Misfired      bool   `msgpack:"m"`  // started late enough to count as missed (misfire policy applies on completion)
	// Ack marks the fire's ACK phase (Spec.AckURL): its callback
	// succeeded and Attempt counts the ACK attempts (0 = none yet, the
	// first at NextAttemptAt). Same fire, same Seq.
	Ack bool `msgpack:"ak"`
}

// Backfill is a pending backfill (POST /v1/tasks/{id}/backfill): the
// occurrences of the task's schedule from Next to To (inclusive) fire one
// after another as extra fires. Each fire's start moves Next on in the same
// write as its intent (Inflight), so a restart neither repeats nor loses one.
type Backfill struct {
	Next int64  `msgpack:"n"` // the next occurrence to fire
	To   int64  `msgpack:"t"` // the last instant of the range (inclusive)
	Left uint64 `msgpack:"l"` // occurrences left to fire, Next included
	At   int64  `msgpack:"a"` // when it was requested: its fires are due from then on
}

// LastFire summarizes the most recent finished fire.
type LastFire struct {
	FireID     string `msgpack:"f"`
	DueAt      int64  `msgpack:"d"`
	FinishedAt int64  `msgpack:"e"`
	Attempts   int    `msgpack:"a"`
	StatusCode int    `msgpack:"c"`
	Error      string `msgpack:"x,omitempty"`
	Result     []byte `msgpack:"r,omitempty"` // first 512 bytes of the response body
}

// Task is the stored record of one task: its spec plus its firing state.
type Task struct {
	ID      string `msgpack:"i"`
	Slot    uint16 `msgpack:"sl"`
	Spec    Spec   `msgpack:"sp"`
	Status  Status `msgpack:"st"`
	NextDue int64  `msgpack:"nd"` // logical due time of the next scheduled fire, 0 = none

	FireSeq  uint64    `msgpack:"fs"`           // sequence of the last fire started
	Inflight *Inflight `msgpack:"if,omitempty"` // the fire in progress, if any
	Triggers []int64   `msgpack:"tg,omitempty"` // pending trigger requests (request times)

	CreatedAt int64     `msgpack:"ca"`
	UpdatedAt int64     `msgpack:"ua"`
	FireCount uint64    `msgpack:"fc"` // successful fires
	FailCount uint64    `msgpack:"fl"` // consecutive failed fires
	LastFire  *LastFire `msgpack:"lf,omitempty"`
	HistSeq   uint64    `msgpack:"hs"` // sequence of the last execution record written
	Version   uint64    `msgpack:"v"`  // bumped on every write
	Runs      uint64    `msgpack:"rn"` // scheduled fires finished since the task was created or replaced (not triggers)
	// FinishedAt is when the task reached a final status (Status.Final), 0
	// while it is not final (and for records written before it existed).
	// ExpireAt is when the task and its history are deleted (its
	// retention after FinishedAt), 0 = never; while final and without a
	// pending trigger it is the task's wake, so the due index holds it.
	FinishedAt int64 `msgpack:"fa"`
	ExpireAt   int64 `msgpack:"xa"`

	// TriggerDues is nil, or parallel to Triggers: the logical due time
	// (X-Chime-Due-At) of each pending trigger, 0 = its request time.
	TriggerDues  []int64   `msgpack:"td,omitempty"`
	SkippedFires uint64    `msgpack:"sk"`           // missed occurrences dropped by max_catchup under misfire fire_all
	Backfill     *Backfill `msgpack:"bf,omitempty"` // the pending backfill, if any

	// ParentID and ParentFire link a task created by a chain to its
	// parent and the parent's fire (fire id); "" for any other task.
	ParentID   string `msgpack:"pi,omitempty"`
	ParentFire string `msgpack:"pf,omitempty"`
	// Children are the children of finished fires still to be created, in
	// the order they were due; nil = none. While there are any, the
	// task's wake is the first one's At (WakeChildren).
	Children []PendingChild `msgpack:"ch,omitempty"`
	// Notices are the result notifications still to deliver, oldest
	// first, at most a few (node/notice.go); nil = none. The first one's
	// At is part of the task's wake.
	Notices []PendingNotice `msgpack:"nt,omitempty"`

	// FailReason says why a failed task failed when it is not its
	// callback: "ack" (its ACK phase failed); "" otherwise.
	FailReason string `msgpack:"fr,omitempty"`

	// stored is what this copy knows of the record stored under its task
	// key (prior.go): set by Get, DecodeStoredTask, PutTask, DeleteTask
	// and Replaces, kept by copies. It lets PutTask and DeleteTask keep
	// the slot checksum without reading back what they replace.
	stored storedRecord
}

// Wake returns when the task next needs the firing machinery, or 0 if never:
// the next attempt of an in-flight fire, else the earliest of a pending
// trigger and (while scheduled) the next due time. The due index is keyed by
// this value.
func (t *Task) Wake() int64 {
	w := t.FireWake()
	if len(t.Children) > 0 && (w == 0 || t.Children[0].At < w) {
		w = t.Children[0].At
	}
	if len(t.Notices) > 0 && (w == 0 || t.Notices[0].At < w) {
		w = t.Notices[0].At
	}
	return w
}

// FireWake is Wake without the pending children and notices: when the task next needs
// a fire started, or its expiry.
func (t *Task) FireWake() int64 {
	if t.Inflight != nil {
		if t.Inflight.NextAttemptAt != 0 {
			return t.Inflight.NextAttemptAt
		}
		return t.Inflight.Due
	}
	var w int64
	if len(t.Triggers) > 0 {
		w = t.Triggers[0]
	}
	if t.Status == StatusScheduled && t.NextDue != 0 && (w == 0 || t.NextDue < w) {
		w = t.NextDue
	}
	if t.Backfill != nil && (w == 0 || t.Backfill.At < w) {
		w = t.Backfill.At
	}
	if w == 0 && len(t.Triggers) == 0 && len(t.Children) == 0 && len(t.Notices) == 0 && t.ExpireAt > 0 && t.Status.Final() {
		w = t.ExpireAt
	}
	return w
}

// Execution is one attempt of one fire, kept in the task's bounded history.
type Execution struct {
	FireID     string `msgpack:"f"`
	DueAt      int64  `msgpack:"d"`
	StartedAt  int64  `msgpack:"s"`
	FinishedAt int64  `msgpack:"e"`
	Attempt    int    `msgpack:"a"`
	StatusCode int    `msgpack:"c"`
	Error      string `msgpack:"x,omitempty"`
	Result     []byte `msgpack:"r,omitempty"`
	// Children are the ids of the tasks the fire's chain creates
	// (on_success or on_failure), on the execution that finished the fire.
	Children []string `msgpack:"ch,omitempty"`
	// Ack marks an attempt of the fire's ACK phase (POST ack_url).
	Ack bool `msgpack:"ak,omitempty"`
}

// Failed reports whether the attempt failed: an error (no answer, timeout,
// refused address) or an answer outside 2xx.
func (e *Execution) Failed() bool {
	return e.Error != "" || e.StatusCode < 200 || e.StatusCode > 299
}
