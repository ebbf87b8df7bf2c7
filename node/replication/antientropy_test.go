package replication

import (
	"testing"
	"time"
)

// pos is a slot's data position (storage.SlotMeta's Epoch and Seq).
type pos struct{ Epoch, Seq uint64 }

func TestCompareSums(t *testing.T) {
	sum := Checksum{Sum: 0xabc, Count: 3}
	item := func(e, q uint64) Item { return Item{Slot: 7, Epoch: e, Seq: q, Sum: 0xabc, Count: 3} }
	alt := func(it Item, e uint64) Item { it.HasAlt, it.AltEpoch = true, e; return it }
	tests := []struct {
		name string
		pos  pos
		sum  Checksum
		it   Item
		want uint8
	}{
		{"same position, same checksum", pos{Epoch: 2, Seq: 10}, sum, item(2, 10), Match},
		{"same position, other sum", pos{Epoch: 2, Seq: 10}, Checksum{Sum: 0xabd, Count: 3}, item(2, 10), Mismatch},
		{"same position, other count", pos{Epoch: 2, Seq: 10}, Checksum{Sum: 0xabc, Count: 2}, item(2, 10), Mismatch},
		{"replica behind", pos{Epoch: 2, Seq: 9}, Checksum{}, item(2, 10), NotComparable},
		{"replica ahead", pos{Epoch: 2, Seq: 11}, Checksum{}, item(2, 10), NotComparable},
		{"same seq, older epoch", pos{Epoch: 1, Seq: 10}, sum, item(2, 10), NotComparable},
		{"same seq, the owner's epoch before it took the slot", pos{Epoch: 1, Seq: 10}, sum, alt(item(2, 10), 1), Match},
		{"same seq, the epoch before, other data", pos{Epoch: 1, Seq: 10}, Checksum{}, alt(item(2, 10), 1), Mismatch},
		{"same seq, an epoch that is neither", pos{Epoch: 3, Seq: 10}, sum, alt(item(2, 10), 1), NotComparable},
		{"both empty, never written", pos{}, Checksum{}, Item{}, Match},
		{"alt epoch 0 (before bootstrap)", pos{Epoch: 0, Seq: 0}, Checksum{}, Item{Epoch: 1, HasAlt: true}, Match},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Compare(tt.pos.Epoch, tt.pos.Seq, tt.sum, tt.it); got != tt.want {
				t.Errorf("Compare(%+v, %v, %+v) = %d, want %d", tt.pos, tt.sum, tt.it, got, tt.want)
			}
		})
	}
}

// TestAEState runs one (slot, replica) pair through scripted answers and
// checks when it is due and what the owner does.
func TestAEState(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	k := slotNode{5, "b"}
	it := func(e, q uint64) Item { return Item{Slot: 5, Epoch: e, Seq: q} }
	type step struct {
		at         int // ms after t0
		epoch, seq uint64
		wantDue    bool
		answer     uint8 // when due; 0: no answer (the call failed)
		wantAction aeAction
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"never checked: due", []step{{0, 1, 5, true, 0, aeNone}}},
		{"verified, unmoved: skipped until recheck", []step{
			{0, 1, 5, true, Match, aeNone},
			{500, 1, 5, false, 0, aeNone},
			{999, 1, 5, false, 0, aeNone},
			{1000, 1, 5, true, Match, aeNone},
			{1500, 1, 5, false, 0, aeNone},
		}},
		{"verified, then written: due at once", []step{
			{0, 1, 5, true, Match, aeNone},
			{10, 1, 6, true, Match, aeNone},
			{20, 2, 6, true, Match, aeNone},
			{30, 2, 6, false, 0, aeNone},
		}},
		{"not comparable: due again next time", []step{
			{0, 1, 5, true, NotComparable, aeNone},
			{10, 1, 5, true, Match, aeNone},
		}},
		{"failed call: due again next time", []step{
			{0, 1, 5, true, 0, aeNone},
			{10, 1, 5, true, Match, aeNone},
		}},
		{"mismatch: resync, then held while it runs", []step{
			{0, 1, 5, true, Mismatch, aeResync},
			{100, 1, 5, false, 0, aeNone},
			{299, 1, 9, false, 0, aeNone},
			{300, 1, 9, true, Match, aeNone},
		}},
		{"mismatch twice in a row: check the owner's own checksum first", []step{
			{0, 1, 5, true, Mismatch, aeResync},
			{300, 1, 5, true, Mismatch, aeRepairThenResync},
			{600, 1, 5, true, Mismatch, aeRepairThenResync},
		}},
		{"a match in between resets the count", []step{
			{0, 1, 5, true, Mismatch, aeResync},
			{300, 1, 5, true, Match, aeNone},
			{310, 1, 6, true, Mismatch, aeResync},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newAEState(time.Second, 300*time.Millisecond)
			for i, s := range tt.steps {
				now := at(s.at)
				if got := st.due(k, s.epoch, s.seq, now); got != s.wantDue {
					t.Fatalf("step %d: due(%d, %d) at %d ms = %v, want %v", i, s.epoch, s.seq, s.at, got, s.wantDue)
				}
				if !s.wantDue || s.answer == 0 {
					continue
				}
				if got := st.record(k, it(s.epoch, s.seq), s.answer, now); got != s.wantAction {
					t.Fatalf("step %d: record(answer %d) = %d, want %d", i, s.answer, got, s.wantAction)
				}
			}
		})
	}
}

// TestCheckerPeriod: the checker ticks every Interval/aeRounds, rounded
// down to a multiple of the beat (at least one beat), and its ticks fall
// on the multiples of that since the Unix epoch.
func TestCheckerPeriod(t *testing.T) {
	tests := []struct {
		interval, beat, want time.Duration
	}{
		{30 * time.Second, 0, 1875 * time.Millisecond},
		{30 * time.Second, 100 * time.Millisecond, 1800 * time.Millisecond},
		{30 * time.Second, 200 * time.Millisecond, 1800 * time.Millisecond},
		{32 * time.Second, 100 * time.Millisecond, 2 * time.Second},
		{time.Second, 100 * time.Millisecond, 100 * time.Millisecond}, // 62.5 ms: one beat
		{time.Microsecond, 0, time.Millisecond},
	}
	for _, tc := range tests {
		a := &Checker{cfg: CheckerConfig{Interval: tc.interval, Beat: tc.beat}}
		if got := a.period(); got != tc.want {
			t.Errorf("Interval %v, Beat %v: period %v, want %v", tc.interval, tc.beat, got, tc.want)
		}
	}
	at := time.Unix(1_800_000_000, 250_000_000) // 250 ms past a whole second
	if d := untilBeat(at, 1800*time.Millisecond); (at.UnixNano()+int64(d))%int64(1800*time.Millisecond) != 0 || d <= 0 || d > 1800*time.Millisecond {
		t.Errorf("untilBeat = %v: not the next multiple of 1.8 s", d)
	}
}
