package eventpipe_test

import (
	"testing"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/buildinfo"
)

func TestMetricsRegistryExportsTheBuild(t *testing.T) {
	families, err := eventpipe.NewMetricsRegistry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := buildinfo.Read()
	for _, f := range families {
		if f.GetName() != "eventpipe_build_info" {
			continue
		}
		if len(f.GetMetric()) != 1 || f.GetMetric()[0].GetGauge().GetValue() != 1 {
			t.Fatalf("eventpipe_build_info: %v, want one gauge at 1", f.GetMetric())
		}
		labels := map[string]string{}
		for _, l := range f.GetMetric()[0].GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["version"] != want.Version || labels["goversion"] != want.GoVersion || labels["commit"] == "" {
			t.Fatalf("eventpipe_build_info labels %v, want version %q, goversion %q and a commit", labels, want.Version, want.GoVersion)
		}
		return
	}
	t.Fatal("no eventpipe_build_info in the registry")
}
