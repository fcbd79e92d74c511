// Command bench-report writes `go test -bench` output as the Markdown of
// docs/benchmarks.md and, with --png, a chart of the ratios and the
// end-to-end latency. `make bench` runs it (go run ./cmd/bench-report).
//
// It is a developer tool of its own, not a subcommand of cmd/eventpipe:
// the chart is drawn with gonum.org/v1/plot (and golang.org/x/image, fonts
// and a LaTeX renderer), which the production binary has no use for
// (issue 36, build only what runs).
//
// Usage:
//
//	bench-report --in .bench.out [--out docs/benchmarks.md] [--png docs/benchmarks.png]
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/eventpipe/eventpipe/dev/benchreport"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "bench-report:", err)
		}
		os.Exit(2)
	}
}

// run is the command with its arguments (without the program name),
// reporting to stdout; flag errors and usage go to stderr.
func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench-report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("in", "", "go test -bench output (required)")
	out := fs.String("out", "docs/benchmarks.md", "the Markdown file to write")
	png := fs.String("png", "", "also draw the ratios and the end-to-end latency as a PNG chart here (make bench: docs/benchmarks.png)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: bench-report --in FILE [--out FILE.md] [--png FILE.png]")
		fmt.Fprintln(stderr, "Write go test -bench output as Markdown and a chart (make bench uses it for docs/benchmarks.md and .png).")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *in == "" {
		fs.Usage()
		return errors.New("--in is required")
	}
	f, err := os.Open(*in)
	if err != nil {
		return err
	}
	defer f.Close()
	rep, err := benchreport.Parse(f)
	if err != nil {
		return err
	}
	now := time.Now()
	kept, err := keptSection(*out)
	if err != nil {
		return err
	}
	if err := writeFile(*out, func(w io.Writer) error {
		if err := benchreport.Markdown(w, rep, now, runtime.Version()); err != nil {
			return err
		}
		_, err := io.WriteString(w, kept)
		return err
	}); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d benchmark results written to %s\n", len(rep.Results), *out)
	if *png == "" {
		return nil
	}
	if err := writeFile(*png, func(w io.Writer) error { return benchreport.Chart(w, rep, now) }); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "chart written to %s\n", *png)
	return nil
}

// KeptMarker starts the part of the Markdown file that bench-report keeps
// as it is when it writes the file again: figures measured by hand, such
// as cold build times, which no benchmark of the run measures.
const KeptMarker = "<!-- kept by bench-report: measured by hand, not by make bench -->"

// keptSection returns the part of the file at path from KeptMarker on
// (with a blank line before it), or "" when the file or the marker is
// missing.
func keptSection(path string) (string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	i := strings.Index(string(b), KeptMarker)
	if i < 0 {
		return "", nil
	}
	return "\n" + string(b[i:]), nil
}

// writeFile creates path and fills it with write.
func writeFile(path string, write func(io.Writer) error) error {
	w, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(w); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}
