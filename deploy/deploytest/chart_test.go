// Package deploytest checks what deploy/ and docker-compose.yml ship.
//
// The Helm chart (deploy/helm/eventpipe): it lints the chart and renders it as `helm template` does, through
// Helm's Go API, for its defaults and for each values file under the
// chart's ci/, decodes every manifest strictly into the Kubernetes API
// types (an unknown field fails; the CRDs ServiceMonitor, PrometheusRule
// and ScaledObject into local structs, as strictly), and checks the rules
// of issue 40: every container has its probes on the real endpoints,
// resources and a non-root, read-only securityContext; the relay is never
// autoscaled; a ScaledObject never asks for more replicas than the topics
// have partitions; migrate is a pre-install/pre-upgrade hook; secrets
// come only from existing Secrets; the PrometheusRule's rules parse and
// use only metrics the binary exports.
//
// It is a module of its own so that Helm's, Kubernetes' and Prometheus'
// dependencies stay out of eventpipe's module graph; `make deploy-test`
// (part of `make test`) runs it.
package deploytest

import (
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"helm.sh/helm/v4/pkg/action"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	release "helm.sh/helm/v4/pkg/release/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

const (
	chartDir   = "../helm/eventpipe"
	moduleRoot = "../.." // eventpipe's main module
	nonRootUID = 65532   // the image's user (deploy/image/Containerfile)
)

// valuesFiles are the chart's ci/*.yaml, each rendered and checked.
func valuesFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*.yaml"))
	if err != nil || len(files) < 3 {
		t.Fatalf("the chart's ci/ values files: %v, %v (want at least 3)", files, err)
	}
	return files
}

func readValues(t *testing.T, file string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	vals := map[string]any{}
	if err := yaml.Unmarshal(b, &vals); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return vals
}

func TestLint(t *testing.T) {
	runs := map[string]map[string]any{"defaults": nil}
	for _, f := range valuesFiles(t) {
		runs[filepath.Base(f)] = readValues(t, f)
	}
	for _, name := range slices.Sorted(maps.Keys(runs)) {
		t.Run(name, func(t *testing.T) {
			lint := action.NewLint()
			lint.Strict = true // warnings fail too
			lint.Namespace = "eventpipe"
			res := lint.Run([]string{chartDir}, runs[name])
			for _, m := range res.Messages {
				t.Logf("lint: %s", m)
			}
			if len(res.Errors) > 0 || res.TotalChartsLinted != 1 {
				t.Fatalf("helm lint: %d charts linted, errors: %v", res.TotalChartsLinted, res.Errors)
			}
		})
	}
}

// render renders the chart with vals as `helm template` does (client
// only, no cluster), hooks included, and returns its manifests.
func render(t *testing.T, ch *chart.Chart, vals map[string]any) []manifest {
	t.Helper()
	cfg := action.NewConfiguration()
	cfg.SetLogger(slog.NewTextHandler(io.Discard, nil))
	install := action.NewInstall(cfg)
	install.DryRunStrategy = action.DryRunClient
	install.ReleaseName = "ep"
	install.Namespace = "eventpipe"
	install.Replace = true
	if vals == nil {
		vals = map[string]any{}
	}
	r, err := install.Run(ch, vals)
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	rel, ok := r.(*release.Release)
	if !ok {
		t.Fatalf("helm template returned a %T", r)
	}
	var out []manifest
	out = append(out, split(t, rel.Manifest, nil)...)
	for _, h := range rel.Hooks {
		out = append(out, split(t, h.Manifest, h)...)
	}
	return out
}

// manifest is one rendered object, with the hook it belongs to (nil for
// the release's own objects).
type manifest struct {
	source string
	body   []byte
	hook   *release.Hook
	meta   metav1.TypeMeta
	obj    any
}

var docSep = regexp.MustCompile(`(?m)^---[ \t]*$`)

func split(t *testing.T, s string, hook *release.Hook) []manifest {
	t.Helper()
	var out []manifest
	for _, doc := range docSep.Split(s, -1) {
		source := ""
		if i := strings.Index(doc, "# Source: "); i >= 0 {
			source, _, _ = strings.Cut(doc[i+len("# Source: "):], "\n")
		}
		var probe map[string]any
		if err := yaml.Unmarshal([]byte(doc), &probe); err != nil {
			t.Fatalf("%s: not YAML: %v", source, err)
		}
		if len(probe) == 0 {
			continue // comments only
		}
		out = append(out, manifest{source: source, body: []byte(doc), hook: hook})
	}
	return out
}

// The CRDs the chart renders, which k8s.io/api has no types for: local
// structs with the fields the chart uses (and that the CRDs define), so
// that an unknown or misspelt field fails the strict decoding.
type (
	serviceMonitor struct {
		metav1.TypeMeta   `json:",inline"`
		metav1.ObjectMeta `json:"metadata"`
		Spec              struct {
			Selector          metav1.LabelSelector `json:"selector"`
			NamespaceSelector struct {
				MatchNames []string `json:"matchNames,omitempty"`
				Any        bool     `json:"any,omitempty"`
			} `json:"namespaceSelector"`
			Endpoints []struct {
				Port          string `json:"port"`
				Path          string `json:"path,omitempty"`
				Interval      string `json:"interval,omitempty"`
				Authorization *struct {
					Type        string                   `json:"type"`
					Credentials corev1.SecretKeySelector `json:"credentials"`
				} `json:"authorization,omitempty"`
			} `json:"endpoints"`
		} `json:"spec"`
	}
	prometheusRule struct {
		metav1.TypeMeta   `json:",inline"`
		metav1.ObjectMeta `json:"metadata"`
		Spec              struct {
			Groups []struct {
				Name  string `json:"name"`
				Rules []struct {
					Alert       string            `json:"alert,omitempty"`
					Record      string            `json:"record,omitempty"`
					Expr        string            `json:"expr"`
					For         string            `json:"for,omitempty"`
					Labels      map[string]string `json:"labels,omitempty"`
					Annotations map[string]string `json:"annotations,omitempty"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	scaledObject struct {
		metav1.TypeMeta   `json:",inline"`
		metav1.ObjectMeta `json:"metadata"`
		Spec              struct {
			ScaleTargetRef struct {
				APIVersion string `json:"apiVersion,omitempty"`
				Kind       string `json:"kind,omitempty"`
				Name       string `json:"name"`
			} `json:"scaleTargetRef"`
			MinReplicaCount *int32 `json:"minReplicaCount,omitempty"`
			MaxReplicaCount *int32 `json:"maxReplicaCount,omitempty"`
			PollingInterval *int32 `json:"pollingInterval,omitempty"`
			CooldownPeriod  *int32 `json:"cooldownPeriod,omitempty"`
			Triggers        []struct {
				Type              string            `json:"type"`
				Metadata          map[string]string `json:"metadata"`
				AuthenticationRef *struct {
					Name string `json:"name"`
				} `json:"authenticationRef,omitempty"`
			} `json:"triggers"`
		} `json:"spec"`
	}
)

// newObject returns a pointer to the Go type of apiVersion/kind.
func newObject(tm metav1.TypeMeta) (any, bool) {
	switch tm.APIVersion + "/" + tm.Kind {
	case "apps/v1/Deployment":
		return &appsv1.Deployment{}, true
	case "v1/Service":
		return &corev1.Service{}, true
	case "v1/ServiceAccount":
		return &corev1.ServiceAccount{}, true
	case "batch/v1/Job":
		return &batchv1.Job{}, true
	case "autoscaling/v2/HorizontalPodAutoscaler":
		return &autoscalingv2.HorizontalPodAutoscaler{}, true
	case "policy/v1/PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}, true
	case "networking.k8s.io/v1/NetworkPolicy":
		return &networkingv1.NetworkPolicy{}, true
	case "monitoring.coreos.com/v1/ServiceMonitor":
		return &serviceMonitor{}, true
	case "monitoring.coreos.com/v1/PrometheusRule":
		return &prometheusRule{}, true
	case "keda.sh/v1alpha1/ScaledObject":
		return &scaledObject{}, true
	}
	return nil, false
}

// decode decodes every manifest strictly into its type: an unknown or
// duplicate field, a wrong type or an unknown kind fails.
func decode(t *testing.T, ms []manifest) {
	t.Helper()
	for i := range ms {
		m := &ms[i]
		if err := yaml.Unmarshal(m.body, &m.meta); err != nil {
			t.Fatalf("%s: %v", m.source, err)
		}
		obj, ok := newObject(m.meta)
		if !ok {
			t.Errorf("%s: %s %s: a kind the test does not know (add its type to newObject)", m.source, m.meta.APIVersion, m.meta.Kind)
			continue
		}
		if err := yaml.UnmarshalStrict(m.body, obj); err != nil {
			t.Errorf("%s: %s: strict decoding: %v", m.source, m.meta.Kind, err)
			continue
		}
		m.obj = obj
	}
}

func TestRenderedChart(t *testing.T) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	used := newSelectors() // of the alerts
	for _, file := range valuesFiles(t) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			vals := readValues(t, file)
			ms := render(t, ch, vals)
			if dir := os.Getenv("DEPLOYTEST_DUMP"); dir != "" { // the rendered manifests, to read
				var all []byte
				for _, m := range ms {
					all = append(append(all, "---\n"...), m.body...)
				}
				if err := os.WriteFile(filepath.Join(dir, filepath.Base(file)), all, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			decode(t, ms)
			if t.Failed() {
				t.FailNow()
			}
			checkChart(t, ch, vals, ms, used)
		})
	}
	// The alerts' metrics, against what serve, a relay and consume --all
	// export on the local stack.
	if len(used.users) == 0 {
		t.Fatal("no values file under ci/ renders the PrometheusRule")
	}
	awaitSeries(t, used)
	t.Logf("every selector of the alerts matches series of the running processes: %s", strings.Join(slices.Sorted(maps.Keys(used.users)), ", "))
}

// value is the values' entry at path (dot-separated), from vals, else the
// chart's defaults.
func value(ch *chart.Chart, vals map[string]any, path string) any {
	for _, m := range []map[string]any{vals, ch.Values} {
		var cur any = m
		for _, k := range strings.Split(path, ".") {
			mm, ok := cur.(map[string]any)
			if !ok {
				cur = nil
				break
			}
			cur = mm[k]
		}
		if cur != nil {
			return cur
		}
	}
	return nil
}

func toInt(t *testing.T, v any) int {
	t.Helper()
	switch n := v.(type) {
	case float64:
		return int(n)
	case int:
		return n
	case int64:
		return int(n)
	}
	t.Fatalf("not a number: %#v", v)
	return 0
}

func checkChart(t *testing.T, ch *chart.Chart, vals map[string]any, ms []manifest, used *selectors) {
	deployments := map[string]*appsv1.Deployment{}
	var jobs []*batchv1.Job
	kinds := map[string]int{}
	for _, m := range ms {
		kinds[m.meta.Kind]++
		switch o := m.obj.(type) {
		case *appsv1.Deployment:
			deployments[o.Name] = o
			checkPod(t, "Deployment "+o.Name, &o.Spec.Template.Spec, true)
		case *batchv1.Job:
			jobs = append(jobs, o)
			checkPod(t, "Job "+o.Name, &o.Spec.Template.Spec, false)
			checkMigrateHook(t, o, m.hook)
		case *corev1.Secret:
			t.Errorf("the chart renders a Secret (%s): secrets come only from existing Secrets", o.Name)
		}
	}
	t.Logf("rendered: %v", kinds)

	// The roles: one serve, the relays, one Deployment per consumer entry.
	role := func(d *appsv1.Deployment) string {
		if a := d.Spec.Template.Spec.Containers[0].Args; len(a) > 0 {
			return a[0]
		}
		return ""
	}
	byRole := map[string][]string{}
	for _, name := range slices.Sorted(maps.Keys(deployments)) {
		r := role(deployments[name])
		byRole[r] = append(byRole[r], name)
	}
	consumers, _ := value(ch, vals, "consumers").([]any)
	if len(byRole["serve"]) != 1 || len(byRole["relay"]) != 1 || len(byRole["consume"]) != len(consumers) {
		t.Errorf("Deployments by role: %v; want one serve, one relay, %d consume", byRole, len(consumers))
	}
	for _, name := range byRole["relay"] {
		d := deployments[name]
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
			t.Errorf("relay Deployment %s: replicas %v, want 2 (a stream shard allows two readers)", name, d.Spec.Replicas)
		}
	}

	// Autoscalers: never the relay; their target exists; KEDA's max is
	// at most the partitions.
	partitions := toInt(t, value(ch, vals, "kafka.partitions"))
	target := func(kind, name, targetKind, targetName string) {
		d, ok := deployments[targetName]
		switch {
		case targetKind != "Deployment" || !ok:
			t.Errorf("%s %s targets %s %q, not a Deployment of the chart", kind, name, targetKind, targetName)
		case role(d) == "relay":
			t.Errorf("%s %s targets the relay %s: the relays are never autoscaled (two readers per shard)", kind, name, targetName)
		case d.Spec.Replicas != nil:
			t.Errorf("%s %s targets %s, which sets replicas too (they would fight)", kind, name, targetName)
		}
	}
	for _, m := range ms {
		switch o := m.obj.(type) {
		case *autoscalingv2.HorizontalPodAutoscaler:
			target("HorizontalPodAutoscaler", o.Name, o.Spec.ScaleTargetRef.Kind, o.Spec.ScaleTargetRef.Name)
		case *scaledObject:
			kind := o.Spec.ScaleTargetRef.Kind
			if kind == "" {
				kind = "Deployment" // KEDA's default
			}
			target("ScaledObject", o.Name, kind, o.Spec.ScaleTargetRef.Name)
			if o.Spec.MaxReplicaCount == nil || int(*o.Spec.MaxReplicaCount) > partitions {
				t.Errorf("ScaledObject %s: maxReplicaCount %v, want at most the %d partitions", o.Name, o.Spec.MaxReplicaCount, partitions)
			}
			if len(o.Spec.Triggers) == 0 {
				t.Errorf("ScaledObject %s has no trigger", o.Name)
			}
			for _, tr := range o.Spec.Triggers {
				if tr.Type != "kafka" || tr.Metadata["consumerGroup"] == "" || tr.Metadata["bootstrapServers"] == "" {
					t.Errorf("ScaledObject %s: trigger %s %v, want kafka with a consumerGroup and bootstrapServers", o.Name, tr.Type, tr.Metadata)
				}
			}
		case *corev1.ServiceAccount:
			if arn, _ := value(ch, vals, "serviceAccount.awsRoleArn").(string); arn != "" && o.Annotations["eks.amazonaws.com/role-arn"] != arn {
				t.Errorf("ServiceAccount %s: eks.amazonaws.com/role-arn %q, want %q (IRSA)", o.Name, o.Annotations["eks.amazonaws.com/role-arn"], arn)
			}
		case *prometheusRule:
			checkRules(t, o, used)
		}
	}

	// The migrate Job, a hook, when enabled.
	if enabled, _ := value(ch, vals, "migrate.enabled").(bool); enabled && len(jobs) != 1 {
		t.Errorf("%d Jobs, want the one migrate Job", len(jobs))
	}
	// What values turn on is there.
	for path, kind := range map[string]string{
		"serviceMonitor.enabled": "ServiceMonitor", "prometheusRule.enabled": "PrometheusRule", "networkPolicy.enabled": "NetworkPolicy",
	} {
		if on, _ := value(ch, vals, path).(bool); on != (kinds[kind] > 0) {
			t.Errorf("%s is %v but the chart rendered %d %s", path, on, kinds[kind], kind)
		}
	}
}

// checkPod checks a pod's containers: resources, a non-root read-only
// securityContext, secrets mounted from Secrets, and for a long-running
// role the three probes on its endpoints and a termination grace above
// the process's own.
func checkPod(t *testing.T, what string, pod *corev1.PodSpec, longRunning bool) {
	t.Helper()
	psc := pod.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
		if v.Secret == nil {
			t.Errorf("%s: volume %s is not a Secret's (the pods need no writable or other volume)", what, v.Name)
		}
	}
	containers := slices.Concat(pod.InitContainers, pod.Containers)
	if len(containers) == 0 {
		t.Errorf("%s: no container", what)
	}
	for _, c := range containers {
		where := what + " container " + c.Name
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("%s: resources %v: want cpu and memory requests and a memory limit", where, c.Resources)
		}
		checkSecurityContext(t, where, psc, c.SecurityContext)
		mounts := map[string]string{}
		for _, vm := range c.VolumeMounts {
			if _, ok := volumes[vm.Name]; !ok || !vm.ReadOnly {
				t.Errorf("%s: mount %s: want a read-only mount of a Secret volume", where, vm.Name)
			}
			mounts[vm.MountPath] = vm.Name
		}
		env := map[string]string{}
		for _, e := range c.Env {
			env[e.Name] = e.Value
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				t.Errorf("%s: env %s from a Secret: secrets go in files (*_FILE)", where, e.Name)
			}
			if strings.HasSuffix(e.Name, "_FILE") || e.Name == "PGPASSFILE" {
				if _, ok := mounts[filepath.Dir(e.Value)]; !ok {
					t.Errorf("%s: %s=%s is not in a mounted Secret", where, e.Name, e.Value)
				}
			}
		}
		if !longRunning {
			continue
		}
		ports := map[string]bool{}
		for _, p := range c.Ports {
			ports[p.Name] = true
		}
		for _, p := range []struct {
			name  string
			probe *corev1.Probe
			path  string
		}{{"startupProbe", c.StartupProbe, "/startupz"}, {"readinessProbe", c.ReadinessProbe, "/readyz"}, {"livenessProbe", c.LivenessProbe, "/livez"}} {
			switch {
			case p.probe == nil || p.probe.HTTPGet == nil:
				t.Errorf("%s: no %s (HTTP GET %s)", where, p.name, p.path)
			case p.probe.HTTPGet.Path != p.path || !ports[p.probe.HTTPGet.Port.String()]:
				t.Errorf("%s: %s GET %s on port %s, want %s on one of its ports %v", where, p.name, p.probe.HTTPGet.Path, p.probe.HTTPGet.Port.String(), p.path, ports)
			}
		}
		grace, err := time.ParseDuration(env["EVENTPIPE_GRACE_PERIOD"])
		if err != nil {
			t.Errorf("%s: EVENTPIPE_GRACE_PERIOD %q: %v", where, env["EVENTPIPE_GRACE_PERIOD"], err)
		}
		var preStop int64
		if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
			if c.Lifecycle.PreStop.Sleep == nil {
				t.Errorf("%s: a preStop other than sleep (the image has no shell)", where)
			} else {
				preStop = c.Lifecycle.PreStop.Sleep.Seconds
			}
		}
		if tg := pod.TerminationGracePeriodSeconds; tg == nil || time.Duration(*tg-preStop)*time.Second <= grace {
			t.Errorf("%s: terminationGracePeriodSeconds %v, want above the preStop sleep (%ds) plus --grace-period (%v)", where, tg, preStop, grace)
		}
	}
}

func checkSecurityContext(t *testing.T, where string, psc *corev1.PodSecurityContext, sc *corev1.SecurityContext) {
	t.Helper()
	if sc == nil {
		t.Errorf("%s: no securityContext", where)
		return
	}
	nonRoot := sc.RunAsNonRoot
	if nonRoot == nil {
		nonRoot = psc.RunAsNonRoot
	}
	uid := sc.RunAsUser
	if uid == nil {
		uid = psc.RunAsUser
	}
	seccomp := sc.SeccompProfile
	if seccomp == nil {
		seccomp = psc.SeccompProfile
	}
	switch {
	case nonRoot == nil || !*nonRoot:
		t.Errorf("%s: runAsNonRoot not true", where)
	case uid == nil || *uid != nonRootUID:
		t.Errorf("%s: runAsUser %v, want %d", where, uid, nonRootUID)
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Errorf("%s: readOnlyRootFilesystem not true", where)
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Errorf("%s: allowPrivilegeEscalation not false", where)
	case sc.Privileged != nil && *sc.Privileged:
		t.Errorf("%s: privileged", where)
	case sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0:
		t.Errorf("%s: capabilities %v, want drop ALL and none added", where, sc.Capabilities)
	case seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Errorf("%s: seccompProfile %v, want RuntimeDefault", where, seccomp)
	}
}

func checkMigrateHook(t *testing.T, job *batchv1.Job, hook *release.Hook) {
	t.Helper()
	c := job.Spec.Template.Spec.Containers
	if len(c) != 1 || !slices.Equal(c[0].Args, []string{"migrate"}) {
		t.Errorf("Job %s: containers %v, want one running migrate", job.Name, c)
	}
	if hook == nil {
		t.Fatalf("Job %s is not a hook: want pre-install,pre-upgrade", job.Name)
	}
	events := strings.Split(job.Annotations["helm.sh/hook"], ",")
	for _, want := range []release.HookEvent{release.HookPreInstall, release.HookPreUpgrade} {
		if !slices.Contains(hook.Events, want) || !slices.Contains(events, want.String()) {
			t.Errorf("Job %s: hook events %v (%v), want %s", job.Name, hook.Events, events, want)
		}
	}
	if job.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever && job.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyOnFailure {
		t.Errorf("Job %s: restartPolicy %q", job.Name, job.Spec.Template.Spec.RestartPolicy)
	}
}

// checkRules parses the PrometheusRule's groups with Prometheus' own rule
// parser and adds every selector of its expressions to used.
func checkRules(t *testing.T, pr *prometheusRule, used *selectors) {
	t.Helper()
	b, err := yaml.Marshal(map[string]any{"groups": pr.Spec.Groups})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range parseRules(t, "PrometheusRule "+pr.Name, b) {
		n++
		used.add(t, "alert "+r.Alert, r.Expr)
	}
	if n == 0 {
		t.Errorf("PrometheusRule %s has no rule", pr.Name)
	}
	t.Logf("PrometheusRule %s: %d rules parse", pr.Name, n)
}

// parseRules parses a Prometheus rule file with Prometheus' own parser.
func parseRules(t *testing.T, what string, b []byte) []rulefmt.Rule {
	t.Helper()
	p := parser.NewParser(parser.Options{})
	groups, errs := rulefmt.Parse(b, false, model.LegacyValidation, p, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if len(errs) > 0 {
		t.Fatalf("%s: rulefmt: %v", what, errs)
	}
	var out []rulefmt.Rule
	for _, g := range groups.Groups {
		out = append(out, g.Rules...)
	}
	return out
}

// selectors are the series selectors that alerts and dashboards use,
// each with what uses it (its text → users, and its matchers).
type selectors struct {
	users    map[string][]string
	matchers map[string][]*labels.Matcher
}

func newSelectors() *selectors {
	return &selectors{users: map[string][]string{}, matchers: map[string][]*labels.Matcher{}}
}

// add parses a PromQL expression and adds each series selector in it,
// used by user; an expression that selects nothing fails t.
func (s *selectors) add(t *testing.T, user, expr string) {
	t.Helper()
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		t.Errorf("%s: %v", user, err)
		return
	}
	n := 0
	parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		n++
		text := vs.String()
		s.users[text] = appendNew(s.users[text], user)
		s.matchers[text] = vs.LabelMatchers
		return nil
	})
	if n == 0 {
		t.Errorf("%s selects no metric: %s", user, expr)
	}
}

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// A guard on the test itself: the strict decoding does fail on an
// unknown field.
func TestStrictDecodingFailsOnUnknownFields(t *testing.T) {
	doc := []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  replica: 2\n")
	if err := yaml.UnmarshalStrict(doc, &appsv1.Deployment{}); err == nil {
		t.Fatal("a Deployment with spec.replica decoded without an error")
	}
	so := []byte("apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: x}\nspec:\n  maxReplicas: 2\n")
	if err := yaml.UnmarshalStrict(so, &scaledObject{}); err == nil {
		t.Fatal("a ScaledObject with spec.maxReplicas decoded without an error")
	}
}
