package main

import (
	"bytes"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// runProbe runs `eventpipe probe args…` in process.
func runProbe(t *testing.T, args ...string) error {
	t.Helper()
	var out bytes.Buffer
	cmd := probeCommand()
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	err := cmd.ExecuteContext(t.Context())
	if out.Len() > 0 {
		t.Errorf("probe %v printed %q; it prints nothing itself (main prints the error)", args, out.String())
	}
	return err
}

// closedPortURL returns a loopback URL on which nothing listens.
func closedPortURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return "http://" + addr + "/readyz"
}

func TestProbe(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/livez":
			_, _ = w.Write([]byte(`{"status":"ok","passed":["loop"]}` + "\n"))
		case "/readyz":
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"status":"failed","passed":["started"],"failed":["draining"]}` + "\nsecond line\n"))
		case "/moved":
			http.Redirect(w, r, "/livez", http.StatusFound)
		case "/slow":
			time.Sleep(500 * time.Millisecond)
		}
	}))
	defer srv.Close()

	for _, tc := range []struct {
		name string
		args []string
		want string // "" for success, else a part of the error
	}{
		{"2xx", []string{srv.URL + "/livez"}, ""},
		{"503 names the status and the body's first line", []string{srv.URL + "/readyz"},
			`: 503 Service Unavailable: {"status":"failed","passed":["started"],"failed":["draining"]}`},
		{"a redirect is not followed", []string{srv.URL + "/moved"}, "302 Found"},
		{"closed port", []string{closedPortURL(t)}, "connection refused"},
		{"timeout", []string{"--timeout=100ms", srv.URL + "/slow"}, "no answer within 100ms"},
		{"not http", []string{"tcp://127.0.0.1:8080/readyz"}, "want an http:// or https:// URL"},
		{"no host", []string{"http:///readyz"}, "want an http:// or https:// URL"},
		{"no scheme", []string{"127.0.0.1:8080/readyz"}, "want an http:// or https:// URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := runProbe(t, tc.args...)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("probe %v: %v, want success", tc.args, err)
			case tc.want == "":
				return
			case err == nil:
				t.Fatalf("probe %v succeeded, want an error with %q", tc.args, tc.want)
			case !strings.Contains(err.Error(), tc.want):
				t.Fatalf("probe %v: %q, want it to contain %q", tc.args, err, tc.want)
			case strings.Contains(err.Error(), "\n"):
				t.Fatalf("probe %v: the error %q is more than one line", tc.args, err)
			}
			t.Logf("probe %v: %v", tc.args, err)
		})
	}
}

// TestProbeExitStatus runs the binary as a health check does: exit 0 on
// 2xx, else exit 1 with one line on stderr.
func TestProbeExitStatus(t *testing.T) {
	bin := eventpipeBinary(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/livez" {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	for _, tc := range []struct {
		url    string
		status int
	}{{srv.URL + "/livez", 0}, {srv.URL + "/readyz", 1}, {closedPortURL(t), 1}} {
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(bin, "probe", tc.url)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		status := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			status = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
		switch {
		case status != tc.status:
			t.Errorf("probe %s: exit %d (stderr %q), want %d", tc.url, status, stderr.String(), tc.status)
		case stdout.Len() > 0:
			t.Errorf("probe %s printed %q on stdout", tc.url, stdout.String())
		case status == 0 && stderr.Len() > 0:
			t.Errorf("probe %s: exit 0 but stderr %q", tc.url, stderr.String())
		case status != 0 && (len(lines) != 1 || !strings.HasPrefix(lines[0], "eventpipe: probe ")):
			t.Errorf("probe %s: stderr %q, want one line", tc.url, stderr.String())
		}
		t.Logf("probe %s: exit %d %s", tc.url, status, strings.TrimSpace(stderr.String()))
	}
}
