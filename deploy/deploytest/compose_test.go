package deploytest

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/loader"
	composetypes "github.com/compose-spec/compose-go/v2/types"
	"github.com/prometheus/common/model"
	promconfig "github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/discovery"
	"github.com/prometheus/prometheus/discovery/dns" // registers dns_sd_configs, as the compose Prometheus uses
	chartloader "helm.sh/helm/v4/pkg/chart/v2/loader"
	"sigs.k8s.io/yaml"
)

// The compose file (docker-compose.yml at the repository's root) and what
// its observability profile mounts (deploy/compose). Docker cannot run
// on the machines this project is developed on, so the file is checked
// here the way compose itself reads it (compose-go: the Compose
// specification's schema, interpolation, the merge of the x-eventpipe
// anchor) and eventpipe's part of it against the real binary; the image
// it runs is tested by deploy/image.

var update = flag.Bool("update", false, "rewrite deploy/compose/prometheus/alerts.yml from the chart's PrometheusRule")

const (
	composeFile    = moduleRoot + "/docker-compose.yml"
	composeDir     = moduleRoot + "/deploy/compose"
	composeAlerts  = composeDir + "/prometheus/alerts.yml"
	composeProm    = composeDir + "/prometheus/prometheus.yml"
	composeBoard   = composeDir + "/grafana/dashboards/eventpipe.json"
	eventpipeImage = "eventpipe:latest" // EVENTPIPE_IMAGE's default
	graceSeconds   = 25                 // eventpipe's default --grace-period
)

// loadCompose loads the compose file with every profile, as `docker
// compose --profile '*' config` would, with EVENTPIPE_IMAGE unset.
func loadCompose(t *testing.T) *composetypes.Project {
	t.Helper()
	root, err := filepath.Abs(moduleRoot)
	if err != nil {
		t.Fatal(err)
	}
	p, err := loader.LoadWithContext(context.Background(), composetypes.ConfigDetails{
		WorkingDir:  root,
		ConfigFiles: []composetypes.ConfigFile{{Filename: filepath.Join(root, "docker-compose.yml")}},
		Environment: composetypes.Mapping{},
	}, func(o *loader.Options) {
		o.SetProjectName("eventpipe", true)
		o.Profiles = []string{"*"}
	})
	if err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	return p
}

// TestComposeFile: the compose file is valid Compose; every port is
// published on loopback only; migrate, serve, two relays and consume
// --all run from eventpipe's image as its non-root user with a read-only
// root filesystem and no capabilities, after migrate succeeded, with a
// stop grace above the drain's grace period and (the long-running ones)
// a health check of `eventpipe probe` on a port they listen on; each
// command is one the binary accepts.
func TestComposeFile(t *testing.T) {
	p := loadCompose(t)
	roles := map[string]bool{}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range p.Services {
			if !yield(n) {
				return
			}
		}
	}) {
		s := p.Services[name]
		for _, port := range s.Ports {
			if port.HostIP != "127.0.0.1" {
				t.Errorf("service %s publishes port %d on %q, want 127.0.0.1 only", name, port.Target, port.HostIP)
			}
		}
		if s.Image != eventpipeImage {
			continue
		}
		roles[name] = true
		if s.User != "65532:65532" || !s.ReadOnly || !slices.Equal(s.CapDrop, []string{"ALL"}) || !slices.Contains(s.SecurityOpt, "no-new-privileges:true") {
			t.Errorf("service %s: user %q, read_only %v, cap_drop %v, security_opt %v; want 65532:65532, true, [ALL], no-new-privileges", name, s.User, s.ReadOnly, s.CapDrop, s.SecurityOpt)
		}
		if !slices.Contains(s.Profiles, "pipeline") {
			t.Errorf("service %s is not in the pipeline profile (profiles %v): a plain `docker compose up` must start the services only", name, s.Profiles)
		}
		checkArgs(t, name, s.Command)
		if name == "migrate" {
			if !slices.Contains(s.Command, "--wait") {
				t.Errorf("migrate runs %v, want --wait: it starts with the services", s.Command)
			}
			continue
		}
		if d, ok := s.DependsOn["migrate"]; !ok || d.Condition != composetypes.ServiceConditionCompletedSuccessfully {
			t.Errorf("service %s depends on migrate %+v, want condition service_completed_successfully", name, d)
		}
		if s.StopGracePeriod == nil || time.Duration(*s.StopGracePeriod) <= graceSeconds*time.Second {
			t.Errorf("service %s: stop_grace_period %v, want above the %d s grace period of its drain", name, s.StopGracePeriod, graceSeconds)
		}
		listens := listenPorts(s.Command, s.Environment)
		hc := s.HealthCheck
		if hc == nil || len(hc.Test) != 4 || hc.Test[0] != "CMD" || hc.Test[1] != "/usr/local/bin/eventpipe" || hc.Test[2] != "probe" || !strings.HasPrefix(hc.Test[3], "http://127.0.0.1:") {
			t.Errorf("service %s: healthcheck %+v, want [CMD /usr/local/bin/eventpipe probe http://127.0.0.1:<port>/…] (the image has no shell)", name, hc)
			continue
		}
		checkArgs(t, name, hc.Test[2:])
		if port, _, _ := strings.Cut(strings.TrimPrefix(hc.Test[3], "http://127.0.0.1:"), "/"); !slices.Contains(listens, port) {
			t.Errorf("service %s: its healthcheck probes port %s, but it listens on %v", name, port, listens)
		}
	}
	for _, want := range []string{"migrate", "serve", "relay", "consume"} {
		if !roles[want] {
			t.Errorf("no service %s runs from %s (services %v)", want, eventpipeImage, p.ServiceNames())
		}
	}
	if r := p.Services["relay"]; r.Deploy == nil || r.Deploy.Replicas == nil || *r.Deploy.Replicas != 2 {
		t.Errorf("relay: deploy %+v, want exactly 2 replicas (a stream shard allows two readers)", r.Deploy)
	}
	if c := p.Services["consume"]; !slices.Contains(c.Command, "--all") {
		t.Errorf("consume runs %v, want --all", c.Command)
	}
	for _, want := range []string{"otel-collector", "jaeger", "prometheus", "grafana"} {
		s, ok := p.Services[want]
		if !ok || !slices.Contains(s.Profiles, "observability") {
			t.Errorf("service %s: not in the observability profile (%v)", want, s.Profiles)
		}
		for _, v := range s.Volumes {
			if v.Type == composetypes.VolumeTypeBind {
				if _, err := os.Stat(v.Source); err != nil {
					t.Errorf("service %s mounts %s: %v", want, v.Source, err)
				}
			}
		}
	}
}

// checkArgs runs the binary with args and --help: cobra parses the flags
// first, so an unknown subcommand or flag fails.
func checkArgs(t *testing.T, service string, args []string) {
	t.Helper()
	bin := binary(t)
	cmd := exec.Command(bin, append(slices.Clone(args), "--help")...)
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "Usage:") {
		t.Errorf("service %s runs `eventpipe %s`, which the binary refuses: %v\n%s", service, strings.Join(args, " "), err, out)
	}
}

// listenPorts are the ports a command of eventpipe listens on: its
// --metrics-addr and --operator-addr, and EVENTPIPE_HTTP_ADDR.
func listenPorts(args []string, env composetypes.MappingWithEquals) []string {
	var addrs []string
	for i, a := range args {
		if (a == "--metrics-addr" || a == "--operator-addr") && i+1 < len(args) {
			addrs = append(addrs, args[i+1])
		}
	}
	if v := env["EVENTPIPE_HTTP_ADDR"]; v != nil {
		addrs = append(addrs, *v)
	}
	var ports []string
	for _, a := range addrs {
		if _, port, err := net.SplitHostPort(a); err == nil {
			ports = append(ports, port)
		}
	}
	return ports
}

// TestComposeAlertsAreTheCharts: the compose Prometheus evaluates the
// very alerts of the Helm chart's PrometheusRule at its default values.
func TestComposeAlertsAreTheCharts(t *testing.T) {
	ch, err := chartloader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	ms := render(t, ch, map[string]any{"prometheusRule": map[string]any{"enabled": true}})
	decode(t, ms)
	var pr *prometheusRule
	for _, m := range ms {
		if o, ok := m.obj.(*prometheusRule); ok {
			pr = o
		}
	}
	if pr == nil {
		t.Fatal("the chart rendered no PrometheusRule with prometheusRule.enabled")
	}
	want, err := yaml.Marshal(map[string]any{"groups": pr.Spec.Groups})
	if err != nil {
		t.Fatal(err)
	}
	header := "# Generated from the Helm chart's PrometheusRule at its default values\n" +
		"# (deploy/helm/eventpipe/templates/prometheusrule.yaml): change the chart,\n" +
		"# then `cd deploy/deploytest && go test -run TestComposeAlertsAreTheCharts -update`.\n"
	if *update {
		if err := os.WriteFile(composeAlerts, append([]byte(header), want...), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(composeAlerts)
	if err != nil {
		t.Fatal(err)
	}
	var gotDoc, wantDoc any
	if err := yaml.Unmarshal(got, &gotDoc); err != nil {
		t.Fatalf("%s: %v", composeAlerts, err)
	}
	if err := yaml.Unmarshal(want, &wantDoc); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotDoc, wantDoc) {
		t.Fatalf("%s differs from the chart's PrometheusRule; run `go test -run TestComposeAlertsAreTheCharts -update` in deploy/deploytest", composeAlerts)
	}
	rules := parseRules(t, composeAlerts, got)
	t.Logf("%s: the chart's %d alerts", composeAlerts, len(rules))
}

// TestComposePrometheus: prometheus.yml loads with Prometheus' own
// configuration loader, names the alerts file, and scrapes serve, the
// relays and consume on the ports their commands listen on.
func TestComposePrometheus(t *testing.T) {
	cfg, err := promconfig.LoadFile(composeProm, false, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("%s: %v", composeProm, err)
	}
	if !slices.Equal(cfg.RuleFiles, []string{"/etc/prometheus/alerts.yml"}) {
		t.Errorf("rule_files %v, want the alerts mounted from deploy/compose/prometheus", cfg.RuleFiles)
	}
	p := loadCompose(t)
	scraped := map[string]bool{}
	for _, sc := range cfg.ScrapeConfigs {
		for _, target := range scrapeTargets(t, sc) {
			host, port, err := net.SplitHostPort(target)
			if err != nil {
				t.Errorf("job %s: target %q: %v", sc.JobName, target, err)
				continue
			}
			s, ok := p.Services[host]
			if !ok {
				t.Errorf("job %s scrapes %s, which is no compose service", sc.JobName, target)
				continue
			}
			if !slices.Contains(listenPorts(s.Command, s.Environment), port) {
				t.Errorf("job %s scrapes %s, but %s listens on %v", sc.JobName, target, host, listenPorts(s.Command, s.Environment))
			}
			scraped[host] = true
		}
	}
	for _, want := range []string{"serve", "relay", "consume"} {
		if !scraped[want] {
			t.Errorf("prometheus.yml does not scrape %s", want)
		}
	}
}

// scrapeTargets are a scrape config's static targets and DNS names with
// their port.
func scrapeTargets(t *testing.T, sc *promconfig.ScrapeConfig) []string {
	t.Helper()
	var out []string
	for _, c := range sc.ServiceDiscoveryConfigs {
		switch c := c.(type) {
		case discovery.StaticConfig:
			for _, g := range c {
				for _, ls := range g.Targets {
					out = append(out, string(ls[model.AddressLabel]))
				}
			}
		case *dns.SDConfig:
			for _, n := range c.Names {
				out = append(out, net.JoinHostPort(n, strconv.Itoa(c.Port)))
			}
		default:
			t.Errorf("job %s: a %T, which the test does not know", sc.JobName, c)
		}
	}
	return out
}

// TestDashboard: the Grafana dashboard's queries parse as PromQL and each
// selector matches series that the running serve, relay and consume
// --all export.
func TestDashboard(t *testing.T) {
	b, err := os.ReadFile(composeBoard)
	if err != nil {
		t.Fatal(err)
	}
	var board struct {
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &board); err != nil {
		t.Fatalf("%s: %v", composeBoard, err)
	}
	used := newSelectors()
	for _, p := range board.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			used.add(t, "panel "+p.Title, tg.Expr)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	awaitSeries(t, used)
	t.Logf("%d panels; every selector matches series of the running processes", len(board.Panels))
}
