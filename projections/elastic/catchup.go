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
	Version int        `json:"version,omitempty"`
}

// state is d as a projections.CatchUpState.
func (d catchUpDoc) state() projections.CatchUpState {
	st := projections.CatchUpState{Started: d.Started, After: d.After, Events: d.Events, Types: d.Types, Skip: d.Skip, Version: d.Version}
	if d.Done != nil {
		st.Done = *d.Done
	}
	return st
}

// storedCatchUp is a catch-up document as read, with what a conditional
// write of it needs.
type storedCatchUp struct {
	Found       bool       `json:"found"`
	SeqNo       int        `json:"_seq_no"`
	PrimaryTerm int        `json:"_primary_term"`
	Source      catchUpDoc `json:"_source"`
}

// readCatchUp reads the catch-up document id of the catch-up index.
func (a *Applier) readCatchUp(ctx context.Context, id string) (storedCatchUp, error) {
	var res storedCatchUp
	err := esclient.Do(ctx, a.cfg.Client, esapi.GetRequest{Index: a.cfg.CatchUpIndex, DocumentID: esclient.PathSegment(id)}, &res)
	if esclient.IsNotFound(err) {
		return storedCatchUp{}, nil
	}
	return res, err
}

// catchUpMappings keeps the catch-up index out of dynamic mapping: its
// documents are read by id only.
var catchUpMappings = map[string]any{"mappings": map[string]any{"dynamic": false, "properties": map[string]any{}}}

// CatchUpState implements projections.Sink: the document of Index in
// CatchUpIndex, or the zero state when there is none.
func (a *Applier) CatchUpState(ctx context.Context) (projections.CatchUpState, error) {
	res, err := a.readCatchUp(ctx, a.cfg.Index)
	if err != nil {
		return projections.CatchUpState{}, fmt.Errorf("elastic: %s: catch-up state: %w", a.Name(), err)
	}
	if !res.Found {
		return projections.CatchUpState{}, nil
	}
	return res.Source.state(), nil
}

// Version is the projection's declared version (projections.VersionOf).
func (a *Applier) Version() int { return projections.VersionOf(a.cfg.Projection) }

// ApplyCatchUp implements projections.Sink: Apply, then st stored in
// CatchUpIndex once the batch's writes are acknowledged, unless the
// stored state is one st does not advance (projections.CatchUpState.
// Advances: another replica's later start, or its cursor further on),
// which it keeps: the document is read and written back conditional on
// its sequence number, again after a conflict. Elasticsearch has no
// transaction across the documents and the state, and needs none: a crash
// between them leaves the state behind the documents, and a resumed
// catch-up applies those events again, which the external versions skip.
func (a *Applier) ApplyCatchUp(ctx context.Context, events []eventstore.Envelope, st projections.CatchUpState) (projections.Outcome, error) {
	var out projections.Outcome
	if len(events) > 0 {
		var err error
		if out, err = a.Apply(ctx, events); err != nil {
			return out, err
		}
	}
	if err := a.recordCatchUp(ctx, a.cfg.Index, st); err != nil {
		return out, fmt.Errorf("elastic: %s: record the catch-up state: %w", a.Name(), err)
	}
	return out, nil
}

// putCatchUp stores st as the catch-up document id, whatever is stored.
func (a *Applier) putCatchUp(ctx context.Context, id string, st projections.CatchUpState) error {
	err := esclient.Do(ctx, a.cfg.Client, esapi.IndexRequest{Index: a.cfg.CatchUpIndex, DocumentID: esclient.PathSegment(id), Body: esclient.JSONBody(catchUpDocOf(st)), Refresh: "true"}, nil)
	if esclient.IsNotFound(err) { // no catch-up index yet
		err = esclient.Do(ctx, a.cfg.Client, esapi.IndicesCreateRequest{Index: a.cfg.CatchUpIndex, Body: esclient.JSONBody(catchUpMappings)}, nil)
		if err == nil || isAlreadyExists(err) {
			err = esclient.Do(ctx, a.cfg.Client, esapi.IndexRequest{Index: a.cfg.CatchUpIndex, DocumentID: esclient.PathSegment(id), Body: esclient.JSONBody(catchUpDocOf(st)), Refresh: "true"}, nil)
		}
	}
	return err
}

// catchUpDocOf is st as a catch-up document.
func catchUpDocOf(st projections.CatchUpState) catchUpDoc {
	doc := catchUpDoc{Started: st.Started, After: st.After, Events: st.Events, Types: st.Types, Skip: st.Skip, Version: st.ModelVersion()}
	if !st.Done.IsZero() {
		doc.Done = &st.Done
	}
	return doc
}

// recordCatchUp stores st as the catch-up document id when it advances
// the stored one, creating the catch-up index when there is none.
func (a *Applier) recordCatchUp(ctx context.Context, id string, st projections.CatchUpState) error {
	doc := catchUpDocOf(st)
	for {
		cur, err := a.readCatchUp(ctx, id)
		if esclient.IsNotFound(err) || (err == nil && !cur.Found) {
			err = esclient.Do(ctx, a.cfg.Client, esapi.IndexRequest{Index: a.cfg.CatchUpIndex, DocumentID: esclient.PathSegment(id), OpType: "create",
				Body: esclient.JSONBody(doc), Refresh: "true"}, nil)
			if esclient.IsNotFound(err) { // no catch-up index yet
				err = esclient.Do(ctx, a.cfg.Client, esapi.IndicesCreateRequest{Index: a.cfg.CatchUpIndex, Body: esclient.JSONBody(catchUpMappings)}, nil)
				if err == nil || isAlreadyExists(err) {
					continue
				}
			}
			if esclient.IsConflict(err) { // created meanwhile: compare with it
				continue
			}
			return err
		}
		if err != nil {
			return err
		}
		if !st.Advances(cur.Source.state()) {
			return nil
		}
		seq, term := cur.SeqNo, cur.PrimaryTerm
		err = esclient.Do(ctx, a.cfg.Client, esapi.IndexRequest{Index: a.cfg.CatchUpIndex, DocumentID: esclient.PathSegment(id), Body: esclient.JSONBody(doc),
			IfSeqNo: &seq, IfPrimaryTerm: &term, Refresh: "true"}, nil)
		if !esclient.IsConflict(err) {
			return err
		}
	}
}
