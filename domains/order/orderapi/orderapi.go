// Package orderapi serves the orders' read models over HTTP: the
// Elasticsearch search model (filters by status, customer and total,
// with counts by status and by day) and the Postgres roll-up of orders
// per hour and per day (projections/rollups).
package orderapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/httpapi"
	"github.com/eventpipe/eventpipe/projections/rollups"
	"github.com/eventpipe/eventpipe/projections/searchmodels"
)

// Searcher reads the orders' Elasticsearch read model
// (searchmodels.OrderIndex does).
type Searcher interface {
	Search(ctx context.Context, q searchmodels.OrderQuery) (searchmodels.OrderResult, error)
}

// Config is what the order API needs.
type Config struct {
	// Search reads the orders search model. Required.
	Search Searcher
	// Rollups reads the order roll-up (rollups.Read of
	// rollups.OrdersName on the read-model database does). When nil,
	// GET /orders/rollups is not mounted.
	Rollups func(ctx context.Context, q rollups.Query) ([]rollups.Row, error)
	// Logger logs failed reads (default slog.Default()).
	Logger *slog.Logger
}

// Validate reports the first missing field.
func (c Config) Validate() error {
	if c.Search == nil {
		return fmt.Errorf("orderapi: Config: %w", &eventstore.ValidationError{Field: "Search", Reason: "is nil"})
	}
	return nil
}

// Mount mounts on srv:
//
//	GET /orders/search?status=&customer=&min_total=&max_total=&from=&size=
//	GET /orders/rollups?period=hourly|daily&from=&to=
//
// The search answers a page of matching orders (newest first; amounts in
// cents) with the number of all matches, and their counts by status
// (by_status) and by day placed (per_day). The roll-ups answer a
// RollupsResult: the buckets of the period from the one holding from to
// the one holding to, oldest first, those without an order event left
// out; from and to are RFC 3339 times or dates (to: the whole day), see
// rollups.ParseQuery. A bad parameter is a 400 naming it.
func Mount(srv *httpapi.Server, cfg Config) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	srv.Mux.HandleFunc("GET /orders/search", func(w http.ResponseWriter, r *http.Request) {
		q, err := searchmodels.ParseOrderQuery(r.URL.Query())
		if err != nil {
			httpapi.WriteError(w, http.StatusBadRequest, "invalid_query", err.Error())
			return
		}
		res, err := cfg.Search.Search(r.Context(), q)
		if err != nil {
			cfg.Logger.ErrorContext(r.Context(), "search orders", "request_id", httpapi.RequestID(r.Context()), "err", err)
			httpapi.WriteError(w, http.StatusServiceUnavailable, "search_unavailable", "the orders search model cannot be read now (is Elasticsearch up and `eventpipe consume orders-search` running?)")
			return
		}
		httpapi.WriteJSON(w, http.StatusOK, res)
	})
	if cfg.Rollups != nil {
		srv.Mux.HandleFunc("GET /orders/rollups", func(w http.ResponseWriter, r *http.Request) {
			serveRollups(w, r, cfg)
		})
	}
	return nil
}
