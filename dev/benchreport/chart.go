package benchreport

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// LatencyTarget is the end-to-end p99 the project aims below, drawn as the
// latency panel's reference line.
const LatencyTarget = 500 // ms

// latencyUnits are the figures of BenchmarkEndToEndLatency the latency
// panel draws, in this order.
var latencyUnits = []string{"p50_ms", "p99_ms", "max_ms"}

// bar is one labelled value of a panel.
type bar struct {
	label string
	value float64
}

// Chart renders the report as a PNG of up to three panels: every ratio
// against its same-run baseline (a line at 1.0 marks the baseline), the
// scaling curves (Curves) and the end-to-end latency percentiles (a line
// marks LatencyTarget). A report with neither
// is an error; a report with only one gets only that panel.
func Chart(w io.Writer, rep Report, at time.Time) error {
	ratios, latency := chartBars(rep)
	scaling := scalingBars(rep)
	if len(ratios) == 0 && len(latency) == 0 {
		return errors.New("benchreport: chart: the report has no ratios and no end-to-end latency figures")
	}
	title := fmt.Sprintf("eventpipe benchmarks, %s, %s", at.UTC().Format("2006-01-02 15:04 MST"), orDash(rep.Machine["cpu"]))
	var (
		plots []*plot.Plot
		rows  []int // bars per plot: its share of the height
	)
	if len(ratios) > 0 {
		p, err := barPlot(title, "ratio to the baseline measured in the same run", ratios, 1, "baseline 1.0",
			color.RGBA{R: 0x2b, G: 0x6c, B: 0xb0, A: 0xff})
		if err != nil {
			return err
		}
		plots, rows = append(plots, p), append(rows, len(ratios))
		title = ""
	}
	if len(scaling) > 0 {
		p, err := barPlot(title, "scaling: relays' share of the simulator's read ceiling; the others, large system over small", scaling, 1, "1.0",
			color.RGBA{R: 0x3a, G: 0x9a, B: 0x5b, A: 0xff})
		if err != nil {
			return err
		}
		plots, rows = append(plots, p), append(rows, len(scaling))
		title = ""
	}
	if len(latency) > 0 {
		p, err := barPlot(title, "end-to-end latency, ms (command sent to read-model row visible)", latency, LatencyTarget,
			fmt.Sprintf("p99 target %d ms", LatencyTarget), color.RGBA{R: 0xd2, G: 0x69, B: 0x1e, A: 0xff})
		if err != nil {
			return err
		}
		plots, rows = append(plots, p), append(rows, max(len(latency), 5))
	}
	// Each panel gets its bars' rows plus room for its title and axis.
	const rowPx, panelPx = 26, 130
	total := 0
	for _, n := range rows {
		total += n*rowPx + panelPx
	}
	img := vgimg.New(vg.Length(1100)*vg.Inch/96, vg.Length(total+60)*vg.Inch/96)
	dc := draw.New(img)
	top := dc.Max.Y
	for i, p := range plots {
		h := (dc.Max.Y - dc.Min.Y) * vg.Length(rows[i]*rowPx+panelPx) / vg.Length(total)
		p.Draw(draw.Canvas{Canvas: dc.Canvas, Rectangle: vg.Rectangle{Min: vg.Point{X: dc.Min.X, Y: top - h}, Max: vg.Point{X: dc.Max.X, Y: top}}})
		top -= h
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(w); err != nil {
		return fmt.Errorf("benchreport: chart: write png: %w", err)
	}
	return nil
}

// chartBars collects the ratios (labelled "benchmark: unit") and the
// end-to-end latency figures of rep.
func chartBars(rep Report) (ratios, latency []bar) {
	for _, r := range rep.Results {
		name := strings.TrimPrefix(benchName(r.Name), "Benchmark")
		for _, v := range r.Values {
			if IsRatio(v.Unit) {
				ratios = append(ratios, bar{label: name + ": " + v.Unit, value: v.Value})
			}
		}
		if name == "EndToEndLatency" {
			for _, u := range latencyUnits {
				for _, v := range r.Values {
					if v.Unit == u {
						latency = append(latency, bar{label: strings.TrimSuffix(u, "_ms"), value: v.Value})
					}
				}
			}
		}
	}
	return ratios, latency
}

// benchName drops the -GOMAXPROCS suffix of a benchmark's name.
func benchName(full string) string {
	if i := strings.LastIndexByte(full, '-'); i > 0 && strings.Trim(full[i+1:], "0123456789") == "" {
		return full[:i]
	}
	return full
}

// barPlot is one horizontal bar chart of bars, first at the top, with a
// dashed vertical reference line at ref.
func barPlot(title, xLabel string, bars []bar, ref float64, refLabel string, fill color.Color) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(14)
	p.X.Label.Text = xLabel
	values := make(plotter.Values, len(bars))
	labels := make([]string, len(bars))
	most := ref
	for i, b := range bars {
		// Bottom to top, so that the first bar is drawn at the top.
		values[len(bars)-1-i] = b.value
		labels[len(bars)-1-i] = fmt.Sprintf("%s  %s", b.label, format(b.value))
		most = math.Max(most, b.value)
	}
	chart, err := plotter.NewBarChart(values, vg.Points(14))
	if err != nil {
		return nil, fmt.Errorf("benchreport: chart: %w", err)
	}
	chart.Horizontal = true
	chart.Color = fill
	chart.LineStyle.Width = 0
	p.Add(chart)
	line, err := plotter.NewLine(plotter.XYs{{X: ref, Y: -0.5}, {X: ref, Y: float64(len(bars)) - 0.5}})
	if err != nil {
		return nil, fmt.Errorf("benchreport: chart: %w", err)
	}
	line.Color = color.RGBA{R: 0xc0, A: 0xff}
	line.Width = vg.Points(1.5)
	line.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
	p.Add(line)
	p.Legend.Add(refLabel, line)
	p.Legend.Top = true
	p.NominalY(labels...)
	p.X.Min, p.X.Max = 0, most*1.3 // room for the legend, top right
	p.Add(plotter.NewGrid())
	return p, nil
}
