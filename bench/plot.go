package bench

import (
	"fmt"
	"math"
	"time"
)

// fireCharts plots a fire run: the lateness distribution and fires/s over
// time.
func fireCharts(fs FireStats) []Chart {
	st := fs.Receiver
	return []Chart{
		{
			Title: fmt.Sprintf("Lateness of %d fires (p50 %s ms, p99 %s ms, max %s ms)", st.Lateness.Count,
				fmtNum(float64(st.Lateness.P50)/1e3), fmtNum(float64(st.Lateness.P99)/1e3), fmtNum(float64(st.MaxLateness)/1e3)),
			XLabel: "lateness (ms, log scale; early fires at the left edge)",
			YLabel: "fires",
			LogX:   true,
			Bars:   latenessBars(st.LatenessBuckets),
		},
		{
			Title:  fmt.Sprintf("Fires per second (offered %s/s)", fmtNum(fs.OfferedRate)),
			XLabel: "seconds since the first due",
			YLabel: "fires/s",
			Lines:  rateLines(st.Timeline, st.Step, fs.OfferedRate, fs.SpreadSeconds),
		},
	}
}

// latenessBars coalesces histogram buckets (µs) into ten bars per decade
// of milliseconds. Values below 1 µs (including early fires, recorded as 0)
// go into the first bar.
func latenessBars(buckets []Bucket) []Bar {
	const perDecade = 10
	bins := map[int]uint64{}
	lo, hi := math.MaxInt, math.MinInt
	for _, b := range buckets {
		mid := max(float64(b.Low+b.High)/2, 1) / 1e3 // ms, at least 1 µs
		k := int(math.Floor(math.Log10(mid) * perDecade))
		bins[k] += b.Count
		lo, hi = min(lo, k), max(hi, k)
	}
	var bars []Bar
	for k := lo; k <= hi && len(bins) > 0; k++ {
		c, ok := bins[k]
		if !ok {
			continue
		}
		bars = append(bars, Bar{
			From:   math.Pow(10, float64(k)/perDecade),
			To:     math.Pow(10, float64(k+1)/perDecade),
			Height: float64(c),
		})
	}
	return bars
}

// rateLines turns the arrivals timeline into fires/s, in buckets of at
// least one second once the run is longer than a minute so the plot stays
// readable, plus the offered rate as a reference line.
func rateLines(timeline []uint64, step time.Duration, offered, spread float64) []Line {
	if step <= 0 {
		return nil
	}
	group := 1
	if total := time.Duration(len(timeline)) * step; total > time.Minute {
		group = max(int(time.Second/step), 1)
	}
	var actual Line
	actual.Name = "delivered"
	for i := 0; i < len(timeline); i += group {
		part := timeline[i:min(i+group, len(timeline))]
		var sum uint64
		for _, c := range part {
			sum += c
		}
		w := time.Duration(len(part)) * step // the last group may be short
		actual.X = append(actual.X, (time.Duration(i)*step + w/2).Seconds())
		actual.Y = append(actual.Y, float64(sum)/w.Seconds())
	}
	ref := Line{Name: "offered", X: []float64{0, spread}, Y: []float64{offered, offered}}
	return []Line{actual, ref}
}
