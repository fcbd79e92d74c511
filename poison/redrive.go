package poison

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/eventstore"
)

// RedriverConfig configures a Redriver.
type RedriverConfig struct {
	// DB holds the table poison_redrives (migrations/postgres 009); its
	// search_path picks the schema. Required.
	DB *pgxpool.Pool
	// Publisher publishes the copies. Publish must return only once the
	// broker acknowledged the message (kafka.Publisher does). Required.
	Publisher message.Publisher
	// Brokers and Security reach the cluster the copies go to, where a
	// redrive interrupted after its publish is looked for. Brokers is
	// required.
	Brokers  []string
	Security kafka.Security
	// Actor is who redrives, recorded with each redrive. Required.
	Actor string
	// ClockSkew is how much earlier than a redrive's recorded start its
	// copy may carry a timestamp (Postgres' clock against the producer's);
	// the search for an interrupted redrive's copy starts that much
	// earlier (default 5 minutes).
	ClockSkew time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (c *RedriverConfig) setDefaults() {
	if c.ClockSkew == 0 {
		c.ClockSkew = 5 * time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports the first missing field as an
// *eventstore.ValidationError.
func (c RedriverConfig) Validate() error {
	switch {
	case c.DB == nil:
		return &eventstore.ValidationError{Field: "DB", Reason: "nil"}
	case c.Publisher == nil:
		return &eventstore.ValidationError{Field: "Publisher", Reason: "nil"}
	case len(c.Brokers) == 0:
		return &eventstore.ValidationError{Field: "Brokers", Reason: "no seed broker"}
	case c.Actor == "":
		return &eventstore.ValidationError{Field: "Actor", Reason: "empty: say who redrives"}
	case c.ClockSkew < 0:
		return &eventstore.ValidationError{Field: "ClockSkew", Reason: "negative"}
	}
	return c.Security.Validate()
}

// Outcome is what Redrive did with one message.
type Outcome string

// The outcomes of Redrive.
const (
	// Redriven: the copy was published now and the redrive recorded done.
	Redriven Outcome = "redriven"
	// AlreadyRedriven: a redrive of this poison message is recorded done;
	// nothing was published.
	AlreadyRedriven Outcome = "already redriven"
	// Recovered: an earlier redrive was interrupted after it recorded its
	// start; its copy was found on the target topic, so nothing was
	// published again and the redrive is now recorded done.
	Recovered Outcome = "recovered"
	// Busy: another redrive of the same message is running right now
	// (it holds the message's lock); nothing was published.
	Busy Outcome = "busy"
	// Failed: see Result.Err. Nothing is recorded done; a later Redrive
	// of the message finds out whether the copy went out.
	Failed Outcome = "failed"
)

// Result is one message's redrive.
type Result struct {
	Ref
	UUID string
	// Target is the topic the copy goes to.
	Target  string
	Outcome Outcome
	// Resumed is set when the message had an interrupted redrive whose
	// copy was not on the target topic, so it was published now.
	Resumed bool
	// By and At: who recorded the redrive done, and when (Redriven,
	// AlreadyRedriven, Recovered).
	By string
	At time.Time
	// Err is why the message could not be redriven (Failed).
	Err error
}

// Redriver redrives poison messages exactly once in effect (see
// Redrive). It is safe for concurrent use, also by several processes on
// one database.
type Redriver struct {
	cfg RedriverConfig
}

// NewRedriver validates cfg and returns a Redriver.
func NewRedriver(cfg RedriverConfig) (*Redriver, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("poison: redriver: %w", err)
	}
	return &Redriver{cfg: cfg}, nil
}

// ErrNoTable is returned (wrapped) when the database's schema has no
// poison_redrives table: run `eventpipe migrate`.
var ErrNoTable = errors.New("poison: no poison_redrives table in the database's schema: run `eventpipe migrate` (migrations/postgres 009)")

// Redrive publishes m again on the topic it was poisoned from (see
// Message.Redrive), at most once per poison message across every
// Redrive call, in this process or another:
//
//  1. It takes a Postgres session lock on the message (another redrive
//     holding it: Busy) and inserts the message's row in poison_redrives
//     as 'started', committed, before anything is published.
//  2. It publishes the copy and waits for the broker's acknowledgement.
//  3. It sets the row 'done'.
//
// A row found 'done' means the copy went out: AlreadyRedriven, nothing is
// published. A row found 'started' means a redrive stopped between 1
// and 3 (killed, or its publish failed): the copy may or may not be on
// the target topic, so Redrive looks for it there (a record carrying
// KeyRedrivenFrom = m's Ref, written since the row's start minus
// ClockSkew): found, it records the row done (Recovered); not found, it
// publishes and records done (Resumed). The lock is a session lock, so a
// killed process releases it as its connection closes.
//
// So the copy is published once, with one exception: a redrive whose
// process lost its Postgres session (the lock) while it kept running and
// still had its copy in flight can have it written after a later
// redrive looked for it, and the message is then published twice.
// Consumers are idempotent by command id and event id, which absorbs
// that second copy.
func (r *Redriver) Redrive(ctx context.Context, m Message) Result {
	res := Result{Ref: m.Ref, UUID: m.UUID, Outcome: Failed}
	topic, msg, err := m.Redrive()
	if err != nil {
		res.Err = err
		return res
	}
	res.Target = topic
	fail := func(what string, err error) Result {
		res.Outcome = Failed
		res.Err = fmt.Errorf("poison: redrive %s: %s: %w", m.Ref, what, tableErr(err))
		return res
	}
	conn, err := r.cfg.DB.Acquire(ctx)
	if err != nil {
		return fail("postgres", err)
	}
	defer conn.Release()
	key := "eventpipe.poison/" + m.Ref.String()
	var locked bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtextextended($1, 0))`, key).Scan(&locked); err != nil {
		return fail("lock", err)
	}
	if !locked {
		res.Outcome = Busy
		return res
	}
	defer func() {
		// A fresh context: the lock must go even when ctx ended.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := conn.Exec(uctx, `SELECT pg_advisory_unlock(hashtextextended($1, 0))`, key); err != nil {
			conn.Conn().Close(uctx) // closing the session releases the lock
		}
	}()
	tag, err := conn.Exec(ctx, `INSERT INTO poison_redrives (poison_topic, poison_partition, poison_offset, message_uuid, target_topic, state, actor)
		VALUES ($1, $2, $3, $4, $5, 'started', $6) ON CONFLICT DO NOTHING`,
		m.Topic, m.Partition, m.Offset, m.UUID, topic, r.cfg.Actor)
	if err != nil {
		return fail("record its start", err)
	}
	if tag.RowsAffected() == 0 {
		var (
			state, actor string
			started      time.Time
			done         *time.Time
		)
		if err := conn.QueryRow(ctx, `SELECT state, actor, started_at, done_at FROM poison_redrives
			WHERE poison_topic = $1 AND poison_partition = $2 AND poison_offset = $3`,
			m.Topic, m.Partition, m.Offset).Scan(&state, &actor, &started, &done); err != nil {
			return fail("read its record", err)
		}
		if state == "done" {
			res.Outcome, res.By = AlreadyRedriven, actor
			if done != nil {
				res.At = *done
			}
			return res
		}
		found, err := r.published(ctx, topic, m, started.Add(-r.cfg.ClockSkew))
		if err != nil {
			return fail("look for the copy of an interrupted redrive on "+topic, err)
		}
		if found {
			at, err := r.done(ctx, conn, m)
			if err != nil {
				return fail("record it done", err)
			}
			res.Outcome, res.By, res.At = Recovered, r.cfg.Actor, at
			r.cfg.Logger.InfoContext(ctx, "interrupted poison redrive found published", "poison", m.Ref.String(), "target", topic, "message_id", m.UUID)
			return res
		}
		res.Resumed = true
	}
	if err := r.cfg.Publisher.Publish(topic, msg); err != nil {
		return fail("publish to "+topic, err)
	}
	at, err := r.done(ctx, conn, m)
	if err != nil {
		return fail("record it done (the copy is published; a later redrive finds it)", err)
	}
	res.Outcome, res.By, res.At = Redriven, r.cfg.Actor, at
	r.cfg.Logger.InfoContext(ctx, "poison message redriven", "poison", m.Ref.String(), "target", topic, "message_id", m.UUID,
		"actor", r.cfg.Actor, "resumed", res.Resumed)
	return res
}

// done records m's redrive done and returns when.
func (r *Redriver) done(ctx context.Context, conn *pgxpool.Conn, m Message) (time.Time, error) {
	var at time.Time
	err := conn.QueryRow(ctx, `UPDATE poison_redrives SET state = 'done', done_at = now(), actor = $4
		WHERE poison_topic = $1 AND poison_partition = $2 AND poison_offset = $3 RETURNING done_at`,
		m.Topic, m.Partition, m.Offset, r.cfg.Actor).Scan(&at)
	return at, err
}

// published reports whether topic holds, since since, a copy of m
// (KeyRedrivenFrom = m.Ref).
func (r *Redriver) published(ctx context.Context, topic string, m Message, since time.Time) (bool, error) {
	found := false
	err := kafka.ReadTopic(ctx, kafka.Cluster{Brokers: r.cfg.Brokers, Security: r.cfg.Security}, topic, since, func(rec kafka.Record) bool {
		c := fromRecord(rec)
		found = c.Metadata.Get(KeyRedrivenFrom) == m.Ref.String() && c.UUID == m.UUID
		return !found
	})
	return found, err
}

// Redrives returns the recorded redrives of poison topic, by partition
// and offset: "started" or "done", who and when.
func Redrives(ctx context.Context, db *pgxpool.Pool, topic string) (map[Ref]Record, error) {
	rows, err := db.Query(ctx, `SELECT poison_partition, poison_offset, message_uuid, target_topic, state, actor, started_at, done_at
		FROM poison_redrives WHERE poison_topic = $1`, topic)
	if err != nil {
		return nil, fmt.Errorf("poison: redrives of %s: %w", topic, tableErr(err))
	}
	out := map[Ref]Record{}
	recs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Record, error) {
		rec := Record{Ref: Ref{Topic: topic}}
		err := row.Scan(&rec.Partition, &rec.Offset, &rec.UUID, &rec.Target, &rec.State, &rec.Actor, &rec.StartedAt, &rec.DoneAt)
		return rec, err
	})
	if err != nil {
		return nil, fmt.Errorf("poison: redrives of %s: %w", topic, tableErr(err))
	}
	for _, rec := range recs {
		out[rec.Ref] = rec
	}
	return out, nil
}

// Record is a recorded redrive.
type Record struct {
	Ref
	UUID, Target string
	// State is "started" (interrupted, or running now) or "done".
	State     string
	Actor     string
	StartedAt time.Time
	DoneAt    *time.Time
}

// tableErr turns Postgres' undefined table into ErrNoTable.
func tableErr(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" {
		return fmt.Errorf("%w (%v)", ErrNoTable, err)
	}
	return err
}
