package bench

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"strings"
	"testing"
	"time"
)

// checkSVG parses b as XML to the end and returns the element counts by
// name. It fails the test on malformed XML or a root other than <svg>.
func checkSVG(t *testing.T, b []byte) map[string]int {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(b))
	counts := map[string]int{}
	depth, roots := 0, 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("malformed SVG: %v\n%s", err, b)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			if depth == 0 {
				roots++
				if el.Name.Local != "svg" || el.Name.Space != "http://www.w3.org/2000/svg" {
					t.Fatalf("root element = %v, want svg in the SVG namespace", el.Name)
				}
			}
			counts[el.Name.Local]++
			depth++
		case xml.EndElement:
			depth--
		}
	}
	if roots != 1 || depth != 0 {
		t.Fatalf("got %d root elements and depth %d at EOF, want 1 and 0", roots, depth)
	}
	for _, bad := range []string{"NaN", "Inf"} {
		if bytes.Contains(b, []byte(bad)) {
			t.Errorf("SVG contains %q:\n%s", bad, b)
		}
	}
	return counts
}

func TestWriteSVGIsWellFormed(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	tests := []struct {
		name      string
		charts    []Chart
		wantPaths int
		wantBars  int // rect elements beyond the background and frames
	}{
		{name: "no charts"},
		{name: "empty chart", charts: []Chart{{Title: "nothing"}}},
		{
			name:      "line",
			charts:    []Chart{{Title: "rate", Lines: []Line{{Name: "a", X: []float64{0, 1, 2}, Y: []float64{5, 7, 6}}}}},
			wantPaths: 1,
		},
		{
			name:     "log bars",
			charts:   []Chart{{Title: "lateness", LogX: true, Bars: []Bar{{0.5, 1, 3}, {1, 2, 10}, {100, 120, 1}}}},
			wantBars: 3,
		},
		{
			name:   "markup in text is escaped",
			charts: []Chart{{Title: `<b>"x" & y</b>`, XLabel: "a<b", YLabel: "]]>", Lines: []Line{{Name: "&", X: []float64{1}, Y: []float64{1}}}}},
			// a single point still draws a (degenerate) path
			wantPaths: 1,
		},
		{
			name: "non-finite and non-positive values are skipped",
			charts: []Chart{{LogX: true,
				Lines: []Line{{X: []float64{nan, 0, -1, 1, 10, inf}, Y: []float64{1, 2, 3, 4, nan, 6}}},
				Bars:  []Bar{{0, 1, 1}, {1, 2, nan}, {2, 3, 4}}}},
			wantPaths: 1,
			wantBars:  1,
		},
		{
			name: "two charts stacked, mismatched lengths",
			charts: []Chart{
				{Lines: []Line{{X: []float64{1, 2, 3}, Y: []float64{1}}}},
				{Lines: []Line{{X: []float64{-5, 5}, Y: []float64{-1, 1}}, {X: []float64{0}, Y: []float64{0}}}},
			},
			wantPaths: 3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteSVG(&b, tt.charts); err != nil {
				t.Fatalf("WriteSVG: %v", err)
			}
			counts := checkSVG(t, b.Bytes())
			if counts["path"] != tt.wantPaths {
				t.Errorf("%d <path> elements, want %d", counts["path"], tt.wantPaths)
			}
			// one background rect, one frame rect per chart
			if bars := counts["rect"] - 1 - len(tt.charts); bars != tt.wantBars {
				t.Errorf("%d bar rects, want %d", bars, tt.wantBars)
			}
		})
	}
}

func TestFireChartsAreWellFormed(t *testing.T) {
	var h Histogram
	for _, us := range []int64{0, 3, 800, 1200, 1300, 25_000, 400_000} {
		h.Record(us)
	}
	fs := FireStats{
		OfferedRate:   1000,
		SpreadSeconds: 2,
		Receiver: ReceiverStats{
			Lateness:        h.Summary(),
			LatenessBuckets: h.Buckets(),
			MaxLateness:     h.Max(),
			Step:            100 * time.Millisecond,
			Timeline:        []uint64{10, 100, 95, 105, 0, 100},
		},
	}
	charts := fireCharts(fs)
	if len(charts) != 2 {
		t.Fatalf("fireCharts returned %d charts, want 2", len(charts))
	}
	if n := len(charts[0].Bars); n == 0 {
		t.Errorf("lateness chart has no bars")
	}
	var total float64
	for _, b := range charts[0].Bars {
		total += b.Height
	}
	if total != float64(h.Count()) {
		t.Errorf("lateness bars hold %v fires, want %d", total, h.Count())
	}
	rate := charts[1].Lines[0]
	if len(rate.Y) != len(fs.Receiver.Timeline) || rate.Y[1] != 1000 {
		t.Errorf("rate line Y = %v, want 6 points with Y[1] = 1000 fires/s", rate.Y)
	}
	var b bytes.Buffer
	if err := WriteSVG(&b, charts); err != nil {
		t.Fatal(err)
	}
	checkSVG(t, b.Bytes())
	if !strings.Contains(b.String(), "Fires per second") {
		t.Errorf("SVG lacks the rate chart title")
	}
}

func TestRateLinesGroupsLongRunsBySecond(t *testing.T) {
	timeline := make([]uint64, 2*600+5) // 120.5 s in 100 ms steps
	for i := range timeline {
		timeline[i] = 50
	}
	lines := rateLines(timeline, 100*time.Millisecond, 500, 120)
	got := lines[0]
	if len(got.X) != 121 {
		t.Fatalf("%d points, want 121 one-second points", len(got.X))
	}
	if got.Y[0] != 500 || got.X[0] != 0.5 {
		t.Errorf("first point = (%v, %v), want (0.5, 500)", got.X[0], got.Y[0])
	}
}
