package deploytest

// The ECS task definitions (deploy/ecs/*.json, docs/deploying.md "On
// ECS"): each is decoded strictly into the AWS SDK's
// ecs.RegisterTaskDefinitionInput, the input `aws ecs
// register-task-definition --cli-input-json file://…` takes, and checked
// against what the image and the binary really are.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"
)

const ecsDir = "../ecs"

// longRunningRoles are the roles that serve probes and drain on SIGTERM.
var longRunningRoles = []string{"serve", "relay", "consume"}

// secretSuffixes mark a variable whose value is a secret: it must come
// from the task definition's secrets (Secrets Manager or SSM), never from
// its environment.
var secretSuffixes = []string{"PASSWORD", "_KEY", "_KEYS", "_TOKEN", "_SECRET"}

// fargateMemory is the memory (MiB) Fargate allows for each cpu (units).
var fargateMemory = map[int][2]int{256: {512, 2048}, 512: {1024, 4096}, 1024: {2048, 8192}, 2048: {4096, 16384}, 4096: {8192, 30720}}

// binaryFacts is what the task definitions are checked against, read
// from eventpipe's source and image.
type binaryFacts struct {
	envNames    map[string]bool // variables eventpipe's source names
	subcommands map[string]bool // eventpipe's top-level subcommands
	flags       map[string]bool // flag names cmd/eventpipe registers (any subcommand)
	entrypoint  string          // the image's ENTRYPOINT
}

func TestECSTaskDefinitions(t *testing.T) {
	facts := readBinaryFacts(t)
	files, err := filepath.Glob(filepath.Join(ecsDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	roles := map[string]bool{}
	for _, f := range files {
		roles[strings.TrimSuffix(filepath.Base(f), ".json")] = true
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range checkTaskDefinition(b, facts) {
				t.Error(p)
			}
			var in ecs.RegisterTaskDefinitionInput
			_ = json.Unmarshal(b, &in)
			if c := in.ContainerDefinitions; len(c) > 0 && (len(c[0].Command) == 0 || c[0].Command[0]+".json" != filepath.Base(f)) {
				t.Errorf("%s runs %v: want the file named after its subcommand", f, c[0].Command)
			}
		})
	}
	for _, want := range []string{"migrate", "serve", "relay", "consume"} {
		if !roles[want] {
			t.Errorf("%s has no %s.json (got %v)", ecsDir, want, roles)
		}
	}
}

// TestECSChecksCatchBrokenFiles breaks serve.json and relay.json one way
// at a time and wants the check to say so: the checks above are not
// vacuous.
func TestECSChecksCatchBrokenFiles(t *testing.T) {
	facts := readBinaryFacts(t)
	container := func(m map[string]any) map[string]any {
		return m["containerDefinitions"].([]any)[0].(map[string]any)
	}
	setEnv := func(m map[string]any, name, value string) {
		c := container(m)
		env, _ := c["environment"].([]any)
		for _, e := range env {
			if e.(map[string]any)["name"] == name {
				e.(map[string]any)["value"] = value
				return
			}
		}
		c["environment"] = append(env, map[string]any{"name": name, "value": value})
	}
	for _, tc := range []struct {
		name, file string
		edit       func(m map[string]any)
		want       string
	}{
		{"an unknown field", "serve.json", func(m map[string]any) { container(m)["readOnly"] = true }, `unknown field "readOnly"`},
		{"a field spelt in another case", "serve.json", func(m map[string]any) {
			c := container(m)
			c["readOnlyRootFileSystem"] = c["readonlyRootFilesystem"]
			delete(c, "readonlyRootFilesystem")
		}, `"readOnlyRootFileSystem": the API's name is "readonlyRootFilesystem"`},
		{"a value of the wrong type", "serve.json", func(m map[string]any) { m["cpu"] = 512 }, "cannot unmarshal number"},
		{"an enum value the API lacks", "serve.json", func(m map[string]any) { m["networkMode"] = "vpc" }, `NetworkMode "vpc"`},
		{"not Fargate's memory", "serve.json", func(m map[string]any) { m["memory"] = "512" }, "cpu 512 with memory 512"},
		{"root", "serve.json", func(m map[string]any) { container(m)["user"] = "0" }, `user "0"`},
		{"no user", "relay.json", func(m map[string]any) { delete(container(m), "user") }, "user <nil>"},
		{"a writable root filesystem", "relay.json", func(m map[string]any) { container(m)["readonlyRootFilesystem"] = false }, "readonlyRootFilesystem"},
		{"privileged", "relay.json", func(m map[string]any) { container(m)["privileged"] = true }, "privileged"},
		{"a probe of an unmapped port", "serve.json", func(m map[string]any) {
			container(m)["healthCheck"].(map[string]any)["command"] = []any{"CMD", "/usr/local/bin/eventpipe", "probe", "http://127.0.0.1:9999/livez"}
		}, "port 9999"},
		{"a probe of another port than the metrics'", "relay.json", func(m map[string]any) {
			container(m)["command"] = []any{"relay", "--metrics-addr=:9470"}
		}, "port 9464"},
		{"a probe through a shell", "relay.json", func(m map[string]any) {
			container(m)["healthCheck"].(map[string]any)["command"] = []any{"CMD-SHELL", "curl -f http://127.0.0.1:9464/livez"}
		}, "eventpipe probe"},
		{"a probe of another path", "relay.json", func(m map[string]any) {
			container(m)["healthCheck"].(map[string]any)["command"] = []any{"CMD", "/usr/local/bin/eventpipe", "probe", "http://127.0.0.1:9464/metrics"}
		}, "/metrics"},
		{"no health check", "serve.json", func(m map[string]any) { delete(container(m), "healthCheck") }, "no healthCheck"},
		{"stopTimeout not above the grace period", "serve.json", func(m map[string]any) { setEnv(m, "EVENTPIPE_GRACE_PERIOD", "30s") }, "stopTimeout 30"},
		{"stopTimeout above Fargate's 120", "relay.json", func(m map[string]any) {
			container(m)["stopTimeout"] = 150
			setEnv(m, "EVENTPIPE_GRACE_PERIOD", "140s")
		}, "stopTimeout 150"},
		{"the --grace-period flag counts too", "relay.json", func(m map[string]any) {
			c := container(m)
			c["command"] = append(c["command"].([]any), "--grace-period=40s")
		}, "grace period 40s"},
		{"a secret in the environment", "serve.json", func(m map[string]any) { setEnv(m, "ELASTICSEARCH_PASSWORD", "hunter2") }, "ELASTICSEARCH_PASSWORD"},
		{"a password in a URL", "serve.json", func(m map[string]any) {
			setEnv(m, "EVENTPIPE_POSTGRES_URL", "postgres://eventpipe:hunter2@db.example:5432/eventpipe?sslmode=verify-full")
		}, "password in its URL"},
		{"a secret from elsewhere than Secrets Manager or SSM", "serve.json", func(m map[string]any) {
			container(m)["secrets"].([]any)[0].(map[string]any)["valueFrom"] = "s3://bucket/key"
		}, "valueFrom"},
		{"a variable eventpipe does not read", "serve.json", func(m map[string]any) { setEnv(m, "EVENTPIPE_KAFKA_SASL_REGION", "eu-west-1") }, "EVENTPIPE_KAFKA_SASL_REGION"},
		{"a variable only the local stack reads", "relay.json", func(m map[string]any) { setEnv(m, "EVENTPIPE_KAFKA_PARTITIONS", "12") }, "EVENTPIPE_KAFKA_PARTITIONS"},
		{"a file outside the mounts", "serve.json", func(m map[string]any) { setEnv(m, "EVENTPIPE_AUTH_POLICY_FILE", "/policy.json") }, "/policy.json"},
		{"a subcommand that does not exist", "serve.json", func(m map[string]any) { container(m)["command"] = []any{"server"} }, `subcommand "server"`},
		{"a flag that does not exist", "relay.json", func(m map[string]any) {
			c := container(m)
			c["command"] = append(c["command"].([]any), "--replicas=2")
		}, "--replicas"},
		{"no awslogs", "relay.json", func(m map[string]any) { delete(container(m), "logConfiguration") }, "awslogs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(ecsDir, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			tc.edit(m)
			if b, err = json.Marshal(m); err != nil {
				t.Fatal(err)
			}
			problems := checkTaskDefinition(b, facts)
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tc.want) }) {
				t.Fatalf("%s broken (%s): problems %q, want one with %q", tc.file, tc.name, problems, tc.want)
			}
			t.Logf("%s", problems)
		})
	}
}

// checkTaskDefinition returns what is wrong with the task definition b.
func checkTaskDefinition(b []byte, facts binaryFacts) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	// Strictly: an unknown field or a wrong type fails. encoding/json
	// matches names case-insensitively, which the AWS CLI does not, so
	// the names are compared with the API's exactly as well.
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var in ecs.RegisterTaskDefinitionInput
	if err := dec.Decode(&in); err != nil {
		return []string{fmt.Sprintf("strict decoding into ecs.RegisterTaskDefinitionInput: %v", err)}
	}
	if dec.More() {
		bad("data after the task definition")
	}
	var raw any
	if err := json.Unmarshal(b, &raw); err != nil {
		return []string{err.Error()}
	}
	checkKeyNames(raw, reflect.TypeFor[ecs.RegisterTaskDefinitionInput](), "", bad)
	checkEnums(reflect.ValueOf(in), "", bad)

	// The task: Fargate in awsvpc, a size Fargate has, its roles.
	if in.NetworkMode != ecstypes.NetworkModeAwsvpc || !slices.Contains(in.RequiresCompatibilities, ecstypes.CompatibilityFargate) {
		bad("networkMode %q, requiresCompatibilities %v: want awsvpc on FARGATE", in.NetworkMode, in.RequiresCompatibilities)
	}
	cpu, _ := strconv.Atoi(orZero(in.Cpu))
	mem, _ := strconv.Atoi(orZero(in.Memory))
	if r, ok := fargateMemory[cpu]; !ok || mem < r[0] || mem > r[1] || mem%1024 != 0 && mem != 512 {
		bad("cpu %s with memory %s: not a Fargate size", orZero(in.Cpu), orZero(in.Memory))
	}
	arn := regexp.MustCompile(`^arn:aws:iam::\d{12}:role/\S+$`)
	if !arn.MatchString(orZero(in.TaskRoleArn)) || !arn.MatchString(orZero(in.ExecutionRoleArn)) {
		bad("taskRoleArn %q, executionRoleArn %q: want IAM role ARNs (the task's AWS access; pulling the image, the logs and the secrets)", orZero(in.TaskRoleArn), orZero(in.ExecutionRoleArn))
	}
	volumes := map[string]bool{}
	for _, v := range in.Volumes {
		volumes[orZero(v.Name)] = true
	}
	if len(in.ContainerDefinitions) != 1 {
		bad("%d containers, want eventpipe's one", len(in.ContainerDefinitions))
	}
	for _, c := range in.ContainerDefinitions {
		checkECSContainer(c, volumes, facts, func(format string, args ...any) {
			bad("container %s: "+format, append([]any{orZero(c.Name)}, args...)...)
		})
	}
	return problems
}

// checkECSContainer checks one container definition.
func checkECSContainer(c ecstypes.ContainerDefinition, volumes map[string]bool, facts binaryFacts, bad func(string, ...any)) {
	if orZero(c.Image) == "" || c.Essential == nil || !*c.Essential {
		bad("image %q, essential %v: want an image and essential", orZero(c.Image), c.Essential)
	}
	if u := orZero(c.User); c.User == nil || u != strconv.Itoa(nonRootUID) && u != fmt.Sprintf("%d:%d", nonRootUID, nonRootUID) {
		user := "<nil>"
		if c.User != nil {
			user = strconv.Quote(*c.User)
		}
		bad("user %s, want %q (the image's non-root user)", user, strconv.Itoa(nonRootUID))
	}
	if c.ReadonlyRootFilesystem == nil || !*c.ReadonlyRootFilesystem {
		bad("readonlyRootFilesystem not true (the binary writes nothing to its filesystem)")
	}
	if c.Privileged != nil && *c.Privileged {
		bad("privileged")
	}
	if len(c.EntryPoint) > 0 {
		bad("entryPoint %v: the image's %s runs, with the subcommand as command", c.EntryPoint, facts.entrypoint)
	}

	// The command: a subcommand of eventpipe and flags it has.
	sub := ""
	if len(c.Command) > 0 {
		sub = c.Command[0]
	}
	if !facts.subcommands[sub] {
		bad("subcommand %q is not one of eventpipe's", sub)
	}
	flags := map[string]string{}
	for _, a := range c.Command[min(1, len(c.Command)):] {
		if !strings.HasPrefix(a, "--") {
			continue
		}
		name, value, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		flags[name] = value
		if !facts.flags[name] {
			bad("flag --%s is not one of eventpipe's", name)
		}
	}

	// The environment: names eventpipe reads, no secret values.
	env := map[string]string{}
	for _, kv := range c.Environment {
		name, value := orZero(kv.Name), orZero(kv.Value)
		env[name] = value
		if readsEnv(name) && !facts.envNames[name] {
			bad("environment %s: eventpipe's source names no such variable", name)
		}
		if isSecretEnvName(name) {
			bad("environment %s: a secret, want it in secrets (Secrets Manager or SSM)", name)
		}
		if u, err := url.Parse(value); err == nil && u.User != nil {
			if _, has := u.User.Password(); has {
				bad("environment %s has a password in its URL: want it in secrets (PGPASSWORD, …)", name)
			}
		}
	}
	for _, s := range c.Secrets {
		name, from := orZero(s.Name), orZero(s.ValueFrom)
		if readsEnv(name) && !facts.envNames[name] {
			bad("secret %s: eventpipe's source names no such variable", name)
		}
		if _, dup := env[name]; dup {
			bad("%s is in environment and in secrets", name)
		}
		if !strings.HasPrefix(from, "arn:aws:secretsmanager:") && !strings.HasPrefix(from, "arn:aws:ssm:") {
			bad("secret %s: valueFrom %q, want a Secrets Manager or SSM parameter ARN", name, from)
		}
	}

	// Files named by the environment are on read-only mounts of the
	// task's volumes (ECS has no secret files: EFS, for instance).
	mounts := map[string]bool{}
	for _, m := range c.MountPoints {
		if !volumes[orZero(m.SourceVolume)] || m.ReadOnly == nil || !*m.ReadOnly {
			bad("mount %s at %s: want a read-only mount of a volume of the task", orZero(m.SourceVolume), orZero(m.ContainerPath))
		}
		mounts[filepath.Clean(orZero(m.ContainerPath))] = true
	}
	files := map[string]string{}
	for name, value := range env {
		if strings.HasSuffix(name, "_FILE") || name == "PGPASSFILE" {
			files[name] = value
		}
		if u, err := url.Parse(value); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
			for _, p := range []string{"sslrootcert", "sslcert", "sslkey", "passfile"} {
				if f := u.Query().Get(p); f != "" && f != "system" {
					files[name+" "+p] = f
				}
			}
		}
	}
	for what, f := range files {
		in := false
		for dir := filepath.Dir(f); ; dir = filepath.Dir(dir) {
			if mounts[dir] {
				in = true
				break
			}
			if dir == "/" || dir == "." {
				break
			}
		}
		if !in {
			bad("%s = %s is on no mounted volume (%v)", what, f, mounts)
		}
	}

	if lc := c.LogConfiguration; lc == nil || lc.LogDriver != ecstypes.LogDriverAwslogs ||
		lc.Options["awslogs-group"] == "" || lc.Options["awslogs-region"] == "" || lc.Options["awslogs-stream-prefix"] == "" {
		bad("logConfiguration %v: want awslogs with a group, region and stream prefix", lc)
	}

	if !slices.Contains(longRunningRoles, sub) {
		return
	}
	checkECSLongRunning(c, sub, flags, env, facts, bad)
}

// checkECSLongRunning checks what a serve, relay or consume container needs
// beyond the rest: its health check is `eventpipe probe` of its own
// listener, and the stop timeout covers its drain.
func checkECSLongRunning(c ecstypes.ContainerDefinition, sub string, flags, env map[string]string, facts binaryFacts, bad func(string, ...any)) {
	// The ports the process listens on.
	listens := map[int]bool{}
	addrs := []string{flags["metrics-addr"]}
	if sub == "serve" {
		addrs = []string{env["EVENTPIPE_HTTP_ADDR"], env["EVENTPIPE_OPERATOR_ADDR"]}
	}
	for _, a := range addrs {
		if a == "" {
			continue
		}
		host, port, err := net.SplitHostPort(a)
		p, perr := strconv.Atoi(port)
		switch {
		case err != nil || perr != nil:
			bad("listen address %q: %v %v", a, err, perr)
		case host != "" && host != "0.0.0.0" && host != "::":
			bad("listen address %q: want every interface (:port), or the load balancer and Prometheus cannot reach it", a)
		default:
			listens[p] = true
		}
	}
	mapped := map[int]bool{}
	for _, pm := range c.PortMappings {
		p := int(orZero(pm.ContainerPort))
		mapped[p] = true
		if !listens[p] {
			bad("portMappings maps %d, which the process does not listen on (%v)", p, slices.Sorted(maps.Keys(listens)))
		}
	}
	if len(listens) == 0 {
		bad("no listener (EVENTPIPE_HTTP_ADDR, --metrics-addr): the probes need one")
	}

	hc := c.HealthCheck
	if hc == nil {
		bad("no healthCheck")
	} else {
		checkECSHealthCheck(hc, facts, listens, mapped, bad)
	}

	// The stop timeout covers the drain: SIGTERM, the grace period, then
	// SIGKILL at stopTimeout (at most 120 s on Fargate).
	grace := 25 * time.Second // the binary's default
	if v, ok := flags["grace-period"]; ok {
		grace = mustDuration(v, "--grace-period", bad)
	} else if v, ok := env["EVENTPIPE_GRACE_PERIOD"]; ok {
		grace = mustDuration(v, "EVENTPIPE_GRACE_PERIOD", bad)
	}
	delay := 2 * time.Second
	if v, ok := flags["drain-delay"]; ok {
		delay = mustDuration(v, "--drain-delay", bad)
	} else if v, ok := env["EVENTPIPE_DRAIN_DELAY"]; ok {
		delay = mustDuration(v, "EVENTPIPE_DRAIN_DELAY", bad)
	}
	if delay >= grace {
		bad("drain delay %v, grace period %v: want the delay shorter", delay, grace)
	}
	if st := c.StopTimeout; st == nil || *st > 120 || time.Duration(*st)*time.Second <= grace {
		bad("stopTimeout %v, grace period %v: want above the grace period and at most 120", showPtr(st), grace)
	}
}

// checkECSHealthCheck wants ["CMD", <the image's binary>, "probe", [flags],
// "http://127.0.0.1:<port>/livez|readyz|startupz"] on a port the process
// listens on and the task maps, within ECS's limits.
func checkECSHealthCheck(hc *ecstypes.HealthCheck, facts binaryFacts, listens, mapped map[int]bool, bad func(string, ...any)) {
	cmd := hc.Command
	if len(cmd) < 4 || cmd[0] != "CMD" || cmd[1] != facts.entrypoint || cmd[2] != "probe" {
		bad("healthCheck %q: want [\"CMD\", %q, \"probe\", …]: eventpipe probe (the image has no shell or curl)", cmd, facts.entrypoint)
		return
	}
	probeTimeout := 2 * time.Second
	for _, a := range cmd[3 : len(cmd)-1] {
		if v, ok := strings.CutPrefix(a, "--timeout="); ok {
			probeTimeout = mustDuration(v, "probe --timeout", bad)
		} else {
			bad("healthCheck: probe argument %q", a)
		}
	}
	u, err := url.Parse(cmd[len(cmd)-1])
	if err != nil {
		bad("healthCheck URL: %v", err)
		return
	}
	port, _ := strconv.Atoi(u.Port())
	switch {
	case u.Scheme != "http" || (u.Hostname() != "127.0.0.1" && u.Hostname() != "localhost"):
		bad("healthCheck probes %s: want http://127.0.0.1:<port>/… (the container's own listener)", u)
	case !slices.Contains([]string{"/livez", "/readyz", "/startupz"}, u.Path):
		bad("healthCheck probes %s: want /livez (or /readyz, /startupz)", u.Path)
	case !listens[port] || !mapped[port]:
		bad("healthCheck probes port %d: want one the process listens on (%v) and the task maps (%v)", port, slices.Sorted(maps.Keys(listens)), slices.Sorted(maps.Keys(mapped)))
	}
	interval, timeout, retries, start := orZero(hc.Interval), orZero(hc.Timeout), orZero(hc.Retries), orZero(hc.StartPeriod)
	if interval < 5 || interval > 300 || timeout < 2 || timeout > 60 || retries < 1 || retries > 10 || start < 0 || start > 300 {
		bad("healthCheck interval %d, timeout %d, retries %d, startPeriod %d: out of ECS's ranges", interval, timeout, retries, start)
	}
	if time.Duration(timeout)*time.Second <= probeTimeout {
		bad("healthCheck timeout %ds is not above the probe's own %v", timeout, probeTimeout)
	}
}

// checkKeyNames walks the JSON raw beside the Go type typ and reports a
// key that is not exactly the API's name of a field (the Go field's name
// with its first letter lower case, as the ECS API's JSON spells it).
func checkKeyNames(raw any, typ reflect.Type, path string, bad func(string, ...any)) {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	switch typ.Kind() {
	case reflect.Struct:
		obj, ok := raw.(map[string]any)
		if !ok {
			return // strict decoding reports it
		}
		for key, v := range obj {
			var field reflect.StructField
			found := false
			for i := range typ.NumField() {
				f := typ.Field(i)
				if f.IsExported() && strings.EqualFold(f.Name, key) {
					field, found = f, true
					break
				}
			}
			if !found {
				continue // strict decoding reports it
			}
			if name := apiName(field.Name); key != name {
				bad("%s%q: the API's name is %q", path, key, name)
			}
			checkKeyNames(v, field.Type, path+key+".", bad)
		}
	case reflect.Slice:
		list, _ := raw.([]any)
		for i, v := range list {
			checkKeyNames(v, typ.Elem(), fmt.Sprintf("%s%d.", path, i), bad)
		}
	case reflect.Map:
		obj, _ := raw.(map[string]any)
		for k, v := range obj {
			checkKeyNames(v, typ.Elem(), path+k+".", bad)
		}
	}
}

// checkEnums reports a value of an SDK enum type (a string type with a
// Values method) that is not one of its values.
func checkEnums(v reflect.Value, path string, bad func(string, ...any)) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			checkEnums(v.Elem(), path, bad)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				checkEnums(v.Field(i), path+apiName(v.Type().Field(i).Name)+".", bad)
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			checkEnums(v.Index(i), path, bad)
		}
	case reflect.String:
		values := v.MethodByName("Values")
		if !values.IsValid() || v.Len() == 0 || v.Type() == reflect.TypeFor[string]() {
			return
		}
		allowed := values.Call(nil)[0]
		for i := range allowed.Len() {
			if allowed.Index(i).String() == v.String() {
				return
			}
		}
		bad("%s%s %q is none of %v", path, v.Type().Name(), v.String(), allowed.Interface())
	}
}

// readBinaryFacts reads from eventpipe's source (the main module, tests,
// dev/, e2e/, testkit/, examples/ and deploy/ left out) the variables it
// names, its subcommands and flags, and the image's ENTRYPOINT.
//
// A variable counts when its name appears in that source as text
// (comments included: PG* variables are read by pgx, and eventpipe's
// source names those it relies on), or as a prefix constant (…Prefix =
// "EVENTPIPE_KAFKA_") joined to an upper-case string literal (how
// tlsconfig.FromEnv builds EVENTPIPE_KAFKA_TLS), and a secret's name
// with _FILE appended (secretenv.Lookup).
func readBinaryFacts(t *testing.T) binaryFacts {
	t.Helper()
	root, err := filepath.Abs(moduleRoot)
	if err != nil {
		t.Fatal(err)
	}
	var (
		nameRe    = regexp.MustCompile(`\b(?:EVENTPIPE|ELASTICSEARCH)_[A-Z0-9_]*[A-Z0-9]\b|\bPG[A-Z]+\b`)
		prefixRe  = regexp.MustCompile(`\w*Prefix\w*\s*=\s*"((?:EVENTPIPE|ELASTICSEARCH)_[A-Z0-9_]*_)"`)
		literalRe = regexp.MustCompile(`"([A-Z][A-Z0-9_]*)"`)
	)
	facts := binaryFacts{envNames: map[string]bool{}, subcommands: map[string]bool{}, flags: map[string]bool{}}
	var prefixes, literals []string
	cmdSource := map[string]string{} // cmd/eventpipe's files
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if slices.Contains([]string{"deploy", "dev", "e2e", "testkit", "examples"}, rel) || strings.HasPrefix(d.Name(), ".") || d.Name() == "bin" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range nameRe.FindAll(b, -1) {
			facts.envNames[string(m)] = true
		}
		for _, m := range prefixRe.FindAllSubmatch(b, -1) {
			prefixes = append(prefixes, string(m[1]))
		}
		for _, m := range literalRe.FindAllSubmatch(b, -1) {
			literals = append(literals, string(m[1]))
		}
		if filepath.Dir(rel) == filepath.Join("cmd", "eventpipe") {
			cmdSource[rel] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range prefixes {
		for _, l := range literals {
			facts.envNames[p+l] = true
		}
	}
	for name := range facts.envNames {
		if isSecretEnvName(name) {
			facts.envNames[name+"_FILE"] = true
		}
	}

	// Subcommands: the constructors main.go adds to the root, each one's Use.
	all := strings.Join(slices.Collect(maps.Values(cmdSource)), "\n")
	mainSrc := cmdSource[filepath.Join("cmd", "eventpipe", "main.go")]
	add := regexp.MustCompile(`root\.AddCommand\(([^\n]*)\)`).FindStringSubmatch(mainSrc)
	if add == nil {
		t.Fatal("cmd/eventpipe/main.go: no root.AddCommand(…)")
	}
	for _, ctor := range regexp.MustCompile(`(\w+Command)\(`).FindAllStringSubmatch(add[1], -1) {
		use := regexp.MustCompile(`(?s)func ` + ctor[1] + `\(.*?Use:\s*"([a-z-]+)`).FindStringSubmatch(all)
		if use == nil {
			t.Fatalf("cmd/eventpipe: no Use of %s", ctor[1])
		}
		facts.subcommands[use[1]] = true
	}
	for _, m := range regexp.MustCompile(`(?:Var|Flags\(\)\.\w+)\([^"\n]*"([a-z][a-z0-9-]*)"`).FindAllStringSubmatch(all, -1) {
		facts.flags[m[1]] = true
	}

	cf, err := os.ReadFile(filepath.Join("..", "image", "Containerfile"))
	if err != nil {
		t.Fatal(err)
	}
	ep := regexp.MustCompile(`(?m)^ENTRYPOINT \["([^"]+)"\]`).FindSubmatch(cf)
	if ep == nil {
		t.Fatal("deploy/image/Containerfile: no ENTRYPOINT [\"…\"]")
	}
	facts.entrypoint = string(ep[1])

	// Sanity: what the task definitions rely on is found.
	for _, want := range []string{"EVENTPIPE_KAFKA_TLS", "EVENTPIPE_KAFKA_SASL_MECHANISM", "ELASTICSEARCH_API_KEY", "EVENTPIPE_GRACE_PERIOD", "PGPASSWORD"} {
		if !facts.envNames[want] {
			t.Fatalf("eventpipe's source does not name %s: the reading of it is broken", want)
		}
	}
	for _, want := range []string{"serve", "relay", "consume", "migrate", "probe"} {
		if !facts.subcommands[want] {
			t.Fatalf("subcommands found %v lack %s", slices.Sorted(maps.Keys(facts.subcommands)), want)
		}
	}
	for _, want := range []string{"metrics-addr", "all", "grace-period", "timeout"} {
		if !facts.flags[want] {
			t.Fatalf("flags found lack --%s", want)
		}
	}
	return facts
}

// readsEnv says whether the check knows name's family: eventpipe's own,
// Elasticsearch's and libpq's (pgx) variables.
func readsEnv(name string) bool {
	return strings.HasPrefix(name, "EVENTPIPE_") || strings.HasPrefix(name, "ELASTICSEARCH_") || strings.HasPrefix(name, "PG")
}

// isSecretEnvName says whether a variable's value is a secret (by its
// name's suffix).
func isSecretEnvName(name string) bool {
	return slices.ContainsFunc(secretSuffixes, func(s string) bool { return strings.HasSuffix(name, s) })
}

// mustDuration parses a Go duration, reporting what it was when it is not one.
func mustDuration(s, what string, bad func(string, ...any)) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		bad("%s %q: %v", what, s, err)
	}
	return d
}

// apiName is the ECS API's JSON name of a Go field of the SDK: the
// field's name with its first letter lower case.
func apiName(s string) string {
	r := []rune(s)
	r[0] = unicode.ToLower(r[0])
	return string(r)
}

// orZero is *p, or the zero value for nil.
func orZero[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// showPtr prints *p, or <nil>.
func showPtr[T any](p *T) string {
	if p == nil {
		return "<nil>"
	}
	return fmt.Sprint(*p)
}
