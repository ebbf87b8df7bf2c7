package storage

import (
	"math"
	"math/rand/v2"
	"strings"
)

// recordGen builds random records that reach every encoding branch: integer
// boundaries of each msgpack form, string and bin lengths at the header
// boundaries, unicode, nil versus empty maps and slices, nil pointers and
// (rarely) big payloads. It is seeded, so a failure reproduces.
type recordGen struct{ r *rand.Rand }

func newRecordGen(seed uint64) recordGen { return recordGen{rand.New(rand.NewPCG(seed, 0x636f646563))} }

// edgeInts are the values on either side of each msgpack integer form.
var edgeInts = []int64{
	0, 1, 127, 128, 255, 256, 65535, 65536, math.MaxUint32, math.MaxUint32 + 1, math.MaxInt64,
	-1, -32, -33, -128, -129, -32768, -32769, math.MinInt32, math.MinInt32 - 1, math.MinInt64,
}

// edgeLens are string and bin lengths on either side of each header form.
var edgeLens = []int{0, 1, 31, 32, 255, 256, 65535, 65536}

var unicodeWords = []string{"héllo", "日本語", "🚀", "Ω≈ç√", "\u0000nul", "\xff\xfe not utf-8", "a\tb\nc", "ünïcödé-ключ"}

func (g recordGen) oneIn(n int) bool { return g.r.IntN(n) == 0 }

func (g recordGen) int64() int64 {
	switch g.r.IntN(4) {
	case 0:
		return edgeInts[g.r.IntN(len(edgeInts))]
	case 1:
		return int64(g.r.Uint64() >> g.r.IntN(64)) // any magnitude
	case 2:
		return -int64(g.r.Uint64() >> (1 + g.r.IntN(63)))
	default:
		return 1_700_000_000_000_000_000 + g.r.Int64N(1e18) // realistic instants
	}
}

func (g recordGen) uint64() uint64 {
	switch g.r.IntN(3) {
	case 0:
		return uint64(edgeInts[g.r.IntN(11)]) // the non-negative edges
	case 1:
		return math.MaxUint64 - uint64(g.r.IntN(2))
	default:
		return g.r.Uint64() >> g.r.IntN(64)
	}
}

func (g recordGen) int() int { return int(g.int64()) }

func (g recordGen) str() string {
	switch g.r.IntN(8) {
	case 0:
		return ""
	case 1:
		return unicodeWords[g.r.IntN(len(unicodeWords))]
	case 2:
		if g.oneIn(4) {
			return strings.Repeat("é", edgeLens[g.r.IntN(len(edgeLens))]/2)
		}
		return strings.Repeat("x", edgeLens[g.r.IntN(6)]) // up to 256
	default:
		b := make([]byte, g.r.IntN(40))
		for i := range b {
			b[i] = byte(' ' + g.r.IntN(95))
		}
		return string(b)
	}
}

func (g recordGen) bytes() []byte {
	var n int
	switch g.r.IntN(6) {
	case 0:
		return nil
	case 1:
		return []byte{}
	case 2:
		n = edgeLens[g.r.IntN(len(edgeLens))]
	case 3:
		if g.oneIn(10) {
			n = 100<<10 + g.r.IntN(1000) // big payload
		}
	default:
		n = g.r.IntN(300)
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(g.r.Uint32())
	}
	return b
}

func (g recordGen) strMap() map[string]string {
	switch g.r.IntN(5) {
	case 0:
		return nil
	case 1:
		return map[string]string{}
	}
	n := 1 + g.r.IntN(6)
	if g.oneIn(4) {
		n = 17 + g.r.IntN(10) // more than fit appendStrMap's stack array
	}
	m := make(map[string]string, n)
	for len(m) < n {
		m[g.str()+unicodeWords[g.r.IntN(len(unicodeWords))]] = g.str()
	}
	return m
}

func (g recordGen) ints() []int64 {
	switch g.r.IntN(3) {
	case 0:
		return nil
	case 1:
		return []int64{}
	}
	v := make([]int64, 1+g.r.IntN(20))
	for i := range v {
		v[i] = g.int64()
	}
	return v
}

func (g recordGen) spec() Spec {
	return Spec{
		CallbackURL:  g.str(),
		Kind:         Kind(g.r.UintN(256)),
		DelayMs:      g.int64(),
		DueAt:        g.int64(),
		EveryMs:      g.int64(),
		Cron:         g.str(),
		Timezone:     g.str(),
		StartAt:      g.int64(),
		Payload:      g.bytes(),
		Headers:      g.strMap(),
		TimeoutMs:    g.int64(),
		MaxRetries:   g.int(),
		Misfire:      Misfire(g.r.UintN(256)),
		MaxFails:     g.int(),
		Labels:       g.strMap(),
		DSTGap:       DSTGap(g.r.UintN(256)),
		DSTOverlap:   DSTOverlap(g.r.UintN(256)),
		EndAt:        g.int64(),
		MaxRuns:      g.int64(),
		MaxCatchup:   g.int64(),
		RetentionMs:  g.int64(),
		RetentionSet: g.r.UintN(2) == 1,
		OnSuccess:    g.bins(),
		OnFailure:    g.bins(),
		SuccessURL:   g.str(),
		FailureURL:   g.str(),
		AckURL:       g.str(),
		AckDelayMs:   g.int64(),
		AckRetries:   g.int(),
		FlowKey:      g.str(),
	}
}

func (g recordGen) bins() [][]byte {
	switch g.r.IntN(3) {
	case 0:
		return nil
	case 1:
		return [][]byte{}
	}
	v := make([][]byte, 1+g.r.IntN(4))
	for i := range v {
		v[i] = g.bytes()
	}
	return v
}

func (g recordGen) strs() []string {
	switch g.r.IntN(3) {
	case 0:
		return nil
	case 1:
		return []string{}
	}
	v := make([]string, 1+g.r.IntN(4))
	for i := range v {
		v[i] = g.str()
	}
	return v
}

func (g recordGen) children() []PendingChild {
	switch g.r.IntN(3) {
	case 0:
		return nil
	case 1:
		return []PendingChild{}
	}
	v := make([]PendingChild, 1+g.r.IntN(4))
	for i := range v {
		v[i] = PendingChild{ID: g.str(), Seq: g.uint64(), Index: g.int(), Failure: g.oneIn(2), At: g.int64(), Body: g.bytes(), Result: g.bytes()}
	}
	return v
}

func (g recordGen) notices() []PendingNotice {
	switch g.r.IntN(3) {
	case 0:
		return nil
	case 1:
		return []PendingNotice{}
	}
	v := make([]PendingNotice, 1+g.r.IntN(4))
	for i := range v {
		v[i] = PendingNotice{Seq: g.uint64(), Failure: g.oneIn(2), URL: g.str(), DueAt: g.int64(), Body: g.bytes(), Attempts: g.int(), At: g.int64()}
	}
	return v
}

func (g recordGen) inflight() *Inflight {
	if g.oneIn(2) {
		return nil
	}
	return &Inflight{
		Seq:           g.uint64(),
		Due:           g.int64(),
		Attempt:       g.int(),
		NextAttemptAt: g.int64(),
		StartedAt:     g.int64(),
		Trigger:       g.oneIn(2),
		Misfired:      g.oneIn(2),
		Ack:           g.oneIn(2),
	}
}

func (g recordGen) lastFire() *LastFire {
	if g.oneIn(2) {
		return nil
	}
	return &LastFire{
		FireID:     g.str(),
		DueAt:      g.int64(),
		FinishedAt: g.int64(),
		Attempts:   g.int(),
		StatusCode: g.int(),
		Error:      g.str(),
		Result:     g.bytes(),
	}
}

func (g recordGen) task() *Task {
	return &Task{
		ID:        g.str(),
		Slot:      uint16(g.r.UintN(1 << 16)),
		Spec:      g.spec(),
		Status:    Status(g.r.UintN(256)),
		NextDue:   g.int64(),
		FireSeq:   g.uint64(),
		Inflight:  g.inflight(),
		Triggers:  g.ints(),
		CreatedAt: g.int64(),
		UpdatedAt: g.int64(),
		FireCount: g.uint64(),
		FailCount: g.uint64(),
		LastFire:  g.lastFire(),
		HistSeq:   g.uint64(),
		Version:   g.uint64(),
		Runs:      g.uint64(),

		TriggerDues:  g.ints(),
		SkippedFires: g.uint64(),
		Backfill:     g.backfill(),
		FinishedAt:   g.int64(),
		ExpireAt:     g.int64(),
		ParentID:     g.str(),
		ParentFire:   g.str(),
		Children:     g.children(),
		Notices:      g.notices(),
		FailReason:   g.str(),
	}
}

func (g recordGen) backfill() *Backfill {
	if g.oneIn(2) {
		return nil
	}
	return &Backfill{Next: g.int64(), To: g.int64(), Left: g.uint64(), At: g.int64()}
}

func (g recordGen) execution() *Execution {
	return &Execution{
		FireID:     g.str(),
		DueAt:      g.int64(),
		StartedAt:  g.int64(),
		FinishedAt: g.int64(),
		Attempt:    g.int(),
		StatusCode: g.int(),
		Error:      g.str(),
		Result:     g.bytes(),
		Children:   g.strs(),
		Ack:        g.oneIn(2),
	}
}
