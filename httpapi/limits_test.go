package httpapi_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/httpapi"
)

// hang bounds the waits of the slow-client tests: a server that applies
// its limits closes the connection within a fraction of a second; only
// one that never does reaches this.
const hang = 30 * time.Second

// TestSlowAndIdleClientsAreCutOff: a client that trickles its body, one
// that trickles its headers and one that idles on a keep-alive
// connection are each disconnected by the server, and headers over
// MaxHeaderBytes get 431.
func TestSlowAndIdleClientsAreCutOff(t *testing.T) {
	srv, err := httpapi.New(httpapi.Config{Addr: "127.0.0.1:0", Limits: httpapi.Limits{
		ReadHeaderTimeout: 200 * time.Millisecond, ReadTimeout: 300 * time.Millisecond,
		WriteTimeout: 2 * time.Second, IdleTimeout: 300 * time.Millisecond, MaxHeaderBytes: 4 << 10,
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv.Mux.HandleFunc("POST /drain", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	})
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, ready) }()
	addr := <-ready
	t.Cleanup(func() { cancel(); <-done })

	dial := func(t *testing.T) net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	// trickle writes one byte every 20ms until the connection fails or
	// the test ends.
	trickle := func(t *testing.T, c net.Conn, b byte) {
		stop := make(chan struct{})
		t.Cleanup(func() { close(stop) })
		go func() {
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					if _, err := c.Write([]byte{b}); err != nil {
						return
					}
				}
			}
		}()
	}
	// closedByServer reads (and drops) whatever the server sends until it
	// closes the connection.
	closedByServer := func(t *testing.T, r io.Reader, c net.Conn) {
		t.Helper()
		_ = c.SetReadDeadline(time.Now().Add(hang))
		_, err := io.Copy(io.Discard, r)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("the server kept the connection open for %s", hang)
		}
	}

	t.Run("slow body", func(t *testing.T) {
		c := dial(t)
		if _, err := io.WriteString(c, "POST /drain HTTP/1.1\r\nHost: x\r\nContent-Length: 1048576\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		trickle(t, c, 'x')
		closedByServer(t, c, c)
	})
	t.Run("slow headers", func(t *testing.T) {
		c := dial(t)
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: "); err != nil {
			t.Fatal(err)
		}
		trickle(t, c, 'x')
		closedByServer(t, c, c)
	})
	t.Run("idle keep-alive", func(t *testing.T) {
		c := dial(t)
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Close {
			t.Fatalf("healthz: %d, close %v; want 200 on a kept-alive connection", resp.StatusCode, resp.Close)
		}
		closedByServer(t, br, c) // and now idle
	})
	t.Run("oversize headers", func(t *testing.T) {
		c := dial(t)
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: "+strings.Repeat("x", 16<<10)+"\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(hang))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("16 KiB of headers over a 4 KiB limit: %d, want 431", resp.StatusCode)
		}
	})
}

// TestLimitsValidateAndComeFromTheEnvironment: bad limits are refused
// naming the field or variable, and the EVENTPIPE_HTTP_* variables set
// them.
func TestLimitsValidateAndComeFromTheEnvironment(t *testing.T) {
	for name, tc := range map[string]struct {
		err   error
		field string
	}{
		"negative read":       {httpapi.Config{Addr: ":0", Limits: httpapi.Limits{ReadTimeout: -1}}.Validate(), "Limits.ReadTimeout"},
		"negative headers":    {httpapi.Config{Addr: ":0", Limits: httpapi.Limits{MaxHeaderBytes: -1}}.Validate(), "Limits.MaxHeaderBytes"},
		"header after read":   {httpapi.Limits{ReadHeaderTimeout: time.Minute, ReadTimeout: time.Second}.Validate(), "Limits.ReadHeaderTimeout"},
		"header over default": {httpapi.Limits{ReadHeaderTimeout: time.Hour}.Validate(), "Limits.ReadHeaderTimeout"},
	} {
		var ve *eventstore.ValidationError
		if !errors.As(tc.err, &ve) || ve.Field != tc.field {
			t.Errorf("%s: Validate = %v, want an *eventstore.ValidationError on %s", name, tc.err, tc.field)
		}
	}
	if err := (httpapi.Limits{ReadTimeout: time.Second}).Validate(); err != nil {
		t.Errorf("a read timeout under the default header timeout: %v, want the header timeout to follow it", err)
	}
	if l := (httpapi.Limits{ReadTimeout: time.Second}).WithDefaults(); l.ReadHeaderTimeout != time.Second {
		t.Errorf("WithDefaults of a 1s read timeout: header timeout %s, want 1s", l.ReadHeaderTimeout)
	}
	env := map[string]string{httpapi.EnvReadTimeout: "45s", httpapi.EnvIdleTimeout: "1m", httpapi.EnvMaxHeaderBytes: "8192"}
	l, err := httpapi.LimitsFromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil || l != (httpapi.Limits{ReadTimeout: 45 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 8192}) {
		t.Errorf("LimitsFromEnv = %+v, %v", l, err)
	}
	env[httpapi.EnvWriteTimeout] = "soon"
	_, err = httpapi.LimitsFromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	var ve *eventstore.ValidationError
	if !errors.As(err, &ve) || ve.Field != httpapi.EnvWriteTimeout {
		t.Errorf("a bad duration: %v, want an *eventstore.ValidationError on %s", err, httpapi.EnvWriteTimeout)
	}
}
