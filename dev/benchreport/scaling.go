package benchreport

import (
	"fmt"
	"strings"
)

// Curve is one scaling figure of issue 30: how a cost grows with the
// system (shards and relays, senders, consumer groups, an aggregate's
// log), read from one benchmark's points and drawn as its own table row
// and chart bars.
type Curve struct {
	// Bench is the benchmark's name without "Benchmark" and the
	// -GOMAXPROCS suffix.
	Bench string
	// What says what the points measure.
	What string
	// Points are the figures of the curve, smallest system first.
	Points []Point
	// Ratio is the unit of the large system over the small one ("" when
	// the points are ratios already).
	Ratio string
	// Goal is what the project aims for.
	Goal string
}

// Point is one figure of a curve: a label and the benchmark's unit.
type Point struct{ Label, Unit string }

// Curves are the scaling figures the report shows, when their
// benchmarks ran.
var Curves = []Curve{
	{Bench: "RelayScalingOnSimulatedShards", What: "relay records/s over the simulator's read ceiling (32 shards)",
		Points: []Point{{"1 relay", "1relays_ceiling_ratio"}, {"2 relays", "2relays_ceiling_ratio"}, {"4 relays", "4relays_ceiling_ratio"}, {"8 relays", "8relays_ceiling_ratio"}},
		Goal:   "≥ 0.8 with enough relays"},
	{Bench: "ReplyLatency", What: "SendAndWait round trip p99, ms",
		Points: []Point{{"1 sender", "1sender_p99_ms"}, {"50 senders", "50senders_p99_ms"}}, Ratio: "p99_ratio", Goal: "50 senders ≤ 1.5 × 1"},
	{Bench: "Status", What: "`eventpipe status` reading, ms",
		Points: []Point{{"5 groups", "groups5_ms"}, {"100 groups", "groups100_ms"}}, Ratio: "groups100_vs_5_ratio", Goal: "100 groups ≤ 1.5 × 5"},
	{Bench: "HistoryRuleCommand10000VsTenEventsDynamoDB", What: "history-rule command on DynamoDB, µs",
		Points: []Point{{"10 events", "short_us/cmd"}, {"10,000 events", "long_us/cmd"}}, Ratio: "long/short_ratio", Goal: "10,000 ≤ 2 × 10"},
	{Bench: "HistoryRuleCommand10000VsTenEventsMemstore", What: "history-rule command in memory, µs",
		Points: []Point{{"10 events", "short_us/cmd"}, {"10,000 events", "long_us/cmd"}}, Ratio: "long/short_ratio", Goal: "10,000 ≤ 2 × 10"},
}

// curveRow is a Curve with the figures of one run.
type curveRow struct {
	Curve
	values []float64 // per point; NaN-free: a curve is shown only when every point ran
	ratio  float64
}

// curves returns the Curves whose benchmarks ran in rep, with their
// figures.
func curves(rep Report) []curveRow {
	var out []curveRow
	for _, c := range Curves {
		for _, r := range rep.Results {
			if strings.TrimPrefix(benchName(r.Name), "Benchmark") != c.Bench {
				continue
			}
			row, ok := curveRow{Curve: c}, true
			for _, p := range c.Points {
				v, found := value(r, p.Unit)
				ok = ok && found
				row.values = append(row.values, v)
			}
			if c.Ratio != "" {
				row.ratio, _ = value(r, c.Ratio)
			}
			if ok {
				out = append(out, row)
			}
		}
	}
	return out
}

func value(r Result, unit string) (float64, bool) {
	for _, v := range r.Values {
		if v.Unit == unit {
			return v.Value, true
		}
	}
	return 0, false
}

// scalingMarkdown writes the scaling table, or nothing when no curve's
// benchmark ran.
func scalingMarkdown(b *strings.Builder, rep Report) {
	rows := curves(rep)
	if len(rows) == 0 {
		return
	}
	b.WriteString("\n## Scaling\n\n")
	b.WriteString("How costs grow with the system: each row is one benchmark of the run below.\n\n")
	b.WriteString("| curve | points | large / small | goal |\n| --- | --- | --- | --- |\n")
	for _, r := range rows {
		pts := make([]string, len(r.Points))
		for i, p := range r.Points {
			pts[i] = fmt.Sprintf("%s: %s", p.Label, format(r.values[i]))
		}
		ratio := "-"
		if r.Ratio != "" {
			ratio = "**" + format(r.ratio) + "**"
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", r.What, strings.Join(pts, "<br>"), ratio, r.Goal)
	}
}

// scalingBars are the chart's scaling panel: every point of a curve of
// ratios, and the large/small ratio of the others.
func scalingBars(rep Report) []bar {
	var out []bar
	for _, r := range curves(rep) {
		if r.Ratio == "" {
			for i, p := range r.Points {
				out = append(out, bar{label: r.Bench + ": " + p.Label, value: r.values[i]})
			}
			continue
		}
		out = append(out, bar{label: fmt.Sprintf("%s: %s / %s", r.Bench, r.Points[len(r.Points)-1].Label, r.Points[0].Label), value: r.ratio})
	}
	return out
}
