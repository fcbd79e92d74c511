package benchreport_test

import (
	"strings"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/dev/benchreport"
)

const scalingOutput = `pkg: github.com/eventpipe/eventpipe/relay
cpu: AMD EPYC
BenchmarkRelayScalingOnSimulatedShards-2   	     300	         0.9987 1relays_ceiling_ratio	      2283 1relays_records/s	         0.9475 2relays_ceiling_ratio	      2067 2relays_records/s	         0.8786 4relays_ceiling_ratio	      1917 4relays_records/s	         0.9006 8relays_ceiling_ratio	      2059 8relays_records/s
pkg: github.com/eventpipe/eventpipe
BenchmarkReplyLatency-2   	     200	        10.62 1sender_p50_ms	        25.15 1sender_p99_ms	        12.33 50senders_p50_ms	        34.31 50senders_p99_ms	         1.364 p99_ratio
BenchmarkStatus-2   	     300	        41.0 groups5_ms	        42.2 groups100_ms	         1.03 groups100_vs_5_ratio
`

// TestScalingCurvesGetATableAndAPanel: the curves whose benchmarks ran
// get a row each with their points, the large/small ratio and the goal;
// a curve whose benchmark did not run (the history rule's) gets none;
// the chart gets the scaling panel (green).
func TestScalingCurvesGetATableAndAPanel(t *testing.T) {
	rep, err := benchreport.Parse(strings.NewReader(scalingOutput))
	if err != nil {
		t.Fatal(err)
	}
	var md strings.Builder
	if err := benchreport.Markdown(&md, rep, time.Date(2026, 11, 27, 7, 0, 0, 0, time.UTC), "go1.26"); err != nil {
		t.Fatal(err)
	}
	out := md.String()
	for _, want := range []string{
		"## Scaling",
		"| relay records/s over the simulator's read ceiling (32 shards) | 1 relay: 0.999<br>2 relays: 0.948<br>4 relays: 0.879<br>8 relays: 0.901 | - | ≥ 0.8 with enough relays |",
		"| SendAndWait round trip p99, ms | 1 sender: 25.15<br>50 senders: 34.31 | **1.36** | 50 senders ≤ 1.5 × 1 |",
		"| `eventpipe status` reading, ms | 5 groups: 41.00<br>100 groups: 42.20 | **1.03** | 100 groups ≤ 1.5 × 5 |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "history-rule") {
		t.Errorf("a curve whose benchmark did not run has a row:\n%s", out)
	}
	if strings.Index(out, "## Scaling") > strings.Index(out, "## github.com/eventpipe/eventpipe") {
		t.Error("the scaling table should come before the per-package tables")
	}
	img := chart(t, scalingOutput)
	if n := colored(img, 0x3a, 0x9a, 0x5b); n < 1000 {
		t.Errorf("the scaling panel has %d green pixels, want its bars", n)
	}
	if only := chart(t, output); colored(only, 0x3a, 0x9a, 0x5b) > 0 {
		t.Error("a report without scaling curves drew a scaling panel")
	}
}
