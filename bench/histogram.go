package bench

import (
	"math"
	"math/bits"
	"time"
)

// The histogram is HDR-style log-linear: values below subCount land in exact
// buckets of width 1; above that every power of two is split into subCount/2
// equal buckets, so a bucket is never wider than 1/halfCount of its lower
// bound (relative error ≤ 1/64 ≈ 1.6 %).
const (
	subBits   = 7
	subCount  = 1 << subBits // 128 exact buckets for 0..127
	halfCount = subCount / 2 // buckets per power of two above that
	// numBuckets covers every non-negative int64 (63 bits): the exact
	// buckets, then halfCount buckets for each of the 63 - subBits octaves
	// from 2^subBits up to 2^63.
	numBuckets = subCount + (63-subBits)*halfCount
)

// Histogram counts non-negative values, in microseconds, in log-linear
// buckets. Percentiles it reports are the upper bound of the bucket holding
// the requested rank, clamped to the largest recorded value, so a reported
// value v satisfies exact ≤ v ≤ exact + exact/64.
//
// The zero value is empty and ready to use. A Histogram is not safe for
// concurrent use; the owner serializes access (the Receiver holds a mutex).
// Record is O(1); Quantile is O(number of buckets).
type Histogram struct {
	counts [numBuckets]uint64
	n      uint64
	sum    float64
	min    int64
	max    int64
}

// bucketOf returns the bucket index of v ≥ 0.
func bucketOf(v int64) int {
	if v < subCount {
		return int(v)
	}
	// shift so that v>>shift lies in [halfCount, subCount).
	shift := bits.Len64(uint64(v)) - subBits
	return subCount + (shift-1)*halfCount + int(v>>shift) - halfCount
}

// bucketBounds returns the smallest and largest value of bucket i.
func bucketBounds(i int) (lo, hi int64) {
	if i < subCount {
		return int64(i), int64(i)
	}
	j := i - subCount
	shift := j/halfCount + 1
	top := int64(j%halfCount + halfCount)
	lo = top << shift
	hi = lo + (int64(1) << shift) - 1 // the last bucket ends exactly at MaxInt64
	return lo, hi
}

// Record adds one value in microseconds. Negative values are recorded as 0;
// callers that care about negative values (early fires) count them apart.
func (h *Histogram) Record(us int64) {
	if us < 0 {
		us = 0
	}
	h.counts[bucketOf(us)]++
	if h.n == 0 || us < h.min {
		h.min = us
	}
	if us > h.max {
		h.max = us
	}
	h.n++
	h.sum += float64(us)
}

// RecordDuration adds d, truncated to whole microseconds.
func (h *Histogram) RecordDuration(d time.Duration) { h.Record(d.Microseconds()) }

// Merge adds every value recorded in o to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	if o.max > h.max {
		h.max = o.max
	}
	h.n += o.n
	h.sum += o.sum
}

// Count returns the number of recorded values.
func (h *Histogram) Count() uint64 { return h.n }

// Min returns the smallest recorded value (exact), or 0 when empty.
func (h *Histogram) Min() int64 { return h.min }

// Max returns the largest recorded value (exact), or 0 when empty.
func (h *Histogram) Max() int64 { return h.max }

// Mean returns the exact mean of the recorded values, or 0 when empty.
func (h *Histogram) Mean() float64 {
	if h.n == 0 {
		return 0
	}
	return h.sum / float64(h.n)
}

// Quantile returns the value at quantile q in [0, 1]: the smallest bucket
// whose cumulative count reaches rank ceil(q·n) (at least 1), reported as
// that bucket's upper bound clamped to Max. It returns 0 when empty.
func (h *Histogram) Quantile(q float64) int64 {
	if h.n == 0 {
		return 0
	}
	if q <= 0 {
		return h.min
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = max(rank, 1)
	rank = min(rank, h.n)
	var cum uint64
	for i, c := range h.counts {
		cum += c
		if cum >= rank {
			_, hi := bucketBounds(i)
			return min(max(hi, h.min), h.max)
		}
	}
	return h.max
}

// Bucket is one non-empty histogram bucket: Count values in [Low, High] µs.
type Bucket struct {
	Low   int64  `json:"low_us"`
	High  int64  `json:"high_us"`
	Count uint64 `json:"count"`
}

// Buckets returns the non-empty buckets in increasing order. The slice is
// newly allocated and owned by the caller.
func (h *Histogram) Buckets() []Bucket {
	var out []Bucket
	for i, c := range h.counts {
		if c == 0 {
			continue
		}
		lo, hi := bucketBounds(i)
		out = append(out, Bucket{Low: lo, High: hi, Count: c})
	}
	return out
}

// Summary is the JSON form of a histogram: count and percentiles in µs.
type Summary struct {
	Count uint64  `json:"count"`
	Min   int64   `json:"min_us"`
	Mean  float64 `json:"mean_us"`
	P50   int64   `json:"p50_us"`
	P90   int64   `json:"p90_us"`
	P99   int64   `json:"p99_us"`
	P999  int64   `json:"p999_us"`
	Max   int64   `json:"max_us"`
}

// Summary returns the count and the standard percentiles of h.
func (h *Histogram) Summary() Summary {
	return Summary{
		Count: h.n,
		Min:   h.min,
		Mean:  math.Round(h.Mean()*10) / 10,
		P50:   h.Quantile(0.50),
		P90:   h.Quantile(0.90),
		P99:   h.Quantile(0.99),
		P999:  h.Quantile(0.999),
		Max:   h.max,
	}
}
