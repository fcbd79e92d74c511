package benchreport_test

import (
	"bytes"
	"image"
	"image/png"
	"strings"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/dev/benchreport"
)

const latencyOutput = `pkg: github.com/eventpipe/eventpipe
cpu: AMD EPYC
BenchmarkEndToEndLatency-2   	     300	         0 ns/op	        76 ceiling_commands/s	        82 p50_ms	       145 p99_ms	       175 max_ms	         0.69 relay_share
`

// chart renders out and decodes the PNG.
func chart(t *testing.T, out string) image.Image {
	t.Helper()
	rep, err := benchreport.Parse(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := benchreport.Chart(&buf, rep, time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatalf("the chart is not a PNG: %v", err)
	}
	return img
}

// colored counts the pixels of img whose colour is close to (r, g, b).
func colored(img image.Image, r, g, b uint32) int {
	n := 0
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			pr, pg, pb, _ := img.At(x, y).RGBA()
			near := func(a, b uint32) bool { return a>>8 <= b+24 && a>>8+24 >= b }
			if near(pr, r) && near(pg, g) && near(pb, b) {
				n++
			}
		}
	}
	return n
}

// TestChartDrawsEveryRatioAndTheLatency renders the ratios of three
// benchmarks and the end-to-end latency: the ratio bars (blue) cover an
// area that grows with their values, the latency bars (orange) are there,
// and the image is as wide as intended.
func TestChartDrawsEveryRatioAndTheLatency(t *testing.T) {
	img := chart(t, output+latencyOutput)
	if w := img.Bounds().Dx(); w != 1100 {
		t.Errorf("chart is %d px wide, want 1100", w)
	}
	blue, orange := colored(img, 0x2b, 0x6c, 0xb0), colored(img, 0xd2, 0x69, 0x1e)
	t.Logf("%v, %d blue and %d orange pixels", img.Bounds(), blue, orange)
	if blue < 5000 {
		t.Errorf("%d pixels of ratio bars; want the three ratios drawn", blue)
	}
	if orange < 5000 {
		t.Errorf("%d pixels of latency bars; want p50, p99 and max drawn", orange)
	}
	// A smaller ratio draws a shorter bar.
	shrunk := strings.Replace(output, "0.95 applier/raw", "0.1 applier/raw", 1)
	if got := colored(chart(t, shrunk), 0x2b, 0x6c, 0xb0); got > blue*85/100 {
		t.Errorf("applier/raw 0.1 instead of 0.95 drew %d blue pixels, 0.95 drew %d: bars do not follow the values", got, blue)
	}
}

// TestChartOfLatencyOnlyAndOfNothing: a run with only the latency
// benchmark still gets its panel; a run with nothing to chart is an error.
func TestChartOfLatencyOnlyAndOfNothing(t *testing.T) {
	img := chart(t, latencyOutput)
	if colored(img, 0xd2, 0x69, 0x1e) == 0 || colored(img, 0x2b, 0x6c, 0xb0) != 0 {
		t.Error("a latency-only chart should have latency bars and no ratio bars")
	}
	rep, err := benchreport.Parse(strings.NewReader("pkg: x\nBenchmarkPlain-2 \t 10 \t 100 ns/op\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := benchreport.Chart(&bytes.Buffer{}, rep, time.Now()); err == nil {
		t.Error("a report with no ratio and no latency drew a chart; want an error")
	}
}
