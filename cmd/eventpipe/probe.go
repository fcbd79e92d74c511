package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// defaultProbeTimeout bounds a probe: well below the health-check
// timeouts of ECS (5 s by default) and docker compose (30 s).
const defaultProbeTimeout = 2 * time.Second

// probeCommand is `eventpipe probe <url>`: the health check of an image
// without a shell or curl (distroless, scratch), as an ECS task's or a
// compose service's healthCheck runs it:
// ["CMD", "/usr/local/bin/eventpipe", "probe", "http://127.0.0.1:8080/readyz"].
func probeCommand() *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "probe <url>",
		Short: "GET an http(s) URL such as http://127.0.0.1:8080/readyz and exit 0 on a 2xx answer, else 1: a container health check without curl",
		Long: `probe GETs the URL and exits 0 when the answer is 2xx. Otherwise it prints one
line to stderr saying what failed (the status and the first line of the body,
or the connection error) and exits 1. Redirects are not followed, and no proxy
is used.

It is meant for container health checks, the image having no shell or curl:
  ["CMD", "/usr/local/bin/eventpipe", "probe", "http://127.0.0.1:8080/readyz"]
on serve's API port, or on the --metrics-addr of relay and consume (/livez,
/readyz, /startupz: docs/operations.md, "Probes and drains").`,
		Args: cobra.ExactArgs(1),
		// A health check depends on nothing but the URL: no tracing set-up.
		PersistentPreRunE: func(*cobra.Command, []string) error { return nil },
		RunE: func(cmd *cobra.Command, args []string) error {
			return probeURL(cmd.Context(), args[0], timeout)
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", defaultProbeTimeout, "how long the whole request may take, answer included")
	return cmd
}

// probeURL GETs rawURL within timeout and returns nil on a 2xx answer, else
// an error of one line naming the URL and what failed.
func probeURL(ctx context.Context, rawURL string, timeout time.Duration) error {
	const want = "want an http:// or https:// URL with a host, e.g. http://127.0.0.1:8080/readyz"
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("probe: %w (%s)", err, want)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("probe %q: %s", rawURL, want)
	}
	if timeout <= 0 {
		return fmt.Errorf("probe: --timeout %v: must be positive", timeout)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("probe %s: %w", u.Redacted(), err)
	}
	client := &http.Client{
		Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true},
		// A health endpoint answers itself: a redirect is a failure.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is named once, below
		}
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("no answer within %v", timeout)
		}
		return fmt.Errorf("probe %s: %w", u.Redacted(), err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		return nil
	}
	line, _ := bufio.NewReader(io.LimitReader(resp.Body, 512)).ReadString('\n')
	if line = strings.TrimSpace(line); line != "" {
		return fmt.Errorf("probe %s: %s: %s", u.Redacted(), resp.Status, line)
	}
	return fmt.Errorf("probe %s: %s", u.Redacted(), resp.Status)
}
