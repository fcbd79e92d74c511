package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKeepsTheHandMeasuredSection writes the Markdown over a file that
// holds stale generated figures and a section from KeptMarker on: the
// generated part is replaced, the kept section stays as it was, once.
func TestKeepsTheHandMeasuredSection(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "bench.out")
	bench := "goos: linux\ngoarch: amd64\npkg: github.com/eventpipe/eventpipe\n" +
		"BenchmarkThing-2   \t     300\t      1000 ns/op\t         0.91 ratio\nPASS\n"
	if err := os.WriteFile(in, []byte(bench), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "benchmarks.md")
	kept := KeptMarker + "\n\n## Cold builds\n\n| before | after |\n| 11m | 6m |\n"
	if err := os.WriteFile(out, []byte("# Benchmarks\n\nstale figures: BenchmarkOld\n\n"+kept), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := run([]string{"--in", in, "--out", out}, io.Discard, io.Discard); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	if strings.Contains(got, "BenchmarkOld") || !strings.Contains(got, "Thing") {
		t.Errorf("generated part not rewritten:\n%s", got)
	}
	if !strings.HasSuffix(got, "\n"+kept) || strings.Count(got, KeptMarker) != 1 {
		t.Errorf("kept section lost or repeated:\n%s", got)
	}
}
