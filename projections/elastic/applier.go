package elastic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/eventpipe/eventpipe/privacy/subjects"
	"github.com/eventpipe/eventpipe/projections/elastic/esclient"

	"github.com/elastic/go-elasticsearch/v8/esapi"
	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/projections"
)

// Projection builds one Elasticsearch read model: one document per
// aggregate, whose id is the aggregate id, folded from the aggregate's
// events in sequence order. The Applier stores each document with the
// sequence of the last event folded into it as its external version, so
// the index itself refuses a duplicate or a stale redelivery: the
// positions live with the documents.
type Projection interface {
	// Name identifies the read model: its index alias, its consumer group.
	Name() string
	// AggregateTypes are the aggregate types whose events it reads.
	AggregateTypes() []string
	// EventTypes are the event types it applies (catch-up and replay read
	// them from the store).
	EventTypes() []string
	// IndexBody is the body of the request that creates its index: the
	// settings and the mappings.
	IndexBody() map[string]any
	// Apply returns the document of e's aggregate after e, given the
	// document before it (nil before the aggregate's first event). It
	// returns an error only for an event it can never apply (a permanent
	// one, see eventstore.IsPermanent).
	Apply(doc json.RawMessage, e eventstore.Envelope) (json.RawMessage, error)
}

// ApplierConfig configures an Applier.
type ApplierConfig struct {
	// Client talks to Elasticsearch (see NewClient). Required.
	Client esapi.Transport
	// Store is the event log gaps are repaired from. Required.
	Store eventstore.Store
	// Projection is what is applied. Required.
	Projection Projection
	// Index is the alias (or index) documents are read from and written
	// to (default: the projection's name; see Alias).
	Index string
	// Refresh is the _bulk refresh parameter: "" (the default: writes
	// become searchable within the index's refresh interval), "wait_for"
	// or "true".
	Refresh string
	// CacheSize is how many documents the Applier keeps in memory, as it
	// last wrote them, so that a batch reads from Elasticsearch only the
	// documents it does not hold (default 10,000; negative: none). A
	// cached document is never wrong, only possibly behind: another
	// writer's newer version makes the index refuse the write (409), the
	// entry is dropped and the events are skipped, and a cached document
	// behind the batch's events is brought up by gap repair.
	CacheSize int
	// CatchUpIndex is the index that keeps each search model's catch-up
	// state (projections.CatchUpState), one document per Index (default
	// DefaultCatchUpIndex; the binary puts the topic prefix before it,
	// see Alias). It is created when missing.
	CatchUpIndex string
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// DefaultCatchUpIndex is ApplierConfig.CatchUpIndex's default.
const DefaultCatchUpIndex = "eventpipe-catchup"

// Validate reports the first missing or invalid field.
func (c ApplierConfig) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("elastic: ApplierConfig: %w", &eventstore.ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	switch {
	case c.Client == nil:
		return bad("Client", "is nil")
	case c.Store == nil:
		return bad("Store", "is nil")
	case c.Projection == nil:
		return bad("Projection", "is nil")
	case c.Projection.Name() == "":
		return bad("Projection", "has no name")
	case c.CacheSize > 1<<24:
		return bad("CacheSize", "%d is above %d", c.CacheSize, 1<<24)
	case c.Refresh != "" && c.Refresh != "wait_for" && c.Refresh != "true" && c.Refresh != "false":
		return bad("Refresh", "%q: want \"\", \"wait_for\", \"true\" or \"false\"", c.Refresh)
	}
	return nil
}

// Alias is the index alias of the read model called name in the topic
// namespace prefix: lower case, as Elasticsearch requires.
func Alias(prefix, name string) string { return lower(prefix + name) }

// Applier applies events to an Elasticsearch read model exactly once in
// effect; it is a projections.Sink, so a projections.Runner consumes for
// it and projections.CatchUp fills it.
type Applier struct {
	cfg   ApplierConfig
	wants map[string]bool
	cache *lru.Cache[string, current] // by aggregate id; nil when off
	// intoIndex: cfg.Index names a concrete index (a replay's new one),
	// not an alias; otherwise writes require the alias, so that a missing
	// alias is an error instead of an index created under its name.
	intoIndex bool
}

var _ projections.Sink = (*Applier)(nil)

// NewApplier validates cfg and returns an Applier.
func NewApplier(cfg ApplierConfig) (*Applier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Index == "" {
		cfg.Index = Alias("", cfg.Projection.Name())
	}
	if cfg.CatchUpIndex == "" {
		cfg.CatchUpIndex = DefaultCatchUpIndex
	}
	wants := map[string]bool{}
	for _, t := range cfg.Projection.AggregateTypes() {
		wants[t] = t != subjects.AggregateType // its facts are scrubs (Scrubber), not documents
	}
	if cfg.CacheSize == 0 {
		cfg.CacheSize = 10_000
	}
	a := &Applier{cfg: cfg, wants: wants}
	if cfg.CacheSize > 0 {
		c, err := lru.New[string, current](cfg.CacheSize)
		if err != nil {
			return nil, fmt.Errorf("elastic: document cache: %w", err)
		}
		a.cache = c
	}
	return a, nil
}

// Name implements projections.Sink.
func (a *Applier) Name() string { return a.cfg.Projection.Name() }

// AggregateTypes implements projections.Sink.
func (a *Applier) AggregateTypes() []string { return a.cfg.Projection.AggregateTypes() }

// EventTypes implements projections.Sink.
func (a *Applier) EventTypes() []string { return a.cfg.Projection.EventTypes() }

// Index is the alias or index the Applier writes to.
func (a *Applier) Index() string { return a.cfg.Index }

// HasPositions implements projections.Sink: whether the index holds a
// document.
func (a *Applier) HasPositions(ctx context.Context) (bool, error) {
	var res struct {
		Count int64 `json:"count"`
	}
	err := esclient.Do(ctx, a.cfg.Client, esapi.CountRequest{Index: []string{a.cfg.Index}}, &res)
	if esclient.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("elastic: %s: count documents: %w", a.Name(), err)
	}
	return res.Count > 0, nil
}

// current is a document as stored: its source and its version (the
// sequence of the last event folded into it; 0 when there is none).
type current struct {
	source  json.RawMessage
	version int64
}

// Apply implements projections.Sink. It takes the current documents of
// the batch's aggregates from its cache, reading the others with one real
// time _mget, skips the events at or below
// a document's version, repairs gaps from the store, folds the rest in
// sequence order and writes each changed document once, in one _bulk,
// with the last folded sequence as its external version. Then, for a
// Scrubber, the documents a SubjectForgotten names are scrubbed. A document that
// another writer has already moved to that version or beyond is refused by
// the index (409) and counted as skipped. Nothing is lost when it fails:
// a retry folds from the stored documents again.
func (a *Applier) Apply(ctx context.Context, events []eventstore.Envelope) (projections.Outcome, error) {
	events, forgotten := splitForgotten(events)
	out, err := a.apply(ctx, events)
	if err != nil || len(forgotten) == 0 {
		return out, err
	}
	// After the batch's own writes: a document folded from events read
	// before the keys were gone is scrubbed too.
	s, ok := a.cfg.Projection.(Scrubber)
	if !ok {
		out.Skipped += len(forgotten)
		return out, nil
	}
	n, err := a.scrub(ctx, s, forgotten)
	if err != nil {
		return projections.Outcome{}, err
	}
	out.Applied += n
	return out, nil
}

// apply folds and writes the documents of events (no SubjectForgotten).
func (a *Applier) apply(ctx context.Context, events []eventstore.Envelope) (projections.Outcome, error) {
	out := projections.Outcome{Positions: map[eventstore.Ref]int64{}}
	refs, byAgg, unwanted := projections.ByAggregate(events, a.wants)
	out.Skipped = unwanted
	if len(refs) == 0 {
		return out, nil
	}
	name := a.Name()
	docs, err := a.current(ctx, refs)
	if err != nil {
		return projections.Outcome{}, err
	}
	// Whatever fails below leaves the cache without the batch's
	// documents; the next attempt reads them from the index.
	ok := false
	defer func() {
		if !ok && a.cache != nil {
			for _, ref := range refs {
				a.cache.Remove(ref.ID)
			}
		}
	}()
	type write struct {
		ref             eventstore.Ref
		applied, repair int
		doc             current
	}
	var (
		body   bytes.Buffer
		writes []write
	)
	for _, ref := range refs {
		cur := docs[ref.ID]
		p, err := projections.Sequence(ctx, a.cfg.Store, name, ref, cur.version, byAgg[ref])
		if err != nil {
			return projections.Outcome{}, err
		}
		if p.Repaired > 0 {
			a.cfg.Logger.WarnContext(ctx, "repaired a gap from the event store", "projection", name, "aggregate", ref.String(), "events", p.Repaired)
		}
		out.Skipped += p.Skipped
		if len(p.Apply) == 0 {
			continue // only duplicates
		}
		doc := cur.source
		for _, e := range p.Apply {
			if doc, err = a.cfg.Projection.Apply(doc, e); err != nil {
				return projections.Outcome{}, fmt.Errorf("elastic: %s: apply %s: %w", name, e, err)
			}
		}
		pos := p.Apply[len(p.Apply)-1].Sequence
		w := write{ref: ref, applied: len(p.Apply) - p.Repaired, repair: p.Repaired}
		action, _ := json.Marshal(map[string]any{"index": map[string]any{"_id": ref.ID, "version": pos, "version_type": "external"}})
		body.Write(action)
		body.WriteByte('\n')
		if err := json.Compact(&body, doc); err != nil {
			return projections.Outcome{}, fmt.Errorf("elastic: %s: %s: the projection returned a document that is not JSON: %w", name, ref, err)
		}
		body.WriteByte('\n')
		w.doc = current{source: doc, version: pos}
		writes = append(writes, w)
		out.Positions[ref] = pos
	}
	if len(writes) == 0 {
		ok = true
		return out, nil
	}
	items, err := a.bulk(ctx, &body)
	if err != nil {
		return projections.Outcome{}, fmt.Errorf("elastic: %s: write %d documents: %w", name, len(writes), err)
	}
	if len(items) != len(writes) {
		return projections.Outcome{}, fmt.Errorf("elastic: %s: _bulk answered %d items for %d documents", name, len(items), len(writes))
	}
	var errs []error
	for i, it := range items {
		w := writes[i]
		switch {
		case it.Status >= 200 && it.Status < 300:
			out.Applied += w.applied
			out.Repaired += w.repair
			if a.cache != nil {
				a.cache.Add(w.ref.ID, w.doc)
			}
		case it.Status == http.StatusConflict:
			// Another writer got there first: the document is at this
			// version or beyond.
			out.Skipped += w.applied
			delete(out.Positions, w.ref)
			if a.cache != nil {
				a.cache.Remove(w.ref.ID)
			}
		default:
			re := &esclient.ResponseError{Status: it.Status}
			if it.Error != nil {
				re.Type, re.Reason = it.Error.Type, it.Error.Reason
			}
			errs = append(errs, fmt.Errorf("elastic: %s: write %s: %w", name, w.ref, re))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return projections.Outcome{}, err
	}
	ok = true
	return out, nil
}

// current returns the documents of refs by aggregate id: from the cache
// where it holds them, the rest read from the index in one _mget.
func (a *Applier) current(ctx context.Context, refs []eventstore.Ref) (map[string]current, error) {
	if a.cache == nil {
		return a.read(ctx, refs)
	}
	docs := make(map[string]current, len(refs))
	var missing []eventstore.Ref
	for _, ref := range refs {
		if d, ok := a.cache.Get(ref.ID); ok {
			docs[ref.ID] = d
		} else {
			missing = append(missing, ref)
		}
	}
	if len(missing) == 0 {
		return docs, nil
	}
	read, err := a.read(ctx, missing)
	if err != nil {
		return nil, err
	}
	for id, d := range read {
		docs[id] = d
	}
	return docs, nil
}

// read returns the current documents of refs by aggregate id.
func (a *Applier) read(ctx context.Context, refs []eventstore.Ref) (map[string]current, error) {
	ids := make([]string, len(refs))
	for i, ref := range refs {
		ids[i] = ref.ID
	}
	var res struct {
		Docs []struct {
			ID      string              `json:"_id"`
			Found   bool                `json:"found"`
			Version int64               `json:"_version"`
			Source  json.RawMessage     `json:"_source"`
			Error   *esclient.ErrorBody `json:"error"`
		} `json:"docs"`
	}
	if err := esclient.Do(ctx, a.cfg.Client, esapi.MgetRequest{Index: a.cfg.Index, Body: esclient.JSONBody(map[string]any{"ids": ids})}, &res); err != nil {
		return nil, fmt.Errorf("elastic: %s: read %d documents: %w", a.Name(), len(ids), err)
	}
	docs := make(map[string]current, len(res.Docs))
	for _, d := range res.Docs {
		if d.Error != nil {
			return nil, fmt.Errorf("elastic: %s: read %s: %s: %s", a.Name(), d.ID, d.Error.Type, d.Error.Reason)
		}
		if d.Found {
			docs[d.ID] = current{source: d.Source, version: d.Version}
		}
	}
	return docs, nil
}

// bulkItem is one item of a _bulk answer.
type bulkItem struct {
	ID      string              `json:"_id"`
	Status  int                 `json:"status"`
	Version int64               `json:"_version"`
	Error   *esclient.ErrorBody `json:"error"`
}

// bulk sends body to _bulk and returns its items in request order.
func (a *Applier) bulk(ctx context.Context, body *bytes.Buffer) ([]bulkItem, error) {
	var res struct {
		Items []map[string]bulkItem `json:"items"`
	}
	req := esapi.BulkRequest{Index: a.cfg.Index, Body: body, Refresh: a.cfg.Refresh}
	if !a.intoIndex {
		yes := true
		req.RequireAlias = &yes
	}
	if err := esclient.Do(ctx, a.cfg.Client, req, &res); err != nil {
		return nil, err
	}
	items := make([]bulkItem, len(res.Items))
	for i, m := range res.Items {
		for _, it := range m {
			items[i] = it
		}
	}
	return items, nil
}
