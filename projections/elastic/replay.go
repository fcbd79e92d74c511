package elastic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/eventpipe/eventpipe/projections/elastic/esclient"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/projections"
)

// ReplayConfig configures Replay.
type ReplayConfig struct {
	// Client talks to Elasticsearch. Required.
	Client esapi.Transport
	// Store repairs gaps and brings the new index up to the live one.
	// Required.
	Store eventstore.Store
	// History pages the stored events by type. Required.
	History projections.HistoryPage
	// Count, when set, counts the stored events of a type: the progress
	// total.
	Count func(ctx context.Context, eventType string) (int, error)
	// Projection is rebuilt. Required.
	Projection Projection
	// Alias is the read model's alias (default: the projection's name).
	Alias string
	// CatchUpIndex keeps the catch-up states (ApplierConfig.CatchUpIndex;
	// default DefaultCatchUpIndex): the new index's, as its rebuild goes,
	// and the alias's, which the swap records as the rebuild's, at the
	// projection's version.
	CatchUpIndex string
	// Resume keeps the new index an interrupted rebuild of the same
	// version left (its catch-up state is kept batch by batch) and goes
	// on from there; leftovers of other versions are deleted. A failed or
	// cancelled rebuild keeps its index for the next one. The Runner's
	// automatic rebuild sets it; without it a replay always starts afresh.
	Resume bool
	// Progress, when set, is called as the rebuild advances.
	Progress func(projections.ReplayProgress)
	// LockTTL is how long the replay lock outlives a replay that stopped
	// renewing it (a killed one) (default 30s).
	LockTTL time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Validate reports the first missing or invalid field.
func (c ReplayConfig) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("elastic: ReplayConfig: %w", &eventstore.ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	switch {
	case c.Client == nil:
		return bad("Client", "is nil")
	case c.Store == nil:
		return bad("Store", "is nil")
	case c.History == nil:
		return bad("History", "is nil")
	case c.Projection == nil:
		return bad("Projection", "is nil")
	case c.LockTTL < 0:
		return bad("LockTTL", "%v is negative", c.LockTTL)
	}
	return nil
}

// Replay rebuilds an Elasticsearch read model from the event store without
// taking it away from searches:
//
//  1. it creates a new index (<alias>-<unix ms>) with the projection's
//     settings and mappings, but the number of replicas of the alias's
//     index (index.number_of_replicas, raised or lowered since it was
//     created), and applies the whole history to it, while searches and
//     the live consumer keep using the alias's index;
//  2. it brings the new index up to every document of the live one (from
//     the store, where a live document is ahead), refreshes it and moves
//     the alias to it in one _aliases request (atomic: a search sees the
//     old index or the new one, never none or a half-built one);
//  3. it blocks writes to the old index, so that a live write still aimed
//     at it fails and is retried through the alias, brings the new index
//     up to the old one once more, and deletes the old index.
//
// Only one replay of a read model runs at a time (projections.
// ErrReplayRunning): the lock is a lease document in the
// eventpipe-replay-locks index, renewed while the replay runs. Before it
// starts, it deletes what an interrupted replay of the same alias left:
// indices named <alias>-0 or <alias>-<13-digit unix ms> that no alias
// points to. Indices of other models are never touched, even when their
// name starts with the alias (the todos-search-v2-… indices of a model
// todos-search-v2 beside todos-search), nor is an index any alias points
// to.
func Replay(ctx context.Context, cfg ReplayConfig) (_ projections.ReplayResult, err error) {
	if err := cfg.Validate(); err != nil {
		return projections.ReplayResult{}, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.LockTTL == 0 {
		cfg.LockTTL = 30 * time.Second
	}
	if cfg.CatchUpIndex == "" {
		cfg.CatchUpIndex = DefaultCatchUpIndex
	}
	p := cfg.Projection
	if cfg.Alias == "" {
		cfg.Alias = Alias("", p.Name())
	}
	es, alias := cfg.Client, cfg.Alias
	began := time.Now()
	wrap := func(what string, err error) error {
		return fmt.Errorf("elastic: replay %s: %s: %w", p.Name(), what, err)
	}

	lock, err := acquireLease(ctx, es, alias, cfg.LockTTL)
	if err != nil {
		return projections.ReplayResult{}, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	renewDone := make(chan struct{})
	go func() { defer close(renewDone); lock.keep(ctx, cancel) }()
	defer func() {
		// A replay stopped by a failed renewal says why.
		if cause := context.Cause(ctx); err != nil && cause != nil && !errors.Is(cause, context.Canceled) {
			err = fmt.Errorf("%w (stopped: %v)", err, cause)
		}
		cancel(nil)
		<-renewDone
		if err := lock.release(context.WithoutCancel(ctx)); err != nil {
			cfg.Logger.Warn("replay: could not release the replay lock; it expires by itself", "projection", p.Name(), "err", err)
		}
	}()

	if err := EnsureIndex(ctx, es, p, alias); err != nil {
		return projections.ReplayResult{}, err
	}
	old, err := AliasTarget(ctx, es, alias)
	if err != nil {
		return projections.ReplayResult{}, err
	}
	version := projections.VersionOf(p)
	states, err := NewApplier(ApplierConfig{Client: es, Store: cfg.Store, Projection: p, Index: alias, CatchUpIndex: cfg.CatchUpIndex, Logger: cfg.Logger})
	if err != nil {
		return projections.ReplayResult{}, err
	}
	var fresh string
	if cfg.Resume {
		if fresh, err = resumableIndex(ctx, es, states, alias, old, version); err != nil {
			return projections.ReplayResult{}, wrap("look for an interrupted rebuild", err)
		}
	}
	if err := dropLeftovers(ctx, es, alias, old, fresh, cfg.Logger); err != nil {
		return projections.ReplayResult{}, wrap("drop indices left by an interrupted replay", err)
	}
	if fresh == "" {
		replicas, err := liveReplicas(ctx, es, old)
		if err != nil {
			return projections.ReplayResult{}, err
		}
		fresh = newIndexName(alias, time.Now())
		if err := createIndex(ctx, es, fresh, p, "", replicas); err != nil {
			return projections.ReplayResult{}, err
		}
	}
	swapped := false
	defer func() {
		if !swapped && !cfg.Resume {
			if err := deleteIndex(context.WithoutCancel(ctx), es, fresh); err != nil {
				cfg.Logger.Warn("replay: could not delete the unfinished index", "projection", p.Name(), "index", fresh, "err", err)
			}
		}
	}()
	applier, err := NewApplier(ApplierConfig{Client: es, Store: cfg.Store, Projection: p, Index: fresh, CatchUpIndex: cfg.CatchUpIndex, Logger: cfg.Logger})
	if err != nil {
		return projections.ReplayResult{}, err
	}
	applier.intoIndex = true

	total := 0
	if cfg.Count != nil {
		for _, t := range p.EventTypes() {
			n, err := cfg.Count(ctx, t)
			if err != nil {
				return projections.ReplayResult{}, wrap("count the history", err)
			}
			total += n
		}
	}
	report := func(phase string, done int) {
		if cfg.Progress != nil {
			cfg.Progress(projections.ReplayProgress{Phase: phase, Done: done, Total: total, Elapsed: time.Since(began)})
		}
	}
	report("rebuild", 0)
	cfg.Logger.InfoContext(ctx, "replay: rebuilding into a new index", "projection", p.Name(), "index", fresh, "alias", alias, "version", version, "events", total)
	built, err := projections.ResumeCatchUp(ctx, applier, cfg.History, func(st projections.CatchUpState) { report("rebuild", int(st.Events)) })
	if err != nil {
		return projections.ReplayResult{}, wrap("rebuild", err)
	}
	seen := int(built.Events)
	res := projections.ReplayResult{Events: seen}

	report("swap", seen)
	swapBegan := time.Now()
	n, err := reconcile(ctx, es, old, applier)
	if err != nil {
		return projections.ReplayResult{}, wrap("catch up with the live index", err)
	}
	res.CaughtUp += n
	if err := refresh(ctx, es, fresh); err != nil {
		return projections.ReplayResult{}, err
	}
	actions := []any{map[string]any{"add": map[string]any{"index": fresh, "alias": alias}}}
	actions = append([]any{map[string]any{"remove": map[string]any{"index": old, "alias": alias}}}, actions...)
	if err := esclient.Do(ctx, es, esapi.IndicesUpdateAliasesRequest{Body: esclient.JSONBody(map[string]any{"actions": actions})}, nil); err != nil {
		return projections.ReplayResult{}, wrap("move the alias", err)
	}
	swapped = true
	res.Swap = time.Since(swapBegan)

	// Writes that resolved the alias before the swap may still land in the
	// old index: block it, then take over what they wrote.
	if err := esclient.Do(ctx, es, esapi.IndicesAddBlockRequest{Index: []string{old}, Block: "write"}, nil); err != nil {
		return res, wrap("block writes to the old index "+old, err)
	}
	n, err = reconcile(ctx, es, old, applier)
	if err != nil {
		return res, wrap("catch up with the old index after the swap", err)
	}
	res.CaughtUp += n
	if err := deleteIndex(ctx, es, old); err != nil {
		return res, err
	}
	// The model is now the rebuild's: its catch-up, done, at its version
	// (written as it is: the alias's state is replaced, not advanced).
	built.Version = version
	if err := states.putCatchUp(ctx, alias, built); err != nil {
		return res, wrap("record the rebuilt model's catch-up state", err)
	}
	if err := esclient.Do(ctx, es, esapi.DeleteRequest{Index: cfg.CatchUpIndex, DocumentID: esclient.PathSegment(fresh), Refresh: "true"}, nil); err != nil && !esclient.IsNotFound(err) {
		cfg.Logger.Warn("replay: could not delete the rebuilt index's catch-up state", "projection", p.Name(), "index", fresh, "err", err)
	}
	res.Elapsed = time.Since(began)
	report("done", seen)
	cfg.Logger.InfoContext(ctx, "replay: swapped in the rebuilt index", "projection", p.Name(), "index", fresh, "alias", alias,
		"events", seen, "caught_up_at_swap", res.CaughtUp, "swap", res.Swap, "elapsed", res.Elapsed)
	return res, nil
}

// dropLeftovers deletes the indices of alias's own (isOwnIndex) that no
// alias points to, live apart: the new indices of replays that were
// interrupted, or an old index a replay could not delete after its swap
// (the replay lock rules out a running one). An index named as alias's
// own that some alias points to is another model's and is kept.
func dropLeftovers(ctx context.Context, es esapi.Transport, alias, live, keep string, logger *slog.Logger) error {
	var res map[string]struct {
		Aliases map[string]json.RawMessage `json:"aliases"`
	}
	if err := esclient.Do(ctx, es, esapi.IndicesGetRequest{Index: []string{alias + "-*"}}, &res); err != nil && !esclient.IsNotFound(err) {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(res)) {
		if name == live || name == keep || !isOwnIndex(alias, name) {
			continue
		}
		if aliases := res[name].Aliases; len(aliases) > 0 {
			logger.Warn("replay: keeping an index named like a leftover of this alias: an alias points to it",
				"alias", alias, "index", name, "its_aliases", slices.Sorted(maps.Keys(aliases)))
			continue
		}
		if err := deleteIndex(ctx, es, name); err != nil {
			return err
		}
		logger.Info("replay: deleted an index left by an interrupted replay", "alias", alias, "index", name)
	}
	return nil
}

// resumableIndex returns the leftover index of alias's own (isOwnIndex,
// no alias on it, not live) whose catch-up state, kept by states under
// the index's name, is a rebuild at version (any version for 0): the
// newest such, or "".
func resumableIndex(ctx context.Context, es esapi.Transport, states *Applier, alias, live string, version int) (string, error) {
	var res map[string]struct {
		Aliases map[string]json.RawMessage `json:"aliases"`
	}
	if err := esclient.Do(ctx, es, esapi.IndicesGetRequest{Index: []string{alias + "-*"}}, &res); err != nil && !esclient.IsNotFound(err) {
		return "", err
	}
	names := slices.Sorted(maps.Keys(res))
	slices.Reverse(names)
	for _, name := range names {
		if name == live || !isOwnIndex(alias, name) || len(res[name].Aliases) > 0 {
			continue
		}
		st, err := states.readCatchUp(ctx, name)
		if err != nil {
			return "", err
		}
		if st.Found && !st.Source.Started.IsZero() && (version == 0 || st.Source.state().ModelVersion() == version) {
			return name, nil
		}
	}
	return "", nil
}

// reconcilePage is how many documents reconcile compares at a time.
const reconcilePage = 1000

// reconcile brings a's index up to every document of index from: it
// pages from's documents in id order and, where one is at a higher
// version than a's copy, applies the store's later events through a. It
// returns the number of events applied. Documents must carry their
// aggregate id in the keyword field "id" (paging sorts on it).
func reconcile(ctx context.Context, es esapi.Transport, from string, a *Applier) (int, error) {
	if err := refresh(ctx, es, from); err != nil {
		return 0, err
	}
	applied, last := 0, ""
	for {
		query := map[string]any{"match_all": map[string]any{}}
		if last != "" {
			query = map[string]any{"range": map[string]any{"id": map[string]any{"gt": last}}}
		}
		var res struct {
			Hits struct {
				Hits []struct {
					ID      string `json:"_id"`
					Version int64  `json:"_version"`
				} `json:"hits"`
			} `json:"hits"`
		}
		body := map[string]any{"size": reconcilePage, "sort": []any{map[string]any{"id": "asc"}}, "version": true, "_source": false, "query": query}
		if err := esclient.Do(ctx, es, esapi.SearchRequest{Index: []string{from}, Body: esclient.JSONBody(body)}, &res); err != nil {
			return applied, fmt.Errorf("page %s after %q: %w", from, last, err)
		}
		hits := res.Hits.Hits
		if len(hits) == 0 {
			return applied, nil
		}
		refs := make([]eventstore.Ref, len(hits))
		for i, h := range hits {
			refs[i] = eventstore.Ref{Type: a.AggregateTypes()[0], ID: h.ID}
		}
		mine, err := a.read(ctx, refs)
		if err != nil {
			return applied, err
		}
		var behind []eventstore.Envelope
		for _, h := range hits {
			have := mine[h.ID].version
			if h.Version <= have {
				continue
			}
			events, err := loadAny(ctx, a, h.ID, have)
			if err != nil {
				return applied, err
			}
			behind = append(behind, events...)
		}
		if len(behind) > 0 {
			out, err := a.Apply(ctx, behind)
			if err != nil {
				return applied, err
			}
			applied += out.Applied + out.Repaired
		}
		last = hits[len(hits)-1].ID
	}
}

// loadAny loads the events after seq of the aggregate id of whichever of
// a's aggregate types holds it.
func loadAny(ctx context.Context, a *Applier, id string, after int64) ([]eventstore.Envelope, error) {
	for _, t := range a.AggregateTypes() {
		if !a.wants[t] {
			continue // the subjects' facts have no documents
		}
		events, err := a.cfg.Store.Load(ctx, eventstore.Ref{Type: t, ID: id}, after)
		if err != nil {
			return nil, fmt.Errorf("load %s/%s after %d: %w", t, id, after, err)
		}
		if len(events) > 0 {
			return events, nil
		}
	}
	return nil, nil
}

// ReadModelState reads where the search model behind alias stands: the
// catch-up state of its alias (Built) and, while a rebuild fills a new
// index of the alias's own, that index's (Rebuild; zero when none is
// under way or left), as kept in catchUpIndex (ApplierConfig.CatchUpIndex).
func ReadModelState(ctx context.Context, es esapi.Transport, alias, catchUpIndex string) (projections.ModelState, error) {
	if catchUpIndex == "" {
		catchUpIndex = DefaultCatchUpIndex
	}
	states := &Applier{cfg: ApplierConfig{Client: es, Index: alias, CatchUpIndex: catchUpIndex}}
	var st projections.ModelState
	built, err := states.readCatchUp(ctx, alias)
	if err != nil {
		return st, fmt.Errorf("elastic: %s: model state: %w", alias, err)
	}
	st.Built = built.Source.state()
	live, err := AliasTarget(ctx, es, alias)
	if esclient.IsNotFound(err) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	idx, err := resumableIndex(ctx, es, states, alias, live, 0)
	if err != nil || idx == "" {
		return st, err
	}
	rebuild, err := states.readCatchUp(ctx, idx)
	if err != nil {
		return st, fmt.Errorf("elastic: %s: rebuild state: %w", alias, err)
	}
	st.Rebuild = rebuild.Source.state()
	return st, nil
}
