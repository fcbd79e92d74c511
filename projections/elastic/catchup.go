package elastic

import (
	"context"
	"fmt"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/projections"
	"github.com/eventpipe/eventpipe/projections/elastic/esclient"
)

// catchUpDoc is a search model's catch-up state as stored in the
// catch-up index.
type catchUpDoc struct {
	Started time.Time  `json:"started"`
	After   string     `json:"after"`
	Events  int64      `json:"events"`
	Done    *time.Time `json:"done,omitempty"`
	Types   []string   `json:"types,omitempty"`
	Skip    []string   `json:"skip,omitempty"`
}

// catchUpMappings keeps the catch-up index out of dynamic mapping: its
// documents are read by id only.
var catchUpMappings = map[string]any{"mappings": map[string]any{"dynamic": false, "properties": map[string]any{}}}

// CatchUpState implements projections.Sink: the document of Index in
// CatchUpIndex, or the zero state when there is none.
func (a *Applier) CatchUpState(ctx context.Context) (projections.CatchUpState, error) {
	var res struct {
		Found  bool       `json:"found"`
		Source catchUpDoc `json:"_source"`
	}
	err := esclient.Do(ctx, a.cfg.Client, esapi.GetRequest{Index: a.cfg.CatchUpIndex, DocumentID: a.cfg.Index}, &res)
	if esclient.IsNotFound(err) {
		return projections.CatchUpState{}, nil
	}
	if err != nil {
		return projections.CatchUpState{}, fmt.Errorf("elastic: %s: catch-up state: %w", a.Name(), err)
	}
	st := projections.CatchUpState{Started: res.Source.Started, After: res.Source.After, Events: res.Source.Events,
		Types: res.Source.Types, Skip: res.Source.Skip}
	if res.Source.Done != nil {
		st.Done = *res.Source.Done
	}
	return st, nil
}

// ApplyCatchUp implements projections.Sink: Apply, then st stored in
// CatchUpIndex once the batch's writes are acknowledged. Elasticsearch has
// no transaction across the two, and needs none: a crash between them
// leaves the state behind the documents, and a resumed catch-up applies
// those events again, which the external versions skip.
func (a *Applier) ApplyCatchUp(ctx context.Context, events []eventstore.Envelope, st projections.CatchUpState) (projections.Outcome, error) {
	var out projections.Outcome
	if len(events) > 0 {
		var err error
		if out, err = a.Apply(ctx, events); err != nil {
			return out, err
		}
	}
	doc := catchUpDoc{Started: st.Started, After: st.After, Events: st.Events, Types: st.Types, Skip: st.Skip}
	if !st.Done.IsZero() {
		doc.Done = &st.Done
	}
	put := func() error {
		return esclient.Do(ctx, a.cfg.Client, esapi.IndexRequest{Index: a.cfg.CatchUpIndex, DocumentID: a.cfg.Index,
			Body: esclient.JSONBody(doc), Refresh: "true"}, nil)
	}
	err := put()
	if esclient.IsNotFound(err) { // no catch-up index yet
		err = esclient.Do(ctx, a.cfg.Client, esapi.IndicesCreateRequest{Index: a.cfg.CatchUpIndex, Body: esclient.JSONBody(catchUpMappings)}, nil)
		if err == nil || isAlreadyExists(err) {
			err = put()
		}
	}
	if err != nil {
		return out, fmt.Errorf("elastic: %s: record the catch-up state: %w", a.Name(), err)
	}
	return out, nil
}
