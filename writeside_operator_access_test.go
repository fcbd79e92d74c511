package eventpipe_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/eventstore/memstore"
	"github.com/eventpipe/eventpipe/httpapi/auth"
	"github.com/eventpipe/eventpipe/httpapi/auth/authtest"
)

// TestTheOperatorListenerOffLoopbackNeedsAuthentication builds write
// sides on the memory store and GoChannel (no service): an operator
// listener off loopback without auth is refused (a
// *eventstore.ValidationError on OperatorAddr) unless OperatorInsecure
// says so; on loopback it is open; with auth it is behind the API's JWT
// and policy (no token 401, no grant 403, a read grant of metrics 200).
func TestTheOperatorListenerOffLoopbackNeedsAuthentication(t *testing.T) {
	catalog := eventpipe.Builtin()
	store, err := memstore.New(memstore.Config{Schema: catalog.Schema()})
	if err != nil {
		t.Fatal(err)
	}
	goch := gochannel.NewGoChannel(gochannel.Config{}, watermill.NopLogger{})
	t.Cleanup(func() { _ = goch.Close() })
	build := func(cfg eventpipe.WriteSideConfig) (*eventpipe.WriteSide, error) {
		cfg.Process = eventpipe.Process{Catalog: catalog, Logger: slog.New(slog.DiscardHandler)}
		cfg.Store, cfg.Publisher = store, goch
		cfg.NewSubscriber = func(string) (message.Subscriber, error) { return goch, nil }
		svc, err := eventpipe.NewWriteSide(context.Background(), cfg)
		if err == nil {
			t.Cleanup(func() { _ = svc.Close() })
		}
		return svc, err
	}

	for _, addr := range []string{"0.0.0.0:9463", ":9463", "10.1.2.3:9463", "[::]:9463", "ops.internal:9463"} {
		_, err := build(eventpipe.WriteSideConfig{NoAuth: true, OperatorAddr: addr})
		var ve *eventstore.ValidationError
		if !errors.As(err, &ve) || ve.Field != "OperatorAddr" {
			t.Errorf("open operator listener on %s: %v; want a *eventstore.ValidationError on OperatorAddr", addr, err)
		}
	}
	for addr, want := range map[string]eventpipe.OperatorAccess{"127.0.0.1:9463": eventpipe.OperatorLoopback, "[::1]:9463": eventpipe.OperatorLoopback, "localhost:9463": eventpipe.OperatorLoopback, "": eventpipe.OperatorOnAPI} {
		svc, err := build(eventpipe.WriteSideConfig{NoAuth: true, OperatorAddr: addr})
		if err != nil {
			t.Errorf("operator listener on %q: %v", addr, err)
			continue
		}
		if got := svc.Config().OperatorAccess(); got != want {
			t.Errorf("operator listener on %q: %q, want %q", addr, got, want)
		}
	}
	svc, err := build(eventpipe.WriteSideConfig{NoAuth: true, OperatorAddr: "0.0.0.0:9463", OperatorInsecure: true})
	if err != nil || svc.Config().OperatorAccess() != eventpipe.OperatorOpen {
		t.Fatalf("OperatorInsecure off loopback: %v", err)
	}

	const iss, aud = "https://idp.test/", "eventpipe"
	idp := authtest.New(t, iss, aud)
	jwks := filepath.Join(t.TempDir(), "jwks.json")
	idp.WriteFile(t, jwks)
	svc, err = build(eventpipe.WriteSideConfig{OperatorAddr: "0.0.0.0:9463", Auth: &auth.Config{JWKSFile: jwks, Issuer: iss, Audience: aud,
		Policy: &auth.Policy{Rules: []auth.Rule{{Subjects: []string{"prometheus"}, Read: []string{"metrics"}}, {Subjects: []string{"alice"}, Read: []string{"todo"}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := svc.Config().OperatorAccess(); got != eventpipe.OperatorAuthenticated {
		t.Fatalf("operator listener off loopback with auth: %q", got)
	}
	op, err := svc.NewOperatorHTTP()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, subject string
		want          int
	}{{"no token", "", 401}, {"no grant", "alice", 403}, {"metrics grant", "prometheus", 200}} {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		if c.subject != "" {
			req.Header.Set("Authorization", "Bearer "+idp.Sign(t, authtest.EdDSA, authtest.Claims{Subject: c.subject}))
		}
		rec := httptest.NewRecorder()
		op.Handler().ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Errorf("%s: GET /metrics on the operator listener: %d, want %d", c.name, rec.Code, c.want)
		}
	}
	rec := httptest.NewRecorder()
	op.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != 200 {
		t.Errorf("GET /healthz on the operator listener: %d", rec.Code)
	}
}
