package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Result is what one workload run produced. It marshals to the JSON result
// file; the sections that do not apply to a workload are nil.
type Result struct {
	// Workload is the workload's name, e.g. "fire".
	Workload string `json:"workload"`
	// Started is when the run began; Seconds how long it took in total.
	Started time.Time `json:"started"`
	Seconds float64   `json:"seconds"`
	// Env describes the machine the run was on.
	Env Env `json:"env"`
	// Config is the workload's configuration as run (defaults applied).
	Config any `json:"config"`
	// Node describes the node under test (nil for baseline workloads); for
	// a cluster, the sum over its nodes.
	Node *NodeStats `json:"node,omitempty"`
	// Nodes describes each node of a cluster (nil for a single node).
	Nodes []NodeStats `json:"nodes,omitempty"`

	HTTPBaseline   *HTTPBaselineResult   `json:"baseline_http,omitempty"`
	PebbleBaseline *PebbleBaselineResult `json:"baseline_pebble,omitempty"`
	Create         *CreateStats          `json:"create,omitempty"`
	Fire           *FireStats            `json:"fire,omitempty"`
	Scale          *ScaleStats           `json:"scale,omitempty"`
	Periodic       *PeriodicStats        `json:"periodic,omitempty"`
	// Routes are the create phases of --route compare or sdk-compare, in
	// order (Create is the first).
	Routes   []CreateStats  `json:"routes,omitempty"`
	Failover *FailoverStats `json:"failover,omitempty"`
	Join     *JoinStats     `json:"join,omitempty"`
	Idle     *IdleStats     `json:"idle,omitempty"`
	Overload *OverloadStats `json:"overload,omitempty"`

	// Summary is the table printed at the end: each Chime figure next to
	// its in-run ceiling.
	Summary []Row `json:"summary"`
	// Warnings are conditions that make the numbers less trustworthy
	// (e.g. the receiver near its capacity, creation overrunning dues).
	Warnings []string `json:"warnings,omitempty"`
	// Charts are plotted into the SVG written next to the JSON.
	Charts []Chart `json:"-"`
}

// Row is one line of the summary table. Ratio is Value / Ceiling: for a
// rate, 1.0 means Chime reached the bare ceiling; for a cost (CPU per
// operation) lower is better and the ratio says how many times the bare
// cost Chime spends.
type Row struct {
	Metric string  `json:"metric"`
	Value  float64 `json:"value"`
	// Text, when set, is shown instead of Value (e.g. "never").
	Text        string  `json:"text,omitempty"`
	Unit        string  `json:"unit"`
	Ceiling     float64 `json:"ceiling,omitempty"`
	CeilingName string  `json:"ceiling_name,omitempty"`
	Ratio       float64 `json:"ratio,omitempty"`
}

// row builds a Row, computing the ratio when there is a ceiling.
func row(metric string, value float64, unit string, ceiling float64, ceilingName string) Row {
	r := Row{Metric: metric, Value: value, Unit: unit}
	if ceiling > 0 && !math.IsNaN(value) && !math.IsInf(value, 0) {
		r.Ceiling, r.CeilingName = ceiling, ceilingName
		r.Ratio = math.Round(value/ceiling*1000) / 1000
	}
	return r
}

// Env describes the machine a run was on.
type Env struct {
	GoVersion  string `json:"go_version"`
	OS         string `json:"os"`
	Arch       string `json:"arch"`
	NumCPU     int    `json:"num_cpu"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	Kernel     string `json:"kernel,omitempty"`
	// LoadAvg is /proc/loadavg at the start of the run: other work on the
	// box skews absolute numbers, which is why ratios are reported.
	LoadAvg string `json:"loadavg,omitempty"`
}

// currentEnv describes this machine now.
func currentEnv() Env {
	e := Env{
		GoVersion:  runtime.Version(),
		OS:         runtime.GOOS,
		Arch:       runtime.GOARCH,
		NumCPU:     runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		e.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		e.LoadAvg = strings.TrimSpace(string(b))
	}
	return e
}

// WriteMarkdown writes the summary table and the warnings as markdown.
func (r *Result) WriteMarkdown(w io.Writer) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "### chime bench %s — %s\n\n", r.Workload, r.Started.UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "%s/%s, %d CPUs, %s, load %s\n\n", r.Env.OS, r.Env.Arch, r.Env.NumCPU, r.Env.GoVersion, loadShort(r.Env.LoadAvg))
	b.WriteString("| metric | chime | ceiling | ratio |\n|---|---:|---:|---:|\n")
	for _, row := range r.Summary {
		ceiling, ratio := "—", "—"
		if row.Ceiling > 0 {
			ceiling = fmt.Sprintf("%s (%s)", strings.TrimSpace(fmtNum(row.Ceiling)+" "+row.Unit), row.CeilingName)
			ratio = strconv.FormatFloat(row.Ratio, 'f', 3, 64)
		}
		value := strings.TrimSpace(fmtNum(row.Value) + " " + row.Unit)
		if row.Text != "" {
			value = row.Text
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", row.Metric, value, ceiling, ratio)
	}
	if len(r.Nodes) > 1 {
		writeNodes(&b, r.Nodes, r.Node)
	}
	for _, warn := range r.Warnings {
		fmt.Fprintf(&b, "\n> warning: %s\n", warn)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// writeNodes writes the per-node table of a cluster run and the total.
func writeNodes(b *bytes.Buffer, nodes []NodeStats, total *NodeStats) {
	mib := func(v int64) string { return fmtNum(float64(v) / (1 << 20)) }
	b.WriteString("\n| node | pid | CPU s | RSS MiB | peak RSS MiB | disk MiB |\n|---|---:|---:|---:|---:|---:|\n")
	line := func(name string, pid int, n NodeStats) {
		p := "—"
		if pid > 0 {
			p = strconv.Itoa(pid)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |\n", name, p, fmtNum(n.CPUSeconds), mib(n.RSSBytes), mib(n.PeakRSSBytes), mib(n.DiskBytes))
	}
	for _, n := range nodes {
		name := n.Name
		if name == "" {
			name = n.URL
		}
		if n.Killed {
			name += " (killed; figures from before the kill)"
		}
		line(name, n.PID, n)
	}
	if total != nil {
		line("**total**", 0, *total)
	}
}

// loadShort returns the 1-, 5- and 15-minute load averages of a
// /proc/loadavg line.
func loadShort(loadavg string) string {
	f := strings.Fields(loadavg)
	if len(f) < 3 {
		return "n/a"
	}
	return strings.Join(f[:3], " ")
}

// Save writes the result into dir (created if missing) as
// <workload>-<UTC timestamp>.json, the summary as .md next to it and, when
// the result has charts, an .svg. It returns the paths written.
func Save(dir string, r *Result) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("bench: create output dir: %w", err)
	}
	base := filepath.Join(dir, fmt.Sprintf("%s-%s", r.Workload, r.Started.UTC().Format("20060102T150405Z")))
	var paths []string
	write := func(path string, fn func(io.Writer) error) error {
		var b bytes.Buffer
		if err := fn(&b); err != nil {
			return err
		}
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			return fmt.Errorf("bench: write %s: %w", path, err)
		}
		paths = append(paths, path)
		return nil
	}
	err := write(base+".json", func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	})
	if err == nil {
		err = write(base+".md", r.WriteMarkdown)
	}
	if err == nil && len(r.Charts) > 0 {
		err = write(base+".svg", func(w io.Writer) error { return WriteSVG(w, r.Charts) })
	}
	return paths, err
}

// fmtNum formats a figure for humans: thousands separators for large
// values, three significant digits for small ones.
func fmtNum(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "n/a"
	case math.Abs(v) >= 1000:
		s := strconv.FormatInt(int64(math.Round(v)), 10)
		neg := strings.HasPrefix(s, "-")
		s = strings.TrimPrefix(s, "-")
		var b strings.Builder
		for i, c := range s {
			if i > 0 && (len(s)-i)%3 == 0 {
				b.WriteByte(',')
			}
			b.WriteRune(c)
		}
		if neg {
			return "-" + b.String()
		}
		return b.String()
	case math.Abs(v) >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v == 0:
		return "0"
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}
