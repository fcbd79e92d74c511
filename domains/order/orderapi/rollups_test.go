package orderapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/order"
	"github.com/eventpipe/eventpipe/domains/order/orderapi"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/httpapi"
	pgmigrate "github.com/eventpipe/eventpipe/migrations/postgres"
	"github.com/eventpipe/eventpipe/projections/rollups"
	"github.com/eventpipe/eventpipe/projections/searchmodels"
)

type noSearch struct{}

func (noSearch) Search(context.Context, searchmodels.OrderQuery) (searchmodels.OrderResult, error) {
	return searchmodels.OrderResult{}, errors.New("not in this test")
}

// server mounts the order API with read as its roll-up reader.
func server(t *testing.T, read func(context.Context, rollups.Query) ([]rollups.Row, error)) http.Handler {
	t.Helper()
	srv, err := httpapi.New(httpapi.Config{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := orderapi.Mount(srv, orderapi.Config{Search: noSearch{}, Rollups: read}); err != nil {
		t.Fatal(err)
	}
	return srv.Mux
}

func get(t *testing.T, h http.Handler, target string, v any) int {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	if v != nil {
		if err := json.Unmarshal(rec.Body.Bytes(), v); err != nil {
			t.Fatalf("GET %s: %d %q: %v", target, rec.Code, rec.Body.String(), err)
		}
	}
	return rec.Code
}

// TestOrderRollupsEndpointAnswersTheBucketsFromPostgres puts five order
// events of two days into the order roll-up's table (a fresh schema)
// and reads them back over HTTP by day and by hour, every measure
// present, zeros included.
func TestOrderRollupsEndpointAnswersTheBucketsFromPostgres(t *testing.T) {
	ctx := context.Background()
	schema, url := testenv.PostgresSchema(t, "oapi")
	p := rollups.Orders()
	if _, err := pgmigrate.Migrate(ctx, pgmigrate.Config{URL: testenv.Endpoints().Postgres, Schema: schema, Migrations: p.Migrations(),
		VersionTable: pgmigrate.ReadModelVersionTable(p.Name())}); err != nil {
		t.Fatal(err)
	}
	db, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	var b pgx.Batch
	for i, e := range []struct {
		typ  string
		data any
		at   time.Time
	}{
		{order.OrderPlaced, order.OrderPlacedData{Customer: "ada", Total: 120}, day.Add(9*time.Hour + 5*time.Minute)},
		{order.OrderPlaced, order.OrderPlacedData{Customer: "bob", Total: 80}, day.Add(9*time.Hour + 59*time.Minute)},
		{order.PaymentProcessed, order.PaymentProcessedData{Amount: 120}, day.Add(10 * time.Hour)},
		{order.OrderShipped, order.OrderShippedData{TrackingNumber: "T"}, day.Add(11 * time.Hour)},
		{order.OrderRefunded, order.OrderRefundedData{Amount: 20}, day.Add(30 * time.Hour)},
	} {
		payload, _ := json.Marshal(e.data)
		env := eventstore.Envelope{AggregateType: order.AggregateType, AggregateID: fmt.Sprint("o-", i), Sequence: 1, EventType: e.typ, OccurredAt: e.at, Payload: payload}
		if err := p.Apply(ctx, &b, env); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.SendBatch(ctx, &b).Close(); err != nil {
		t.Fatal(err)
	}
	h := server(t, func(ctx context.Context, q rollups.Query) ([]rollups.Row, error) {
		return rollups.Read(ctx, db, rollups.OrdersName, q.Period, q.From, q.To)
	})

	var daily orderapi.RollupsResult
	if code := get(t, h, "/orders/rollups?period=daily&from=2026-03-01&to=2026-03-02", &daily); code != http.StatusOK {
		t.Fatalf("daily: %d %+v", code, daily)
	}
	want := []orderapi.Bucket{
		{Bucket: "2026-03-01", Start: day, Orders: 2, PlacedTotal: 200, Payments: 1, Revenue: 120},
		{Bucket: "2026-03-02", Start: day.Add(24 * time.Hour), Refunds: 1, Refunded: 20},
	}
	if daily.Period != "daily" || daily.From != "2026-03-01" || daily.To != "2026-03-02" || fmt.Sprint(daily.Buckets) != fmt.Sprint(want) {
		t.Fatalf("daily roll-up %+v, want buckets %+v", daily, want)
	}
	var hourly orderapi.RollupsResult
	if code := get(t, h, "/orders/rollups?period=hourly&from=2026-03-01T09:30:00Z&to=2026-03-01T23:00:00Z", &hourly); code != http.StatusOK {
		t.Fatalf("hourly: %d %+v", code, hourly)
	}
	want = []orderapi.Bucket{
		{Bucket: "2026-03-01T09:00:00Z", Start: day.Add(9 * time.Hour), Orders: 2, PlacedTotal: 200},
		{Bucket: "2026-03-01T10:00:00Z", Start: day.Add(10 * time.Hour), Payments: 1, Revenue: 120},
	}
	if hourly.From != "2026-03-01T09:00:00Z" || fmt.Sprint(hourly.Buckets) != fmt.Sprint(want) {
		t.Fatalf("hourly roll-up %+v, want buckets %+v", hourly, want)
	}
	var empty map[string]any
	if code := get(t, h, "/orders/rollups?period=daily&from=2025-01-01&to=2025-01-31", &empty); code != http.StatusOK || fmt.Sprint(empty["buckets"]) != "[]" {
		t.Fatalf("a range without orders: %d %v", code, empty)
	}
}

// TestOrderRollupsEndpointNamesTheBadParameter: a bad parameter, or a
// *rollups.QueryError from the reader, is a 400 naming it; another
// failure of the reader a 503; without a reader the route is not there.
func TestOrderRollupsEndpointNamesTheBadParameter(t *testing.T) {
	var readerErr error
	h := server(t, func(context.Context, rollups.Query) ([]rollups.Row, error) { return nil, readerErr })
	for query, param := range map[string]string{
		"from=2026-03-01&to=2026-03-02":                     "period",
		"period=weekly&from=2026-03-01&to=2026-03-02":       "period",
		"period=daily&from=March&to=2026-03-02":             "from",
		"period=daily&from=2026-03-03&to=2026-03-02":        "to",
		"period=hourly&from=2000-01-01&to=2026-03-02":       "to",
		"period=daily&from=2026-03-01&to=2026-03-02&x=1":    "x",
		"period=daily&from=2026-03-01&from=2026-03-01&to=1": "from",
	} {
		var e httpapi.Error
		if code := get(t, h, "/orders/rollups?"+query, &e); code != http.StatusBadRequest || e.Code != "invalid_query" || !strings.Contains(e.Message, `"`+param+`"`) {
			t.Errorf("GET ?%s: %d %+v, want 400 invalid_query naming %s", query, code, e, param)
		}
	}
	readerErr = fmt.Errorf("read: %w", &rollups.QueryError{Param: "name", Reason: "bad"})
	var e httpapi.Error
	if code := get(t, h, "/orders/rollups?period=daily&from=2026-03-01&to=2026-03-02", &e); code != http.StatusBadRequest || e.Code != "invalid_query" {
		t.Errorf("a QueryError from the reader: %d %+v, want 400", code, e)
	}
	readerErr = errors.New("connection refused")
	if code := get(t, h, "/orders/rollups?period=daily&from=2026-03-01&to=2026-03-02", &e); code != http.StatusServiceUnavailable || e.Code != "rollups_unavailable" {
		t.Errorf("a failed read: %d %+v, want 503", code, e)
	}
	if code := get(t, server(t, nil), "/orders/rollups?period=daily&from=2026-03-01&to=2026-03-02", nil); code != http.StatusNotFound {
		t.Errorf("without a reader: %d, want 404", code)
	}
}
