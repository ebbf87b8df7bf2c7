package bench

import (
	"bufio"
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strconv"
)

// Chart is one plot: lines and/or bars on shared axes. WriteSVG stacks
// charts vertically in one SVG document.
type Chart struct {
	Title  string
	XLabel string
	YLabel string
	// LogX puts the x axis on a log10 scale; values ≤ 0 are then skipped.
	LogX  bool
	Lines []Line
	Bars  []Bar
}

// Line is a polyline through (X[i], Y[i]); X and Y have equal length.
// Non-finite points are skipped.
type Line struct {
	Name string
	X, Y []float64
}

// Bar covers [From, To] on the x axis with the given Height.
type Bar struct {
	From, To, Height float64
}

// Layout of one chart, in SVG user units.
const (
	svgWidth    = 800
	chartHeight = 320
	padLeft     = 80
	padRight    = 20
	padTop      = 36
	padBottom   = 52
)

// lineColor is the stroke of the i-th line of a chart.
func lineColor(i int) string {
	colors := [...]string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd"}
	return colors[i%len(colors)]
}

// WriteSVG renders charts into one standalone SVG document. It writes only
// well-formed XML (all text is escaped) and needs nothing but w.
func WriteSVG(w io.Writer, charts []Chart) error {
	bw := bufio.NewWriter(w)
	height := max(len(charts), 1) * chartHeight
	fmt.Fprintf(bw, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		svgWidth, height, svgWidth, height)
	fmt.Fprintf(bw, `<rect x="0" y="0" width="%d" height="%d" fill="white"/>`+"\n", svgWidth, height)
	for i, c := range charts {
		fmt.Fprintf(bw, `<g transform="translate(0,%d)">`+"\n", i*chartHeight)
		writeChart(bw, c)
		bw.WriteString("</g>\n")
	}
	bw.WriteString("</svg>\n")
	return bw.Flush()
}

// axis maps data values to pixels along one dimension.
type axis struct {
	lo, hi     float64 // data range (log10 of it when log)
	plo, phi   float64 // pixel range
	log        bool
	ticks      []float64 // in data units
	tickLabels []string
}

func (a *axis) pos(v float64) float64 {
	if a.log {
		v = math.Log10(v)
	}
	if a.hi == a.lo {
		return (a.plo + a.phi) / 2
	}
	return a.plo + (v-a.lo)/(a.hi-a.lo)*(a.phi-a.plo)
}

// usable reports whether v can be placed on the axis.
func (a *axis) usable(v float64) bool {
	return !math.IsNaN(v) && !math.IsInf(v, 0) && (!a.log || v > 0)
}

func writeChart(w *bufio.Writer, c Chart) {
	x := axis{plo: padLeft, phi: svgWidth - padRight, log: c.LogX}
	y := axis{plo: chartHeight - padBottom, phi: padTop}
	xs, ys := chartExtent(c, &x)
	x.setRange(xs)
	y.setRange(append(ys, 0)) // bars and rates start at zero

	fmt.Fprintf(w, `<text x="%d" y="20" font-size="14" font-weight="bold">%s</text>`+"\n", padLeft, esc(c.Title))
	fmt.Fprintf(w, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", (padLeft+svgWidth-padRight)/2, chartHeight-10, esc(c.XLabel))
	fmt.Fprintf(w, `<text x="16" y="%d" text-anchor="middle" transform="rotate(-90 16 %d)">%s</text>`+"\n",
		(chartHeight-padBottom+padTop)/2, (chartHeight-padBottom+padTop)/2, esc(c.YLabel))
	// Frame and grid.
	fmt.Fprintf(w, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888"/>`+"\n",
		padLeft, padTop, svgWidth-padLeft-padRight, chartHeight-padTop-padBottom)
	for i, t := range x.ticks {
		px := x.pos(t)
		fmt.Fprintf(w, `<line x1="%s" y1="%d" x2="%s" y2="%d" stroke="#ddd"/>`+"\n", f1(px), padTop, f1(px), chartHeight-padBottom)
		fmt.Fprintf(w, `<text x="%s" y="%d" text-anchor="middle">%s</text>`+"\n", f1(px), chartHeight-padBottom+16, esc(x.tickLabels[i]))
	}
	for i, t := range y.ticks {
		py := y.pos(t)
		fmt.Fprintf(w, `<line x1="%d" y1="%s" x2="%d" y2="%s" stroke="#ddd"/>`+"\n", padLeft, f1(py), svgWidth-padRight, f1(py))
		fmt.Fprintf(w, `<text x="%d" y="%s" text-anchor="end">%s</text>`+"\n", padLeft-6, f1(py+4), esc(y.tickLabels[i]))
	}
	if len(xs) == 0 {
		fmt.Fprintf(w, `<text x="%d" y="%d" text-anchor="middle" fill="#888">no data</text>`+"\n",
			(padLeft+svgWidth-padRight)/2, (chartHeight-padBottom+padTop)/2)
		return
	}
	base := y.pos(0)
	for _, b := range c.Bars {
		if !x.usable(b.From) || !x.usable(b.To) || !y.usable(b.Height) {
			continue
		}
		x0, x1 := x.pos(b.From), x.pos(b.To)
		top := y.pos(b.Height)
		fmt.Fprintf(w, `<rect x="%s" y="%s" width="%s" height="%s" fill="#1f77b4" fill-opacity="0.7"/>`+"\n",
			f1(x0), f1(top), f1(max(x1-x0, 1)), f1(max(base-top, 0)))
	}
	for i, l := range c.Lines {
		var d bytes.Buffer
		for j := range min(len(l.X), len(l.Y)) {
			if !x.usable(l.X[j]) || !y.usable(l.Y[j]) {
				continue
			}
			cmd := "L"
			if d.Len() == 0 {
				cmd = "M"
			}
			fmt.Fprintf(&d, "%s%s %s ", cmd, f1(x.pos(l.X[j])), f1(y.pos(l.Y[j])))
		}
		color := lineColor(i)
		if d.Len() > 0 {
			fmt.Fprintf(w, `<path d="%s" fill="none" stroke="%s" stroke-width="1.5"/>`+"\n", bytes.TrimSpace(d.Bytes()), color)
		}
		if l.Name != "" {
			fmt.Fprintf(w, `<text x="%d" y="%d" fill="%s" text-anchor="end">%s</text>`+"\n",
				svgWidth-padRight-6, padTop+16+14*i, color, esc(l.Name))
		}
	}
}

// chartExtent returns the usable x and y values of c.
func chartExtent(c Chart, x *axis) (xs, ys []float64) {
	for _, b := range c.Bars {
		if x.usable(b.From) && x.usable(b.To) && !math.IsNaN(b.Height) && !math.IsInf(b.Height, 0) {
			xs = append(xs, b.From, b.To)
			ys = append(ys, b.Height)
		}
	}
	for _, l := range c.Lines {
		for j := range min(len(l.X), len(l.Y)) {
			if x.usable(l.X[j]) && !math.IsNaN(l.Y[j]) && !math.IsInf(l.Y[j], 0) {
				xs = append(xs, l.X[j])
				ys = append(ys, l.Y[j])
			}
		}
	}
	return xs, ys
}

// setRange sets the axis range to cover vals (with round tick values) and
// computes its ticks. An empty vals gives [0, 1] (or [1, 10] on log).
func (a *axis) setRange(vals []float64) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range vals {
		if a.log {
			v = math.Log10(v)
		}
		lo, hi = min(lo, v), max(hi, v)
	}
	if math.IsInf(lo, 1) {
		lo, hi = 0, 1
	}
	if a.log {
		a.lo, a.hi = math.Floor(lo), math.Ceil(hi)
		if a.hi == a.lo {
			a.hi++
		}
		for e := a.lo; e <= a.hi; e++ {
			a.ticks = append(a.ticks, math.Pow(10, e))
			a.tickLabels = append(a.tickLabels, fmtTick(math.Pow(10, e)))
		}
		return
	}
	if hi == lo {
		hi = lo + 1
	}
	step := niceStep((hi - lo) / 5)
	a.lo, a.hi = math.Floor(lo/step)*step, math.Ceil(hi/step)*step
	for t := a.lo; t <= a.hi+step/2; t += step {
		a.ticks = append(a.ticks, t)
		a.tickLabels = append(a.tickLabels, fmtTick(t))
	}
}

// niceStep rounds a raw tick step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	switch f := raw / p; {
	case f <= 1:
		return p
	case f <= 2:
		return 2 * p
	case f <= 5:
		return 5 * p
	}
	return 10 * p
}

func fmtTick(v float64) string {
	if math.Abs(v) < 1e-9 {
		return "0"
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

func esc(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s)) // writes to a bytes.Buffer never fail
	return b.String()
}
