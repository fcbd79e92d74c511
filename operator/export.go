package operator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/elastic/go-elasticsearch/v8/esapi"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/analytics"
	"github.com/eventpipe/eventpipe/eventstore"
	ddbstore "github.com/eventpipe/eventpipe/eventstore/dynamodb"
	"github.com/eventpipe/eventpipe/privacy/subjects"
	"github.com/eventpipe/eventpipe/projections"
	"github.com/eventpipe/eventpipe/projections/elastic"
	"github.com/eventpipe/eventpipe/projections/elastic/esclient"
)

// ActionExport is the operator action of Export.
const ActionExport = "export"

// ExportConfig configures Export.
type ExportConfig struct {
	// Process: the catalogue (its read and search models), the endpoints
	// (DynamoDB, the KMS, Postgres, Elasticsearch) and the logger.
	eventpipe.Process
	// Store is the event store (default: eventpipe.OpenStore, which
	// opens sealed values with the subjects' keys).
	Store *ddbstore.Store
	// DB holds the read models and operator_actions (default:
	// eventpipe.OpenPostgres).
	DB *pgxpool.Pool
	// Search is the search models' cluster (default: from Endpoints,
	// when the catalogue has search models).
	Search *esclient.Client
	// Analytics is the analytics table (default: eventpipe.OpenAnalytics,
	// when the subject's own key scope exists; a table that does not
	// exist holds nothing of anyone).
	Analytics *analytics.Store
	// Subject is the data subject. Required.
	Subject string
	// Actor is who exports (default DefaultActor()); Reason why. Both
	// are recorded with the operator action.
	Actor, Reason string
}

// Export is everything eventpipe holds about a data subject, opened: one
// JSON document (docs/privacy.md, "Exporting a subject").
type Export struct {
	Subject    string    `json:"subject"`
	ExportedAt time.Time `json:"exported_at"`
	// Forgotten is set when the subject was forgotten: its events' personal
	// fields then read "[forgotten]".
	Forgotten bool `json:"forgotten"`
	// Scopes are the subject's key scopes: the aggregates its personal
	// data is in.
	Scopes []string `json:"scopes"`
	// Events are the events of those aggregates, opened, by aggregate
	// ("todo/t1") in sequence order.
	Events map[string][]eventstore.Envelope `json:"events"`
	// ReadModels are the rows the read models hold of those aggregates:
	// by read model, then table (projections.Exporter).
	ReadModels map[string]map[string][]json.RawMessage `json:"read_models"`
	// SearchDocuments are the search models' documents of those
	// aggregates, by search model.
	SearchDocuments map[string][]json.RawMessage `json:"search_documents"`
	// Analytics is what the analytics table holds of the subject as a
	// signed-in user, opened.
	Analytics AnalyticsExport `json:"analytics"`
	Action    OperatorAction  `json:"-"`
}

// AnalyticsExport is a user's analytics: their sessions, newest first,
// and each session's events by "<source>/<session>".
type AnalyticsExport struct {
	Sessions []analytics.Session          `json:"sessions"`
	Events   map[string][]analytics.Event `json:"events"`
}

// ExportSubject returns everything held about a data subject (GDPR
// article 15): the events of the aggregates its keys seal, opened; the
// rows of the read models that hold their data (projections.Exporter);
// the search models' documents of them; the analytics sessions of the
// subject as a signed-in user, and their events, opened. It is recorded
// as an operator action: exports read personal data.
func ExportSubject(ctx context.Context, cfg ExportConfig) (Export, error) {
	out := Export{Subject: cfg.Subject, Events: map[string][]eventstore.Envelope{},
		ReadModels: map[string]map[string][]json.RawMessage{}, SearchDocuments: map[string][]json.RawMessage{},
		Analytics: AnalyticsExport{Sessions: []analytics.Session{}, Events: map[string][]analytics.Event{}}}
	_ = cfg.FillProcess()
	if err := validProcess(&cfg.Process); err != nil {
		return out, fmt.Errorf("export: %w", err)
	}
	if cfg.Subject == "" {
		return out, fmt.Errorf("export: %w", invalid("Subject", "is empty"))
	}
	if cfg.Actor == "" {
		cfg.Actor = DefaultActor()
	}
	db, closeDB, err := openDB(ctx, cfg.DB, cfg.Endpoints)
	if err != nil {
		return out, fmt.Errorf("export: %w", err)
	}
	defer closeDB()
	if err := operatorReady(ctx, db); err != nil {
		return out, fmt.Errorf("export: %w", err)
	}
	store := cfg.Store
	if store == nil {
		if store, err = eventpipe.OpenStore(ctx, cfg.Endpoints, cfg.Catalog, cfg.Logger); err != nil {
			return out, fmt.Errorf("export: %w", err)
		}
	}
	keys := subjects.KeysOf(store)
	if keys == nil {
		return out, fmt.Errorf("export: %w", invalid("Catalog", "declares no personal data: the store seals nothing, so no data is a subject's"))
	}
	action, err := startOperatorAction(ctx, db, cfg.Logger, OperatorAction{Actor: cfg.Actor, Action: ActionExport, Target: subjects.AggregateType + "/" + cfg.Subject, Reason: cfg.Reason})
	if err != nil {
		return out, fmt.Errorf("export: %w", err)
	}
	runErr := exportInto(ctx, &out, cfg, store, db)
	result := fmt.Sprintf("exported %d aggregates", len(out.Events))
	if runErr != nil {
		result = "stopped: " + runErr.Error()
	}
	out.Action, err = finishOperatorAction(ctx, db, cfg.Logger, action, result)
	if runErr != nil {
		return out, errors.Join(fmt.Errorf("export %s: %w", cfg.Subject, runErr), err)
	}
	return out, err
}

func exportInto(ctx context.Context, out *Export, cfg ExportConfig, store *ddbstore.Store, db *pgxpool.Pool) error {
	out.ExportedAt = time.Now().UTC()
	scopes, err := subjects.KeysOf(store).Scopes(ctx, cfg.Subject)
	if err != nil {
		return err
	}
	out.Scopes = scopes
	if out.Scopes == nil {
		out.Scopes = []string{}
	}
	_, err = store.Load(ctx, eventstore.Ref{Type: subjects.AggregateType, ID: cfg.Subject}, 0)
	switch {
	case err == nil:
		out.Forgotten = true
	case !errors.Is(err, eventstore.ErrAggregateNotFound):
		return err
	}
	ids := map[string][]string{}
	for _, scope := range scopes {
		t, id, ok := strings.Cut(scope, "/")
		if !ok || t == subjects.AggregateType {
			continue // data keyed per subject lives outside the event store
		}
		events, err := store.Load(ctx, eventstore.Ref{Type: t, ID: id}, 0)
		if err != nil && !errors.Is(err, eventstore.ErrAggregateNotFound) {
			return err
		}
		if len(events) > 0 {
			out.Events[scope] = events
			ids[t] = append(ids[t], id)
		}
	}
	for _, name := range cfg.Catalog.ReadModelNames() {
		p, _ := cfg.Catalog.ReadModel(name)
		ex, ok := p.(projections.Exporter)
		if !ok {
			continue
		}
		rows, err := ex.Export(ctx, db, ids)
		if err != nil {
			return fmt.Errorf("read model %s: %w", name, err)
		}
		if len(rows) > 0 {
			out.ReadModels[name] = rows
		}
	}
	if err := exportSearch(ctx, out, cfg, ids); err != nil {
		return err
	}
	if slices.Contains(scopes, subjects.AggregateType+"/"+cfg.Subject) {
		return exportAnalytics(ctx, out, cfg)
	}
	return nil
}

// exportAnalytics adds the subject's analytics sessions as a user, and
// their events.
func exportAnalytics(ctx context.Context, out *Export, cfg ExportConfig) error {
	st := cfg.Analytics
	if st == nil {
		var err error
		if st, err = eventpipe.OpenAnalytics(ctx, cfg.Endpoints, cfg.Logger); err != nil {
			return err
		}
	}
	for cursor := ""; ; {
		page, next, err := st.UserSessions(ctx, cfg.Subject, analytics.MaxPageSize, cursor)
		var missing *types.ResourceNotFoundException
		if errors.As(err, &missing) {
			return nil // no analytics table here
		}
		if err != nil {
			return fmt.Errorf("analytics: %w", err)
		}
		out.Analytics.Sessions = append(out.Analytics.Sessions, page...)
		if cursor = next; cursor == "" {
			break
		}
	}
	for _, sess := range out.Analytics.Sessions {
		events, err := st.SessionEvents(ctx, sess.SourceID, sess.SessionID)
		if err != nil {
			return fmt.Errorf("analytics: %w", err)
		}
		out.Analytics.Events[sess.SourceID+"/"+sess.SessionID] = events
	}
	return nil
}

// exportSearch adds the search models' documents of the aggregates ids.
func exportSearch(ctx context.Context, out *Export, cfg ExportConfig, ids map[string][]string) error {
	names := cfg.Catalog.SearchModelNames()
	if len(names) == 0 || len(ids) == 0 {
		return nil
	}
	es := cfg.Search
	if es == nil {
		var err error
		if es, err = esclient.NewClient(cfg.Endpoints.Elasticsearch, cfg.Endpoints.ElasticsearchSecurity); err != nil {
			return err
		}
	}
	for _, name := range names {
		p, _ := cfg.Catalog.SearchModel(name)
		var docIDs []string
		for _, t := range p.AggregateTypes() {
			docIDs = append(docIDs, ids[t]...)
		}
		if len(docIDs) == 0 {
			continue
		}
		var res struct {
			Docs []struct {
				Found  bool            `json:"found"`
				Source json.RawMessage `json:"_source"`
			} `json:"docs"`
		}
		alias := elastic.Alias(cfg.Endpoints.TopicPrefix, name)
		err := esclient.Do(ctx, es, esapi.MgetRequest{Index: alias, Body: esclient.JSONBody(map[string]any{"ids": docIDs})}, &res)
		if esclient.IsNotFound(err) {
			continue // the model was never built here
		}
		if err != nil {
			return fmt.Errorf("search model %s: %w", name, err)
		}
		for _, d := range res.Docs {
			if d.Found {
				out.SearchDocuments[name] = append(out.SearchDocuments[name], d.Source)
			}
		}
	}
	return nil
}
