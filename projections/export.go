package projections

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"
)

// Querier is what an Exporter reads with (a *pgxpool.Pool, a pgx.Tx).
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Exporter is a Projection whose tables hold data subjects' personal data
// in clear (docs/privacy.md): for `eventpipe export`, it returns the rows
// it holds of some aggregates.
type Exporter interface {
	Projection
	// Export returns, by table, the rows (as JSON objects) the
	// projection holds of the aggregates ids, given by aggregate type.
	Export(ctx context.Context, db Querier, ids map[string][]string) (map[string][]json.RawMessage, error)
}

// ExportRows returns the rows of query (whose one column is a JSON
// object, say row_to_json(t)) with args: a helper for Exporters.
func ExportRows(ctx context.Context, db Querier, query string, args ...any) ([]json.RawMessage, error) {
	rows, err := db.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (json.RawMessage, error) {
		var b []byte
		err := r.Scan(&b)
		return json.RawMessage(b), err
	})
}
