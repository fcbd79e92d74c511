package orderapi

import (
	"errors"
	"net/http"
	"time"

	"github.com/eventpipe/eventpipe/httpapi"
	"github.com/eventpipe/eventpipe/projections/rollups"
)

// RollupsResult is the answer of GET /orders/rollups.
type RollupsResult struct {
	Period string `json:"period"`
	// From and To name the first and the last bucket of the range asked
	// for (rollup.Period.Bucket).
	From    string   `json:"from"`
	To      string   `json:"to"`
	Buckets []Bucket `json:"buckets"`
}

// Bucket is one hour or day of the order roll-up; amounts in cents.
type Bucket struct {
	// Bucket names it: 2026-05-12T14:00:00Z for an hour, 2026-05-12 for a
	// day.
	Bucket string    `json:"bucket"`
	Start  time.Time `json:"start"`
	// Orders placed and the sum of their totals.
	Orders      int64 `json:"orders"`
	PlacedTotal int64 `json:"placed_total"`
	// Payments processed and the sum of their amounts.
	Payments int64 `json:"payments"`
	Revenue  int64 `json:"revenue"`
	// Refunds and the sum of their amounts.
	Refunds  int64 `json:"refunds"`
	Refunded int64 `json:"refunded"`
}

// serveRollups answers GET /orders/rollups.
func serveRollups(w http.ResponseWriter, r *http.Request, cfg Config) {
	q, err := rollups.ParseQuery(r.URL.Query())
	if err != nil {
		httpapi.WriteError(w, http.StatusBadRequest, "invalid_query", err.Error())
		return
	}
	rows, err := cfg.Rollups(r.Context(), q)
	var qe *rollups.QueryError
	if errors.As(err, &qe) {
		httpapi.WriteError(w, http.StatusBadRequest, "invalid_query", qe.Error())
		return
	}
	if err != nil {
		cfg.Logger.ErrorContext(r.Context(), "read the order roll-ups", "request_id", httpapi.RequestID(r.Context()), "err", err)
		httpapi.WriteError(w, http.StatusServiceUnavailable, "rollups_unavailable",
			"the order roll-ups cannot be read now (is Postgres up and migrated, and `eventpipe consume "+rollups.OrdersName+"` running?)")
		return
	}
	res := RollupsResult{Period: string(q.Period), From: q.Period.Bucket(q.From), To: q.Period.Bucket(q.To), Buckets: make([]Bucket, len(rows))}
	for i, row := range rows {
		m := row.Measures
		res.Buckets[i] = Bucket{Bucket: row.Bucket, Start: row.Start,
			Orders: m[rollups.MeasureOrders], PlacedTotal: m[rollups.MeasurePlacedTotal],
			Payments: m[rollups.MeasurePayments], Revenue: m[rollups.MeasureRevenue],
			Refunds: m[rollups.MeasureRefunds], Refunded: m[rollups.MeasureRefunded]}
	}
	httpapi.WriteJSON(w, http.StatusOK, res)
}
