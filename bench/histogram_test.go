package bench

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"
)

// oracleQuantile is the exact value at rank ceil(q·n) of sorted values.
func oracleQuantile(sorted []int64, q float64) int64 {
	rank := max(int(math.Ceil(q*float64(len(sorted)))), 1)
	return sorted[min(rank, len(sorted))-1]
}

func TestHistogramQuantilesMatchOracle(t *testing.T) {
	const seed = 42
	tests := []struct {
		name string
		gen  func(r *rand.Rand) int64
		n    int
	}{
		{"constant", func(*rand.Rand) int64 { return 777 }, 1000},
		{"single value", func(*rand.Rand) int64 { return 123456 }, 1},
		{"zeros", func(*rand.Rand) int64 { return 0 }, 100},
		{"exact range below 128", func(r *rand.Rand) int64 { return r.Int64N(128) }, 5000},
		{"uniform to 10ms", func(r *rand.Rand) int64 { return r.Int64N(10_000) }, 20_000},
		{"uniform to 1h", func(r *rand.Rand) int64 { return r.Int64N(3_600_000_000) }, 20_000},
		{"exponential mean 5ms", func(r *rand.Rand) int64 { return int64(r.ExpFloat64() * 5000) }, 50_000},
		{"bimodal", func(r *rand.Rand) int64 {
			if r.IntN(10) == 0 {
				return 500_000 + r.Int64N(100_000)
			}
			return 1000 + r.Int64N(500)
		}, 10_000},
		{"huge values", func(r *rand.Rand) int64 { return math.MaxInt64 - r.Int64N(1<<40) }, 100},
	}
	quantiles := []float64{0, 0.001, 0.25, 0.5, 0.9, 0.99, 0.999, 1}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, uint64(len(tt.name))))
			var h Histogram
			vals := make([]int64, tt.n)
			var sum float64
			for i := range vals {
				vals[i] = tt.gen(r)
				sum += float64(vals[i])
				h.Record(vals[i])
			}
			slices.Sort(vals)
			if h.Count() != uint64(tt.n) {
				t.Fatalf("Count() = %d, want %d", h.Count(), tt.n)
			}
			if h.Min() != vals[0] || h.Max() != vals[len(vals)-1] {
				t.Errorf("Min, Max = %d, %d, want %d, %d", h.Min(), h.Max(), vals[0], vals[len(vals)-1])
			}
			if want := sum / float64(tt.n); math.Abs(h.Mean()-want) > 1e-9*math.Abs(want) {
				t.Errorf("Mean() = %v, want %v", h.Mean(), want)
			}
			for _, q := range quantiles {
				want := oracleQuantile(vals, q)
				if q == 0 {
					want = vals[0]
				}
				got := h.Quantile(q)
				// Reported values are bucket upper bounds clamped to Max:
				// never below the exact value, at most 1/64 above it.
				if got < want || got-want > want/64 {
					t.Errorf("Quantile(%v) = %d, want %d (+ at most %d) (seed %d)", q, got, want, want/64, seed)
				}
			}
		})
	}
}

func TestHistogramBucketBounds(t *testing.T) {
	vals := []int64{0, 1, 63, 64, 127, 128, 129, 191, 192, 255, 256, 257, 1000, 1 << 20, 1<<20 - 1, 1<<20 + 1,
		1<<40 + 12345, math.MaxInt64 - 1, math.MaxInt64}
	for _, v := range vals {
		i := bucketOf(v)
		if i < 0 || i >= numBuckets {
			t.Fatalf("bucketOf(%d) = %d, outside [0, %d)", v, i, numBuckets)
		}
		lo, hi := bucketBounds(i)
		if v < lo || v > hi {
			t.Errorf("bucketBounds(bucketOf(%d)) = [%d, %d], want it to contain %d", v, lo, hi, v)
		}
		if width := hi - lo; lo >= subCount && width > lo/halfCount {
			t.Errorf("bucket [%d, %d] is %d wide, want ≤ %d", lo, hi, width, lo/halfCount)
		}
	}
	// Buckets tile [0, MaxInt64] without gaps or overlaps.
	var next int64
	for i := range numBuckets {
		lo, hi := bucketBounds(i)
		if lo != next || hi < lo {
			t.Fatalf("bucket %d = [%d, %d], want it to start at %d", i, lo, hi, next)
		}
		next = hi + 1
	}
	if _, hi := bucketBounds(numBuckets - 1); hi != math.MaxInt64 {
		t.Errorf("last bucket ends at %d, want MaxInt64", hi)
	}
}

func TestHistogramMergeEqualsRecordingAll(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	var a, b, all Histogram
	for i := range 10_000 {
		v := r.Int64N(1_000_000)
		all.Record(v)
		if i%3 == 0 {
			a.Record(v)
		} else {
			b.Record(v)
		}
	}
	a.Merge(&b)
	a.Merge(&Histogram{}) // merging an empty histogram changes nothing
	if a.Summary() != all.Summary() {
		t.Errorf("merged Summary() = %+v, want %+v", a.Summary(), all.Summary())
	}
}

func TestHistogramEdgeCases(t *testing.T) {
	tests := []struct {
		name   string
		record []int64
		want   Summary
	}{
		{"empty", nil, Summary{}},
		{"negative clamps to zero", []int64{-5, -1}, Summary{Count: 2}},
		{"one value", []int64{1500}, Summary{Count: 1, Min: 1500, Mean: 1500, P50: 1500, P90: 1500, P99: 1500, P999: 1500, Max: 1500}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h Histogram
			for _, v := range tt.record {
				h.Record(v)
			}
			if got := h.Summary(); got != tt.want {
				t.Errorf("Summary() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestHistogramRecordDurationUsesMicroseconds(t *testing.T) {
	var h Histogram
	h.RecordDuration(2500 * time.Microsecond)
	if h.Max() != 2500 {
		t.Errorf("Max() = %d, want 2500", h.Max())
	}
	if b := h.Buckets(); len(b) != 1 || b[0].Count != 1 || b[0].Low > 2500 || b[0].High < 2500 {
		t.Errorf("Buckets() = %+v, want one bucket holding 2500", b)
	}
}

func BenchmarkHistogramRecord(b *testing.B) {
	for _, n := range []int{1000, 100_000, 1_000_000} {
		b.Run("n="+strconv.Itoa(n), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			vals := make([]int64, n)
			for i := range vals {
				vals[i] = int64(r.ExpFloat64() * 5000)
			}
			b.ReportAllocs()
			for b.Loop() {
				var h Histogram
				for _, v := range vals {
					h.Record(v)
				}
			}
		})
	}
}
