// Package benchreport turns `go test -bench` output into the Markdown of
// docs/benchmarks.md: one table per package with every benchmark's
// figures, the ratios against the baselines measured in the same run
// first, and the machine and the date. Log lines mixed into the output
// are ignored. `make bench` runs it through cmd/bench-report, a
// developer tool of its own: the chart's plotting library stays out of
// the eventpipe binary.
package benchreport

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/perf/benchfmt"
)

// Result is one benchmark's figures.
type Result struct {
	Package string
	Name    string
	Iters   int
	Values  []Value // in the order the benchmark reported them
}

// Value is one figure as the benchmark reported it.
type Value struct {
	Value float64
	Unit  string
}

// Report is what one `go test -bench` run printed.
type Report struct {
	Machine map[string]string // goos, goarch, cpu
	Results []Result
}

// Parse reads `go test -bench` output. Lines that are not benchmark
// results or configuration (test logs) are skipped. A run without any
// result is an error.
func Parse(r io.Reader) (Report, error) {
	rep := Report{Machine: map[string]string{}}
	stitched, err := stitch(r)
	if err != nil {
		return rep, err
	}
	br := benchfmt.NewReader(stitched, "bench output")
	for br.Scan() {
		res, ok := br.Result().(*benchfmt.Result)
		if !ok {
			continue // a *benchfmt.SyntaxError: a log line
		}
		for _, k := range []string{"goos", "goarch", "cpu"} {
			if v := res.GetConfig(k); v != "" {
				rep.Machine[k] = strings.TrimSpace(v)
			}
		}
		vals := make([]Value, 0, len(res.Values))
		for _, v := range res.Values {
			val := Value{Value: v.OrigValue, Unit: v.OrigUnit}
			if val.Unit == "" {
				val = Value{Value: v.Value, Unit: v.Unit}
			}
			if val.Unit == "ns/op" && val.Value == 0 {
				continue // benchmarks that report rates zero out ns/op
			}
			vals = append(vals, val)
		}
		rep.Results = append(rep.Results, Result{Package: res.GetConfig("pkg"), Name: string(res.Name.Full()), Iters: res.Iters, Values: vals})
	}
	if err := br.Err(); err != nil {
		return rep, fmt.Errorf("benchreport: %w", err)
	}
	if len(rep.Results) == 0 {
		return rep, errors.New("benchreport: no benchmark results in the input")
	}
	return rep, nil
}

var (
	// nameThenLog is a benchmark's name followed, on the same line, by a
	// log line that the benchmark printed before its figures.
	nameThenLog = regexp.MustCompile(`^(Benchmark\S+)\s+(\S.*)?$`)
	// figures is a result line without its name: iterations, then
	// value-unit pairs.
	figures = regexp.MustCompile(`^\s+\d+\s+[-+0-9.eE]+\s+\S+`)
)

// stitch puts back together a result that log lines split: `go test`
// prints a benchmark's name, then whatever the benchmark logs, then its
// figures on a line of their own.
func stitch(r io.Reader) (io.Reader, error) {
	var out bytes.Buffer
	pending := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := nameThenLog.FindStringSubmatch(line); m != nil && !figures.MatchString(" "+m[2]) {
			pending = m[1]
			continue
		}
		if pending != "" && figures.MatchString(line) {
			line = pending + line
			pending = ""
		}
		out.WriteString(line)
		out.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("benchreport: read: %w", err)
	}
	return &out, nil
}

// IsRatio reports whether a unit is a ratio against a same-run baseline
// (named "ratio", "…_ratio" or "x/raw").
func IsRatio(unit string) bool {
	return unit == "ratio" || strings.HasSuffix(unit, "_ratio") || strings.HasSuffix(unit, "/raw")
}

// Markdown writes the report: the machine and date, then per package a
// table of benchmarks with their ratios and their other figures.
func Markdown(w io.Writer, rep Report, at time.Time, goVersion string) error {
	var b strings.Builder
	b.WriteString("# Benchmarks\n\n")
	b.WriteString("Written by `make bench` from one run of every benchmark; do not edit by hand.\n")
	b.WriteString("Every ratio compares eventpipe with a raw baseline measured in the same run, on the same\n")
	b.WriteString("services, so it holds across machines far better than the absolute figures.\n\n")
	b.WriteString("![Every ratio against its baseline, and the end-to-end latency](benchmarks.png)\n\n")
	fmt.Fprintf(&b, "- date: %s\n", at.UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "- machine: %s/%s, %s\n", rep.Machine["goos"], rep.Machine["goarch"], orDash(rep.Machine["cpu"]))
	fmt.Fprintf(&b, "- Go: %s\n", goVersion)
	scalingMarkdown(&b, rep)
	var pkgs []string
	for _, r := range rep.Results {
		if !slices.Contains(pkgs, r.Package) {
			pkgs = append(pkgs, r.Package)
		}
	}
	for _, pkg := range pkgs {
		fmt.Fprintf(&b, "\n## %s\n\n", orDash(pkg))
		b.WriteString("| benchmark | ratios | figures |\n| --- | --- | --- |\n")
		for _, r := range rep.Results {
			if r.Package != pkg {
				continue
			}
			var ratios, figures []string
			for _, v := range r.Values {
				s := fmt.Sprintf("%s %s", format(v.Value), v.Unit)
				if IsRatio(v.Unit) {
					ratios = append(ratios, "**"+s+"**")
				} else {
					figures = append(figures, s)
				}
			}
			fmt.Fprintf(&b, "| %s | %s | %s |\n", strings.TrimPrefix(r.Name, "Benchmark"), orDash(strings.Join(ratios, "<br>")), orDash(strings.Join(figures, "<br>")))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func format(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
