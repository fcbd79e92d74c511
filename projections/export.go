package projections

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"
)

// Querier is what an Exporter reads with (a *pgxpool.Pool, a pgx.Tx). It
// is an alias of an unnamed interface type, so that a read model package
// can spell the same type without importing this one.
type Querier = interface {
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
