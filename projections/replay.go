package projections

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe/eventstore"
)

// Migrator is a projection that brings its own Postgres tables, as
// numbered tern SQL migrations (001_create.sql, …; each with a
// "---- create above / drop below ----" line). eventpipe.Migrate applies
// them into the live schema and a replay into its shadow schema, each set
// tracked in its own version table (eventpipe_schema_version_<name>, or
// its hashed short form for a long name: see
// migrations/postgres.ReadModelVersionTable).
// The built-in read models need none: their tables are eventpipe's own
// migrations.
type Migrator interface {
	Migrations() fs.FS
}

// Rebuildable is a projection a replay can rebuild: it names its event
// types (to read its history from the store) and the tables it owns (to
// swap them).
type Rebuildable interface {
	Projection
	EventTyper
	// Tables are the read model's tables, unqualified.
	Tables() []string
}

// ErrReplayRunning is returned when another replay of the same projection
// holds its replay lock.
var ErrReplayRunning = errors.New("projections: a replay of this projection is already running")

// ReplayConfig configures Replay.
type ReplayConfig struct {
	// DB is the live read-model database; the first schema of its
	// search_path holds the live tables and positions. Required.
	DB *pgxpool.Pool
	// Store repairs gaps and brings the rebuilt model up to the live one
	// at the swap. Required.
	Store eventstore.Store
	// History pages the stored events by type. Required.
	History HistoryPage
	// Count, when set, counts the stored events of a type: the progress
	// total.
	Count func(ctx context.Context, eventType string) (int, error)
	// Projection is rebuilt; it must be Rebuildable. Required.
	Projection Projection
	// CreateTables creates the read-model schema (every migration) in the
	// empty schema it is given. Required.
	CreateTables func(ctx context.Context, schema string) error
	// Progress, when set, is called as the rebuild advances.
	Progress func(ReplayProgress)
	// Resume keeps the shadow schema an interrupted rebuild of the same
	// version left (its catch-up cursor is kept in it, batch by batch)
	// and goes on from there; a shadow of another version is dropped. A
	// failed or cancelled rebuild keeps its shadow for the next one. The
	// Runner's automatic rebuild (RunnerConfig.Rebuild) sets it; without
	// it a replay always starts afresh and drops its shadow when it ends.
	Resume bool
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Validate reports the first missing or invalid field.
func (c ReplayConfig) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("projections: ReplayConfig: %w", &eventstore.ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	switch {
	case c.DB == nil:
		return bad("DB", "is nil")
	case c.Store == nil:
		return bad("Store", "is nil")
	case c.History == nil:
		return bad("History", "is nil")
	case c.Projection == nil:
		return bad("Projection", "is nil")
	case c.CreateTables == nil:
		return bad("CreateTables", "is nil")
	}
	if _, ok := c.Projection.(Rebuildable); !ok {
		return bad("Projection", "%s cannot be replayed: it does not name its event types and tables", c.Projection.Name())
	}
	return nil
}

// ReplayProgress is where a replay is.
type ReplayProgress struct {
	// Phase is "rebuild" while history is applied to the shadow tables,
	// "swap" while the swap transaction runs, "done" after it committed.
	Phase string
	// Done is the events read from the store so far; Total the events
	// counted at the start (0 when unknown; new events may make Done pass
	// it).
	Done, Total int
	// Elapsed is the time since the replay began.
	Elapsed time.Duration
}

// ReplayResult says what a replay did.
type ReplayResult struct {
	// Events is the history read from the store into the shadow tables.
	Events int
	// CaughtUp is the events applied inside the swap transaction to bring
	// the shadow tables up to the live positions.
	CaughtUp int
	// Elapsed is the whole replay; Swap the swap transaction alone (how
	// long readers and the live consumer waited).
	Elapsed, Swap time.Duration
}

// Replay rebuilds a projection from the event store without taking its
// read model away:
//
//  1. it creates a shadow schema (<live>_replay_<name>) with every
//     migration and applies the projection's whole history to it, while
//     readers and the live consumer keep using the live tables;
//  2. in one transaction it takes the projection's lock exclusively
//     (waiting for live transactions in flight, holding off new ones),
//     applies to the shadow tables whatever the live positions are ahead
//     by (read from the store), moves the live tables out and the shadow
//     tables in (ALTER TABLE … SET SCHEMA) and replaces the projection's
//     positions with the shadow's;
//  3. it drops the old tables. The live consumer resumes on the new
//     tables from their positions.
//
// The swap also records the projection's catch-up state as the rebuild's:
// done, at the projection's declared version (VersionOf), so that a
// version change is handled once. The rebuild's progress is kept in the
// shadow schema's projection_catchup row (ResumeCatchUp), which a resumed
// rebuild (ReplayConfig.Resume) goes on from and `eventpipe status` shows.
//
// Readers see the old model until the commit and the new one after it;
// statements that arrive during the swap wait for it. Only one replay of a
// projection runs at a time (ErrReplayRunning).
func Replay(ctx context.Context, cfg ReplayConfig) (ReplayResult, error) {
	if err := cfg.Validate(); err != nil {
		return ReplayResult{}, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	began := time.Now()
	p := cfg.Projection.(Rebuildable)
	name := p.Name()
	wrap := func(what string, err error) error {
		return fmt.Errorf("projections: replay %s: %s: %w", name, what, err)
	}

	// One replay per projection: a session lock held on a connection of
	// its own for the whole replay.
	guard, err := cfg.DB.Acquire(ctx)
	if err != nil {
		return ReplayResult{}, wrap("connect", err)
	}
	defer guard.Release()
	var locked bool
	if err := guard.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtextextended($1, 0))`, "eventpipe.replay/"+name).Scan(&locked); err != nil {
		return ReplayResult{}, wrap("replay lock", err)
	}
	if !locked {
		return ReplayResult{}, ErrReplayRunning
	}
	defer func() {
		_, _ = guard.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(hashtextextended($1, 0))`, "eventpipe.replay/"+name)
	}()

	var live string
	if err := guard.QueryRow(ctx, `SELECT current_schema()`).Scan(&live); err != nil || live == "" {
		return ReplayResult{}, wrap("live schema", errors.Join(err, errors.New("the search_path names no existing schema")))
	}
	shadow, retired := ShadowSchema(live, name), retiredSchema(live, name)
	version := VersionOf(p)
	drop := func(ctx context.Context, schemas ...string) error {
		for _, s := range schemas {
			if _, err := guard.Exec(ctx, `DROP SCHEMA IF EXISTS `+ident(s)+` CASCADE`); err != nil {
				return err
			}
		}
		return nil
	}
	resumed, err := resumableShadow(ctx, guard, shadow, name, version)
	if err != nil || !cfg.Resume {
		resumed = CatchUpState{}
	}
	// The tables a swap moved out, and a shadow left by an interrupted
	// replay unless it is resumed: stale.
	stale := []string{retired}
	if resumed.Started.IsZero() {
		stale = append(stale, shadow)
	}
	if err := drop(ctx, stale...); err != nil {
		return ReplayResult{}, wrap("drop an old shadow schema", err)
	}
	swapped := false
	defer func() {
		schemas := []string{shadow, retired}
		if cfg.Resume && !swapped {
			schemas = schemas[1:] // kept for the next rebuild
		}
		if err := drop(context.WithoutCancel(ctx), schemas...); err != nil {
			cfg.Logger.Warn("replay: could not drop the shadow schemas", "projection", name, "err", err)
		}
	}()
	if resumed.Started.IsZero() {
		if _, err := guard.Exec(ctx, `CREATE SCHEMA `+ident(shadow)); err != nil {
			return ReplayResult{}, wrap("create the shadow schema", err)
		}
		if err := cfg.CreateTables(ctx, shadow); err != nil {
			return ReplayResult{}, wrap("create the shadow tables", err)
		}
	}

	pcfg := cfg.DB.Config().Copy()
	pcfg.ConnConfig.RuntimeParams["search_path"] = shadow
	pcfg.MaxConns = 2
	shadowDB, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return ReplayResult{}, wrap("connect to the shadow schema", err)
	}
	defer shadowDB.Close()
	applier, err := NewApplier(ApplierConfig{DB: shadowDB, Store: cfg.Store, Projection: p, Logger: cfg.Logger})
	if err != nil {
		return ReplayResult{}, err
	}

	total := 0
	if cfg.Count != nil {
		for _, t := range p.EventTypes() {
			n, err := cfg.Count(ctx, t)
			if err != nil {
				return ReplayResult{}, wrap("count the history", err)
			}
			total += n
		}
	}
	report := func(phase string, done int) {
		if cfg.Progress != nil {
			cfg.Progress(ReplayProgress{Phase: phase, Done: done, Total: total, Elapsed: time.Since(began)})
		}
	}
	report("rebuild", int(resumed.Events))
	if resumed.Started.IsZero() {
		cfg.Logger.InfoContext(ctx, "replay: rebuilding into the shadow schema", "projection", name, "shadow", shadow, "version", version, "events", total)
	} else {
		cfg.Logger.InfoContext(ctx, "replay: resuming the rebuild in the shadow schema", "projection", name, "shadow", shadow, "version", version,
			"events", total, "done", resumed.Events, "after", resumed.After)
	}
	built, err := ResumeCatchUp(ctx, applier, cfg.History, func(st CatchUpState) { report("rebuild", int(st.Events)) })
	if err != nil {
		return ReplayResult{}, wrap("rebuild", err)
	}
	seen := int(built.Events)
	res := ReplayResult{Events: seen}

	report("swap", seen)
	swapBegan := time.Now()
	err = pgx.BeginFunc(ctx, cfg.DB, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, projectionLockKey(name)); err != nil {
			return wrap("lock the projection", err)
		}
		n, err := catchUpToLive(ctx, tx, applier, live, shadow)
		if err != nil {
			return err
		}
		res.CaughtUp = n
		stmts := []string{`CREATE SCHEMA ` + ident(retired)}
		for _, t := range p.Tables() {
			stmts = append(stmts, `ALTER TABLE `+ident(live)+`.`+ident(t)+` SET SCHEMA `+ident(retired))
		}
		for _, t := range p.Tables() {
			stmts = append(stmts, `ALTER TABLE `+ident(shadow)+`.`+ident(t)+` SET SCHEMA `+ident(live))
		}
		for _, s := range stmts {
			if _, err := tx.Exec(ctx, s); err != nil {
				return wrap("swap", err)
			}
		}
		if _, err := tx.Exec(ctx, `DELETE FROM `+ident(live)+`.projection_positions WHERE projection = $1`, name); err != nil {
			return wrap("swap positions", err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+ident(live)+`.projection_positions
			SELECT * FROM `+ident(shadow)+`.projection_positions WHERE projection = $1`, name); err != nil {
			return wrap("swap positions", err)
		}
		// The model is now the rebuild's: its catch-up, done, at its
		// version.
		if _, err := tx.Exec(ctx, `DELETE FROM `+ident(live)+`.projection_catchup WHERE projection = $1`, name); err != nil {
			return wrap("swap the catch-up state", err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+ident(live)+`.projection_catchup
			SELECT * FROM `+ident(shadow)+`.projection_catchup WHERE projection = $1`, name); err != nil {
			return wrap("swap the catch-up state", err)
		}
		return nil
	})
	if err != nil {
		return ReplayResult{}, err
	}
	swapped = true
	res.Swap = time.Since(swapBegan)
	res.Elapsed = time.Since(began)
	report("done", seen)
	cfg.Logger.InfoContext(ctx, "replay: swapped in the rebuilt read model", "projection", name,
		"events", seen, "caught_up_at_swap", res.CaughtUp, "swap", res.Swap, "elapsed", res.Elapsed)
	return res, nil
}

// resumableShadow returns the catch-up state of projection name in the
// shadow schema when that schema holds one at version (any version for
// 0): a rebuild of that version to go on with. Otherwise (no shadow, a
// shadow without its state, or of another version) it returns the zero
// state.
func resumableShadow(ctx context.Context, conn *pgxpool.Conn, shadow, name string, version int) (CatchUpState, error) {
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, ident(shadow)+".projection_catchup").Scan(&exists); err != nil || !exists {
		return CatchUpState{}, err
	}
	st, err := readCatchUpState(ctx, conn, ident(shadow)+".projection_catchup", name)
	var pgErr interface{ SQLState() string }
	if errors.As(err, &pgErr) && (pgErr.SQLState() == "42703" || pgErr.SQLState() == "42P01") {
		return CatchUpState{}, nil // a shadow whose migrations are still running
	}
	if err != nil || (version != 0 && st.ModelVersion() != version) {
		return CatchUpState{}, err
	}
	return st, nil
}

// catchUpToLive applies to the shadow tables, inside the swap transaction
// tx, every stored event of the aggregates whose live position is ahead
// of the shadow's, so that the swapped-in model is at least as far as the
// one it replaces. It returns the number of events applied.
func catchUpToLive(ctx context.Context, tx pgx.Tx, a *Applier, live, shadow string) (int, error) {
	name := a.cfg.Projection.Name()
	rows, err := tx.Query(ctx, `SELECT l.aggregate_type, l.aggregate_id, coalesce(s.seq, 0)
		FROM `+ident(live)+`.projection_positions l
		LEFT JOIN `+ident(shadow)+`.projection_positions s
			ON s.projection = l.projection AND s.aggregate_type = l.aggregate_type AND s.aggregate_id = l.aggregate_id
		WHERE l.projection = $1 AND l.seq > coalesce(s.seq, 0)`, name)
	if err != nil {
		return 0, fmt.Errorf("projections: replay %s: compare positions: %w", name, err)
	}
	type behind struct {
		ref eventstore.Ref
		seq int64
	}
	aggs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (behind, error) {
		var b behind
		return b, r.Scan(&b.ref.Type, &b.ref.ID, &b.seq)
	})
	if err != nil {
		return 0, fmt.Errorf("projections: replay %s: compare positions: %w", name, err)
	}
	if len(aggs) == 0 {
		return 0, nil
	}
	if _, err := tx.Exec(ctx, `SELECT set_config('search_path', $1, true)`, shadow); err != nil {
		return 0, fmt.Errorf("projections: replay %s: %w", name, err)
	}
	applied := 0
	var batch []eventstore.Envelope
	flush := func() error {
		out, err := a.applyTx(ctx, tx, batch)
		applied += out.Applied + out.Repaired
		batch = batch[:0]
		return err
	}
	for _, b := range aggs {
		events, err := a.cfg.Store.Load(ctx, b.ref, b.seq)
		if err != nil {
			return applied, fmt.Errorf("projections: replay %s: load %s after %d: %w", name, b.ref, b.seq, err)
		}
		batch = append(batch, events...)
		if len(batch) >= catchUpBatch {
			if err := flush(); err != nil {
				return applied, err
			}
		}
	}
	if err := flush(); err != nil {
		return applied, err
	}
	if _, err := tx.Exec(ctx, `SELECT set_config('search_path', $1, true)`, live); err != nil {
		return applied, fmt.Errorf("projections: replay %s: %w", name, err)
	}
	return applied, nil
}

// ShadowSchema is the schema a replay of projection name builds its
// tables in, beside the live schema: <live>_replay_<name>, with the live
// part shortened and hashed when the whole would pass Postgres' 63-byte
// identifier limit (a truncated name could be the live schema's own).
func ShadowSchema(live, name string) string { return besideSchema(live, "_replay_", name) }

// retiredSchema is where the swap moves the replaced tables before they
// are dropped.
func retiredSchema(live, name string) string { return besideSchema(live, "_retired_", name) }

func besideSchema(live, kind, name string) string {
	const maxIdent = 63
	s := strings.ToLower(live + kind + name)
	if len(s) <= maxIdent {
		return s
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(live + kind + name))
	suffix := fmt.Sprintf("_%08x", h.Sum32())
	return strings.ToLower(s[:maxIdent-len(suffix)]) + suffix
}

// ident quotes a Postgres identifier.
func ident(s string) string { return pgx.Identifier{s}.Sanitize() }

// ModelState is where a read model's build stands: the catch-up state of
// the rows serving reads (Built: Built.ModelVersion() is the version that
// built them) and, while a rebuild (a replay, or the Runner's automatic
// rebuild after a version change) fills its shadow, that rebuild's
// catch-up state (Rebuild; zero when none is under way or left).
type ModelState struct {
	Built, Rebuild CatchUpState
}

// ReadModelState reads the ModelState of projection name in db's current
// schema and its shadow schema (ShadowSchema).
func ReadModelState(ctx context.Context, db *pgxpool.Pool, name string) (ModelState, error) {
	conn, err := db.Acquire(ctx)
	if err != nil {
		return ModelState{}, fmt.Errorf("projections: %s: model state: %w", name, err)
	}
	defer conn.Release()
	var live string
	if err := conn.QueryRow(ctx, `SELECT coalesce(current_schema(), '')`).Scan(&live); err != nil {
		return ModelState{}, fmt.Errorf("projections: %s: model state: %w", name, err)
	}
	var st ModelState
	if st.Built, err = readCatchUpState(ctx, conn, "projection_catchup", name); err != nil {
		return ModelState{}, fmt.Errorf("projections: %s: model state: %w", name, err)
	}
	if st.Rebuild, err = resumableShadow(ctx, conn, ShadowSchema(live, name), name, 0); err != nil {
		return ModelState{}, fmt.Errorf("projections: %s: rebuild state: %w", name, err)
	}
	return st, nil
}
