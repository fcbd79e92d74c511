package benchreport_test

import (
	"strings"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/dev/benchreport"
)

const output = `2026/11/23 12:00:00 INFO created events table table=events-bench
goos: linux
goarch: amd64
pkg: github.com/eventpipe/eventpipe/eventstore/dynamodb
cpu: AMD EPYC
BenchmarkAppend/concurrency=8-2   	     300	         0 ns/op	       812.5 appends/s	      1000 raw_appends/s	         0.8125 throughput_ratio	        12.5 p50_ms
2026/11/23 12:00:05 INFO deleted table
PASS
ok  	github.com/eventpipe/eventpipe/eventstore/dynamodb	12.3s
pkg: github.com/eventpipe/eventpipe/projections/readmodels
BenchmarkApplier-2   	     1	  1500 ns/op	  9500 applier_events/s	   0.95 applier/raw
pkg: github.com/eventpipe/eventpipe
BenchmarkCommandsThroughBus-2   	2026/11/23 12:27:24 INFO created events table table=events-x
2026/11/23 12:27:25 INFO Subscribing to Kafka topic topic=commands.todo
     300	        23.84 commands/s	        19.82 direct_commands/s	         1.203 ratio
PASS
`

func TestParseSkipsLogLinesAndMarkdownPutsRatiosFirst(t *testing.T) {
	rep, err := benchreport.Parse(strings.NewReader(output))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 3 || rep.Machine["cpu"] != "AMD EPYC" || rep.Results[1].Package != "github.com/eventpipe/eventpipe/projections/readmodels" {
		t.Fatalf("parsed %+v", rep)
	}
	var md strings.Builder
	if err := benchreport.Markdown(&md, rep, time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC), "go1.26.8"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"- machine: linux/amd64, AMD EPYC",
		"| Append/concurrency=8-2 | **0.812 throughput_ratio** | 812 appends/s<br>1000 raw_appends/s<br>12.50 p50_ms |",
		"| Applier-2 | **0.950 applier/raw** | 1500 ns/op<br>9500 applier_events/s |",
		"| CommandsThroughBus-2 | **1.20 ratio** | 23.84 commands/s<br>19.82 direct_commands/s |",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	if strings.Contains(md.String(), "INFO") || strings.Contains(md.String(), " 0 ns/op") {
		t.Errorf("log lines or zeroed ns/op leaked:\n%s", md.String())
	}
	if _, err := benchreport.Parse(strings.NewReader("2026/11/23 INFO nothing\nPASS\n")); err == nil {
		t.Error("a run without results parsed without an error")
	}
}
