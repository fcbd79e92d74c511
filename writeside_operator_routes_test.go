package eventpipe_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/eventstore/memstore"
	"github.com/eventpipe/eventpipe/httpapi"
)

// closerFunc makes a function an io.Closer.
type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// TestOperatorRoutesGoWhereTheOperatorSurfaceIs builds write sides on the
// memory store and GoChannel (no service) with OperatorRoutes that mount
// GET /extra: without OperatorAddr they are mounted on the API's server,
// with it on the operator listener's only, once per server built, and
// Close closes what they returned.
func TestOperatorRoutesGoWhereTheOperatorSurfaceIs(t *testing.T) {
	catalog := eventpipe.Builtin()
	store, err := memstore.New(memstore.Config{Schema: catalog.Schema()})
	if err != nil {
		t.Fatal(err)
	}
	goch := gochannel.NewGoChannel(gochannel.Config{}, watermill.NopLogger{})
	t.Cleanup(func() { _ = goch.Close() })
	subscribers := func(string) (message.Subscriber, error) { return goch, nil }
	extra := func(srv *httpapi.Server) int {
		rec := httptest.NewRecorder()
		srv.Mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/extra", nil))
		return rec.Code
	}
	for _, operatorAddr := range []string{"", "127.0.0.1:1"} {
		var mounted, closed int
		routes := func(srv *httpapi.Server, w *eventpipe.WriteSide) (io.Closer, error) {
			if w.Config().OperatorAddr != operatorAddr {
				t.Errorf("OperatorRoutes got a write side of operator address %q, want %q", w.Config().OperatorAddr, operatorAddr)
			}
			mounted++
			srv.Mux.HandleFunc("GET /extra", func(http.ResponseWriter, *http.Request) {})
			return closerFunc(func() error { closed++; return nil }), nil
		}
		svc, err := eventpipe.NewWriteSide(context.Background(), eventpipe.WriteSideConfig{Process: eventpipe.Process{Catalog: catalog, Logger: slog.New(slog.DiscardHandler)}, Store: store, Publisher: goch,
			NewSubscriber: subscribers, OperatorAddr: operatorAddr, OperatorRoutes: routes, NoAuth: true})
		if err != nil {
			t.Fatal(err)
		}
		api, err := svc.NewHTTP()
		if err != nil {
			t.Fatal(err)
		}
		want := http.StatusOK
		if operatorAddr != "" {
			want = http.StatusNotFound
		}
		if got := extra(api); got != want {
			t.Errorf("operator address %q: GET /extra on the API's server: %d, want %d", operatorAddr, got, want)
		}
		if operatorAddr != "" {
			op, err := svc.NewOperatorHTTP()
			if err != nil {
				t.Fatal(err)
			}
			if got := extra(op); got != http.StatusOK {
				t.Errorf("GET /extra on the operator listener's server: %d, want 200", got)
			}
		}
		if mounted != 1 {
			t.Errorf("operator address %q: OperatorRoutes ran %d times, want once", operatorAddr, mounted)
		}
		if err := svc.Close(); err != nil {
			t.Fatal(err)
		}
		if closed != mounted {
			t.Errorf("operator address %q: Close closed %d of the %d closers", operatorAddr, closed, mounted)
		}
	}
}
